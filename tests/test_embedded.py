"""The embedded default, as a user runs it: `ultron serve` on a data dir, the CLI beside it, restarts."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTRON_")}
    env.update(
        ULTRON_DATA_DIR=str(data_dir), ULTRON_EMBEDDING_PROVIDER="hash", ULTRON_REDACTION_ENABLED="false"
    )
    return env


def _cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "ultron.cli", *args],
        env=_env(data_dir),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def _postmasters(data_dir: Path) -> list[psutil.Process]:
    pgdata = str((data_dir / "pgdata").resolve())
    found = []
    for p in psutil.process_iter(attrs=("name", "cmdline")):
        cmd = p.info["cmdline"] or []
        if p.info["name"] == "postgres" and pgdata in cmd:
            found.append(p)
    return found


def _serve(data_dir: Path, port: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ultron.cli", "serve", "--port", str(port)],
        env=_env(data_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
    proc.kill()
    raise AssertionError("ultron serve did not become healthy")


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    return out


def test_serve_cli_alongside_restart_and_clean_stop(tmp_path):
    data_dir = tmp_path / "ultron-home"
    port = _free_port()
    hub = _serve(data_dir, port)
    try:
        base = f"http://127.0.0.1:{port}"
        created = httpx.post(
            f"{base}/memories/upload", json={"content": "uv lock fails behind a proxy"}, timeout=30
        )
        assert created.status_code == 201, created.text
        # The CLI shares the running hub's embedded server (same data dir), while it runs.
        out = _cli(
            data_dir,
            "memory",
            "upload",
            "--content",
            "gradle wrapper download blocked by the firewall",
            "--json",
        )
        assert json.loads(out.stdout)["decision"] == "created"
        assert httpx.get(f"{base}/memories/stats", timeout=30).json()["total"] == 2
        assert len(_postmasters(data_dir)) == 1
    finally:
        log = _stop(hub)
    assert "runs OPEN on loopback" in log
    deadline = time.monotonic() + 30
    while _postmasters(data_dir) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _postmasters(data_dir) == []  # the last holder stopped the server

    # The data outlives the server: a new hub on the same dir finds both memories.
    hub = _serve(data_dir, port)
    try:
        stats = httpx.get(f"http://127.0.0.1:{port}/memories/stats", timeout=30).json()
        assert stats["total"] == 2
    finally:
        _stop(hub)


def test_embedded_server_takes_its_memory_settings_from_ultron_conf(tmp_path):
    """The tuning file is written before every start: a new size applies at the next start."""
    import psycopg
    from sqlalchemy.engine import make_url

    from ultron.db.embedded import auto_shared_buffers, start_embedded, stop_embedded

    def shared_buffers() -> str:
        url = make_url(start_embedded(tmp_path, shared_buffers=size)).set(drivername="postgresql")
        try:
            with psycopg.connect(url.render_as_string(hide_password=False)) as conn:
                return str(conn.execute("SHOW shared_buffers").fetchone()[0])  # type: ignore[index]
        finally:
            stop_embedded(tmp_path)

    os.chmod(tmp_path, 0o755)
    size = "160MB"
    assert shared_buffers() == "160MB"
    size = None  # auto: an eighth of RAM within 128MB..2GB, as PostgreSQL prints it
    expected = int(auto_shared_buffers().removesuffix("MB"))
    shown = shared_buffers()
    assert shown == (f"{expected // 1024}GB" if expected % 1024 == 0 else f"{expected}MB")
    conf = (tmp_path / "pgdata" / "postgresql.conf").read_text()
    assert conf.count("include_if_exists = 'ultron.conf'") == 1  # not appended again on restart


def test_serve_restarts_its_embedded_server_after_the_postmaster_is_killed(tmp_path):
    data_dir = tmp_path / "ultron-home"
    port = _free_port()
    hub = _serve(data_dir, port)
    base = f"http://127.0.0.1:{port}"
    try:
        assert httpx.post(
            f"{base}/memories/upload", json={"content": "before the kill"}, timeout=30
        ).is_success
        [postmaster] = _postmasters(data_dir)
        postmaster.kill()  # SIGKILL: nothing of it is left to restart itself
        postmaster.wait(10)
        deadline = time.monotonic() + 120
        answered = None
        while time.monotonic() < deadline:
            try:
                answered = httpx.get(f"{base}/memories/stats", timeout=10)
                if answered.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        postmasters = len(_postmasters(data_dir))
    finally:
        log = _stop(hub)
    assert answered is not None and answered.status_code == 200, log[-3000:]
    assert answered.json()["total"] == 1  # the committed upload survived the kill
    assert postmasters == 1
    assert "had stopped (killed or crashed): restarted it" in log
