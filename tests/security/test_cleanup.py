"""Processes clean up after themselves (issue 16, found 10): a SIGKILLed worker's run is marked."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from sqlalchemy import select

from ultron.db import embedded
from ultron.db.models import WorkerRun
from ultron.hub import build_worker

CHILD = textwrap.dedent(
    """
    import sys, time, uuid
    from ultron.config import Settings
    from ultron.hub import Hub, build_worker
    hub = Hub.open(Settings(database_url=sys.argv[1], embedding_provider="hash", worker_lease_seconds=1.0,
                      redaction_enabled=False))
    worker = build_worker(hub, worker_id="doomed:1")
    worker._register()
    worker.heartbeat()
    run_id = worker._record_start(uuid.uuid4(), "consolidate")
    print(run_id, flush=True)
    time.sleep(600)  # "working": until the SIGKILL
    """
)


def test_a_sigkilled_workers_run_is_marked_interrupted(make_hub, db_url, tmp_path):
    hub = make_hub(worker_lease_seconds=1.0)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, db_url],
        stdout=subprocess.PIPE,
        text=True,
        cwd=os.getcwd(),
        env={**os.environ, "ULTRON_DATA_DIR": str(tmp_path)},
    )
    try:
        run_id = int(child.stdout.readline())  # type: ignore[union-attr]
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    with hub.db.session() as s:
        assert s.execute(select(WorkerRun.status).where(WorkerRun.id == run_id)).scalar_one() == "running"

    survivor = build_worker(hub, worker_id="survivor:2")
    survivor.heartbeat()  # within the dead worker's lease: still trusted
    with hub.db.session() as s:
        assert s.execute(select(WorkerRun.status).where(WorkerRun.id == run_id)).scalar_one() == "running"
    time.sleep(2 * 1.0 + 0.3)  # two leases without a heartbeat: it is gone
    survivor.heartbeat()
    with hub.db.session() as s:
        run = s.execute(select(WorkerRun).where(WorkerRun.id == run_id)).scalar_one()
    assert run.status == "interrupted" and run.finished_at is not None
    assert "abandoned" in run.errors[-1]


HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from ultron.db.embedded import start_embedded
    start_embedded(Path(sys.argv[1]))
    print("up", flush=True)
    time.sleep(600)
    """
)


@pytest.fixture()
def data_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ultron-cleanup-"))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        embedded.force_stop(path)
        shutil.rmtree(path, ignore_errors=True)


def _holder(data_dir: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(data_dir)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "up"
    return child


def _running(data_dir: Path) -> bool:
    pid_file = embedded.pgdata_dir(data_dir) / "postmaster.pid"
    return pid_file.exists() and psutil.pid_exists(int(pid_file.read_text().split()[0]))


@pytest.mark.slow
def test_the_embedded_server_stops_when_its_last_live_user_exits(data_dir):
    killed = _holder(data_dir)
    killed.send_signal(signal.SIGKILL)  # exits without releasing its handle
    killed.wait(timeout=30)
    assert _running(data_dir)
    embedded.start_embedded(data_dir)  # another user joins, then leaves: it is the last live one
    embedded.stop_embedded(data_dir)
    deadline = time.monotonic() + 30
    while _running(data_dir) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _running(data_dir)


@pytest.mark.slow
def test_ultron_db_stop_stops_the_embedded_server(data_dir):
    holder = _holder(data_dir)
    try:
        assert _running(data_dir)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ULTRON_")}
        out = subprocess.run(
            [sys.executable, "-m", "ultron.cli", "db", "stop", "--data-dir", str(data_dir)],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert out.returncode == 0, out.stderr
        assert "stopped" in out.stderr
        assert not _running(data_dir)
    finally:
        holder.kill()
        holder.wait(timeout=30)
