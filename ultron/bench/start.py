"""`ultron bench start`: how fast the first hour feels -- `ultron --help`, a CLI search through a running
hub, the MCP stdio handshake, and how many lines `ultron serve` prints before it is ready.

Every figure is the median wall time of fresh processes, printed next to a baseline measured in the same
run (a bare interpreter start; the same search sent straight over HTTP), so a busy machine shows up in
both.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

READY_SECONDS = 180.0  # a fresh data dir runs initdb and every migration first
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-03-26",
        "capabilities": {},
        "clientInfo": {"name": "ultron-bench-start", "version": "0"},
    },
}


def _ultron(*args: str) -> list[str]:
    return [sys.executable, "-m", "ultron.cli", *args]


def _median(times: Callable[[], float], repeat: int) -> float:
    return statistics.median(times() for _ in range(repeat))


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


CPU: dict[str, list[float]] = {}  # CPU seconds of each measured child, by label: steadier on a busy box


def _wall(argv: list[str], env: dict[str, str], label: str = "") -> float:
    start, cpu = time.perf_counter(), _children_cpu()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    took = time.perf_counter() - start
    CPU.setdefault(label, []).append(_children_cpu() - cpu)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[2:])} failed: {proc.stderr.strip()[-500:]}")
    return took


def _cpu(label: str) -> str:
    return f"cpu {statistics.median(CPU[label]):.2f} s"


def _initialize(argv: list[str], env: dict[str, str], label: str) -> float:
    """Seconds from starting `ultron mcp ...` to its answer to `initialize`."""
    start, cpu = time.perf_counter(), _children_cpu()
    proc = subprocess.Popen(
        argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(INITIALIZE) + "\n")
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        took = time.perf_counter() - start
        if "result" not in answer:
            raise RuntimeError(f"initialize failed: {answer}")
        return took
    finally:
        proc.kill()
        proc.wait()
        CPU.setdefault(label, []).append(_children_cpu() - cpu)


def _start_hub(data_dir: Path, port: int, env: dict[str, str]) -> tuple[subprocess.Popen[str], list[str]]:
    """`ultron serve` on a fresh data dir; the lines it printed by the time /health answers."""
    # start-up: loaded when the command runs, not when the CLI builds its parser
    import httpx

    log = data_dir.parent / "serve.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            _ultron("serve", "--data-dir", str(data_dir), "--port", str(port)),
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
        )
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                # The access-log line of the readiness poll that succeeded is ours, not start-up's.
                lines = log.read_text().splitlines()
                return proc, [line for line in lines if "GET /health" not in line]
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"ultron serve did not become ready:\n{log.read_text()[-2000:]}")


def run(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    import httpx

    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.web.serve import free_port

    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTRON_")}
    repeat = args.repeat
    rows: list[tuple[str, str]] = []
    baseline = _median(lambda: _wall([sys.executable, "-c", "pass"], env, "pass"), repeat)
    rows.append(("python -c pass (baseline)", f"{baseline:.2f} s  {_cpu('pass')}"))
    help_s = _median(lambda: _wall(_ultron("--help"), env, "help"), repeat)
    rows.append(("ultron --help", f"{help_s:.2f} s  {_cpu('help')}  ({help_s / baseline:.1f}x baseline)"))

    with tempfile.TemporaryDirectory(prefix="ultron-bench-start-") as tmp:
        data_dir = Path(tmp) / "home"
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        hub, lines = _start_hub(data_dir, port, env)
        try:
            rows.append(("ultron serve: lines printed until ready", f"{len(lines)}  (at most 15)"))
            with httpx.Client(base_url=url, timeout=60) as http:
                http.post("/memories/upload", json=_MEMORY).raise_for_status()
                query = {"query": "docker build proxy timeout"}
                http.post("/memories/search", json=query).raise_for_status()  # the model is warm

                def direct() -> float:
                    start = time.perf_counter()
                    http.post("/memories/search", json=query).raise_for_status()
                    return time.perf_counter() - start

                direct_s = _median(direct, repeat)
            client_env = {**env, "ULTRON_DATA_DIR": str(data_dir)}  # found through the hub's record
            search = _ultron("memory", "search", query["query"])
            cli_s = _median(lambda: _wall(search, client_env, "search"), repeat)
            rows.append(("search sent straight over HTTP (baseline)", f"{direct_s:.2f} s"))
            rows.append(
                (
                    "ultron memory search through the hub",
                    f"{cli_s:.2f} s  {_cpu('search')} (client)  ({cli_s / direct_s:.1f}x direct)",
                )
            )
            init = _median(lambda: _initialize(_ultron("mcp", "--url", url), env, "mcp"), repeat)
            rows.append(
                (
                    "ultron mcp --url: initialize answered",
                    f"{init:.2f} s  {_cpu('mcp')}  ({init / baseline:.1f}x baseline)",
                )
            )
            local = _ultron("mcp", "--local", "--data-dir", str(data_dir))
            init_local = _median(lambda: _initialize(local, env, "mcp-local"), repeat)
            rows.append(
                (
                    "ultron mcp --local: initialize answered",
                    f"{init_local:.2f} s  {_cpu('mcp-local')} (to the answer and the hub open behind it)  "
                    f"({init_local / baseline:.1f}x baseline)",
                )
            )
        finally:
            hub.send_signal(signal.SIGTERM)
            hub.wait(timeout=60)
    width = max(len(name) for name, _ in rows)
    print(f"bench-start: medians of {repeat} fresh processes each; load average {os.getloadavg()[0]:.1f}")
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    if args.show_startup:
        print("ultron serve printed:", *lines, sep="\n  ")
    return 0


_MEMORY: dict[str, Any] = {
    "content": "docker build fails with a proxy timeout when pulling the base image",
    "resolution": "pass HTTP_PROXY and HTTPS_PROXY as build args",
}


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "bench-start",
        help="start-up figures: `ultron --help`, a CLI search through a hub, MCP initialize, start-up lines",
    )
    p.add_argument("--repeat", type=int, default=5, help="fresh processes per figure (the median is shown)")
    p.add_argument("--show-startup", action="store_true", help="also print what `ultron serve` printed")
    p.set_defaults(func=run)
