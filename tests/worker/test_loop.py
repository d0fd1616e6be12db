"""The worker loop: a NOTIFY from ingest wakes it within a second; SIGTERM mid-cycle exits 0."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import psycopg
from sqlalchemy import select, text

from tests.worker.conftest import add_memories, ingest_sessions
from ultron.db.models import SessionRecord
from ultron.hub import build_worker


def test_a_notify_from_ingest_wakes_a_sleeping_worker_within_a_second(worker_hub):
    hub = worker_hub(worker_poll_seconds=60.0, decay_interval_hours=24.0)
    worker = build_worker(hub, worker_id="sleeper")
    thread = threading.Thread(target=worker.run_forever)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while worker._listener is None or worker._current_step is not None or not _ran_first_cycle(hub):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.3)  # now waiting on LISTEN, its poll 60 s away
        ingest_sessions(hub, 1)  # commits, and with it ingest's pg_notify('ultron_work', tenant)
        start = time.monotonic()  # Postgres delivered the NOTIFY at that commit
        while worker.wakeups == 0:
            assert time.monotonic() - start < 1.0, "the worker slept through the NOTIFY"
            time.sleep(0.01)
        while True:
            with hub.db.session() as session:
                if not session.execute(select(SessionRecord.needs_segmentation)).scalar_one():
                    break
            assert time.monotonic() - start < 20
            time.sleep(0.05)
    finally:
        worker.stop()
        thread.join(timeout=30)
    assert not thread.is_alive()


def _ran_first_cycle(hub) -> bool:  # type: ignore[no-untyped-def]
    with hub.db.session() as session:
        return bool(
            session.execute(text("SELECT count(*) FROM worker_runs WHERE step = 'consolidate'")).scalar()
        )


def test_sigterm_mid_cycle_finishes_the_step_and_exits_0(hub, settings):
    tenant_id, ids = add_memories(hub, [{"hit_count": i, "last_hit_days": 1} for i in range(20)])
    url = settings.database_url.get_secret_value()
    libpq = url.replace("postgresql+psycopg://", "postgresql://")
    env = {
        **os.environ,
        "ULTRON_DATABASE_URL": url,
        "ULTRON_EMBEDDING_PROVIDER": "hash",
        "ULTRON_REDACTION_ENABLED": "false",
        "ULTRON_CONSOLIDATE_ENABLED": "true",
    }
    with psycopg.connect(libpq) as blocker:
        # Hold the most used memory's row: the rebalance (which must make it HOT) waits on it mid-cycle.
        blocker.execute("SELECT 1 FROM memories WHERE id = %s FOR UPDATE", (ids[-1],))
        child = subprocess.Popen([sys.executable, "-m", "ultron.cli", "worker"], env=env)
        try:
            deadline = time.monotonic() + 60
            while True:
                with hub.db.session() as session:
                    running = session.execute(
                        text("SELECT 1 FROM worker_runs WHERE step = 'rebalance' AND status = 'running'")
                    ).first()
                if running:
                    break
                assert time.monotonic() < deadline and child.poll() is None
                time.sleep(0.1)
            time.sleep(0.3)
            child.send_signal(signal.SIGTERM)
            time.sleep(0.3)
            blocker.rollback()
            assert child.wait(timeout=60) == 0
        finally:
            child.kill()
    with hub.db.session() as session:
        steps = dict(session.execute(text("SELECT step, status FROM worker_runs")).all())
        stopped = session.execute(text("SELECT stopped_at FROM workers")).scalar_one()
    assert steps["rebalance"] == "interrupted"  # the step finished; the cycle stopped after it
    assert "consolidate" not in steps and "evolution" not in steps
    assert stopped is not None
    with hub.db.session() as session:
        assert (
            session.execute(text("SELECT tier FROM memories WHERE id = :i"), {"i": ids[-1]}).scalar() == "hot"
        )


def test_serve_with_worker_runs_it_off_the_event_loop_and_stops_it_at_shutdown(worker_hub, settings):
    hub = worker_hub()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "ULTRON_DATABASE_URL": settings.database_url.get_secret_value(),
        "ULTRON_EMBEDDING_PROVIDER": "hash",
        "ULTRON_REDACTION_ENABLED": "false",
        "ULTRON_INGEST_SEGMENT_INLINE": "false",
    }
    cmd = [sys.executable, "-m", "ultron.cli", "serve", "--with-worker", "--port", str(port)]
    child = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and child.poll() is None
            time.sleep(0.2)
        ingest_sessions(hub, 1)  # the in-process worker picks it up on the NOTIFY
        while True:
            with hub.db.session() as session:
                if not session.execute(select(SessionRecord.needs_segmentation)).scalar_one():
                    break
            assert time.monotonic() < deadline
            time.sleep(0.1)
        status = httpx.get(f"http://127.0.0.1:{port}/worker/status", timeout=5).json()
        assert [w["alive"] for w in status["workers"]] == [True]
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=60) == 0
    finally:
        child.kill()
    with hub.db.session() as session:
        assert session.execute(text("SELECT stopped_at FROM workers")).scalar_one() is not None
