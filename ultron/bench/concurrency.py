"""`ultron bench concurrency`: upload throughput of N concurrent agents against one, through HTTP.

The real app under uvicorn in its own process (so the clients' threads do not share its interpreter),
on a fresh database of an embedded server; N agents, each with its own key, upload distinct synthetic
memories (ultron.bench.core.Corpus) one request at a time. Phases run one agent, then N, then one again (the
machine's load drifts; the single-agent figure is the mean of the two). The ratio, not the absolute
rate, is the figure: aggregate throughput with N agents over one agent's.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from typing import Any

_SERVER = """
import sys, uvicorn
from ultron.api.app import create_app
from ultron.config import Settings
from ultron.hub import Hub
hub = Hub.open(Settings(database_url=sys.argv[1], embedding_provider=sys.argv[2], hit_flush_seconds=0))
uvicorn.run(create_app(hub), host="127.0.0.1", port=int(sys.argv[3]), log_level="warning")
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "bench-concurrency", help="upload throughput of N concurrent agents against one (HTTP, same run)"
    )
    p.add_argument("--database-url", dest="database_url", help="benchmark on this server (a new database)")
    p.add_argument("--clients", type=int, default=8, help="concurrent agents")
    p.add_argument("--uploads", type=int, default=160, help="uploads per phase (split over the agents)")
    p.add_argument(
        "--embedder", choices=("local", "hash"), default="local", help="local e5 (default) or hash"
    )
    p.set_defaults(func=run)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _phase(url: str, keys: list[str], items: list[dict[str, str]]) -> tuple[float, list[float]]:
    """Upload `items` spread over one thread per key; (seconds, per-request latencies)."""
    # start-up: loaded when the command runs, not when the CLI builds its parser
    import httpx

    latencies: list[float] = []
    lock = threading.Lock()
    shares = [items[n :: len(keys)] for n in range(len(keys))]
    errors: list[str] = []

    def agent(key: str, share: list[dict[str, str]]) -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120) as http:
            for item in share:
                start = time.perf_counter()
                r = http.post("/memories/upload", json=item)
                took = time.perf_counter() - start
                with lock:
                    latencies.append(took)
                    if r.status_code >= 300:
                        errors.append(f"{r.status_code} {r.text[:200]}")

    threads = [threading.Thread(target=agent, args=(k, s)) for k, s in zip(keys, shares, strict=True)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"{len(errors)} uploads failed, first: {errors[0]}")
    return time.perf_counter() - start, latencies


def run(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    import httpx
    import psycopg

    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.bench.core import Corpus, _admin_url, _pct, _server
    from ultron.config import Settings
    from ultron.hub import Hub
    from ultron.tenancy import create_agent

    corpus = Corpus(seed=11)
    name = f"ultron_cbench_{uuid.uuid4().hex[:8]}"
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with _server(args.database_url) as server:
        admin = _admin_url(server)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        db_url = _admin_url(server, name)
        server_proc = None
        try:
            hub = Hub.open(Settings(database_url=db_url, embedding_provider=args.embedder))
            with hub.db.session() as s:
                keys = [create_agent(s, f"agent{n}", "bench")[1] for n in range(args.clients)]
            hub.close()
            env = {**os.environ, "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}
            server_proc = subprocess.Popen(
                [sys.executable, "-c", _SERVER, db_url, args.embedder, str(port)], env=env
            )
            for _ in range(600):
                try:
                    if httpx.get(url + "/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.2)
            else:
                raise RuntimeError("the hub did not come up")
            _phase(url, keys[:1], [corpus.memory() for _ in range(8)])  # warm: model, pools, plans
            runs: dict[str, list[tuple[float, list[float]]]] = {"one": [], "many": []}
            for label, agents in (("one", keys[:1]), ("many", keys), ("one", keys[:1])):
                items = [corpus.memory() for _ in range(args.uploads)]
                runs[label].append(_phase(url, agents, items))
                print(f"  {label}: {runs[label][-1][0]:.1f} s", file=sys.stderr)
        finally:
            if server_proc is not None:
                server_proc.terminate()
                server_proc.wait(timeout=30)
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    one = sum(args.uploads / s for s, _ in runs["one"]) / len(runs["one"])
    many = args.uploads / runs["many"][0][0]
    lat_one = [x for _, lats in runs["one"] for x in lats]
    lat_many = runs["many"][0][1]
    print(
        f"ultron bench concurrency: {args.embedder} embedder, heuristic LLM, redaction "
        f"{'on' if Settings().redaction_enabled else 'off'}; uvicorn + the app in one process, "
        f"{args.uploads} distinct uploads per phase, {os.cpu_count()} CPUs"
    )
    print(
        f"1 agent:  {one:7.1f} uploads/s (p50 {1000 * _pct(lat_one, 0.5):.0f} ms, "
        f"p95 {1000 * _pct(lat_one, 0.95):.0f} ms; mean of the phases before and after)"
    )
    print(
        f"{args.clients} agents: {many:7.1f} uploads/s (p50 {1000 * _pct(lat_many, 0.5):.0f} ms, "
        f"p95 {1000 * _pct(lat_many, 0.95):.0f} ms)"
    )
    print(f"aggregate throughput, {args.clients} agents / 1: {many / one:.2f}x (target >= 1.6x)")
    return 0
