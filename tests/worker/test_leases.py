"""Leased per-item work: exactly once across workers, retaken after a dead worker's lease expires,
backoff and parking with the error visible."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select, text

from tests.worker.conftest import SESSIONS, RecordingPipeline, ingest_sessions
from ultron.db.models import Memory, MemorySource, SessionRecord, TaskSegment
from ultron.hub import build_worker
from ultron.ingestion.schemas import IngestFile
from ultron.tenancy import authenticate, create_agent, local_actor
from ultron.worker import queues
from ultron.worker.queues import SCORE, SEGMENT, LeasePolicy
from ultron.worker.runner import ITEM_STEPS, Worker
from ultron.worker.status import worker_status


def _count(hub, stmt):  # type: ignore[no-untyped-def]
    with hub.db.session() as session:
        return session.execute(stmt).scalar_one()


def test_two_workers_process_every_pending_item_exactly_once(worker_hub):
    hub_a, hub_b = worker_hub(), worker_hub()
    ingest_sessions(hub_a, 8)
    recorders = [RecordingPipeline(hub_a), RecordingPipeline(hub_b)]
    workers = [
        build_worker(hub_a, worker_id="a", steps=recorders[0]),
        build_worker(hub_b, worker_id="b", steps=recorders[1]),
    ]
    barrier = threading.Barrier(2)

    def run(worker: Worker) -> None:
        barrier.wait()
        worker.run_cycle(ITEM_STEPS)

    threads = [threading.Thread(target=run, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    calls = recorders[0].calls + recorders[1].calls
    assert max(calls.values()) == 1, "an item was processed twice"
    kinds = Counter(name for name, _ in calls)
    segments = _count(hub_a, select(func.count()).select_from(TaskSegment))
    assert kinds["segment_session"] == 8 and kinds["score_segment"] == segments
    assert _count(hub_a, select(func.count()).where(SessionRecord.needs_segmentation)) == 0
    assert _count(hub_a, select(func.count()).where(TaskSegment.stage.in_(["score", "extract"]))) == 0
    assert _count(hub_a, select(func.count()).where(TaskSegment.lease_owner.is_not(None))) == 0


def _lease_as_dead_worker(hub, seconds: float):  # type: ignore[no-untyped-def]
    with hub.db.session() as session:
        return queues.lease(session, SEGMENT, "dead-worker", LeasePolicy(seconds, 5, 0.0))[0]


def test_an_abandoned_lease_is_taken_up_after_it_expires(worker_hub):
    hub = worker_hub()
    ingest_sessions(hub, 1)
    item = _lease_as_dead_worker(hub, 1.5)
    worker = build_worker(hub, worker_id="alive", steps=RecordingPipeline(hub))
    first = worker.run_cycle(("segment",))[0]
    assert first.counts["done"] == 0  # still leased by the dead worker
    time.sleep(1.6)
    second = worker.run_cycle(("segment",))[0]
    assert second.counts["done"] == 1
    with hub.db.session() as session:
        record = session.scalars(select(SessionRecord).where(SessionRecord.id == item.id)).one()
        assert record.needs_segmentation is False and record.lease_owner is None and record.attempts == 0


def test_sigkill_mid_item_leaves_it_to_another_worker_with_no_duplicate_memories(worker_hub, settings):
    hub = worker_hub(worker_lease_seconds=2.0)
    ingest_sessions(hub, 1)
    code = (
        "import sys, time\n"
        "from ultron.config import Settings\n"
        "from ultron.hub import Hub, build_worker\n"
        "from tests.worker.conftest import RecordingPipeline\n"
        "hub = Hub.open(Settings())\n"
        "def stall(name, item_id):\n"
        "    print('working', flush=True); time.sleep(600)\n"
        "doomed = build_worker(hub, worker_id='doomed', steps=RecordingPipeline(hub, stall=stall))\n"
        "doomed.run_cycle(('segment',))\n"
    )
    env = {
        **os.environ,
        "ULTRON_DATABASE_URL": settings.database_url.get_secret_value(),
        "ULTRON_EMBEDDING_PROVIDER": "hash",
        "ULTRON_REDACTION_ENABLED": "false",
        "ULTRON_INGEST_SEGMENT_INLINE": "false",
        "ULTRON_WORKER_LEASE_SECONDS": "2",
    }
    child = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "working"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        child.kill()
    with hub.db.session() as session:
        record = session.execute(select(SessionRecord)).scalar_one()
        assert record.lease_owner == "doomed" and record.needs_segmentation  # its work rolled back
    recorder = RecordingPipeline(hub)
    worker = build_worker(hub, worker_id="heir", steps=recorder)
    time.sleep(2.1)
    worker.run_cycle(ITEM_STEPS)
    worker.run_cycle(ITEM_STEPS)  # nothing left to do: no item runs twice
    assert max(recorder.calls.values()) == 1
    memories = _count(hub, select(func.count()).select_from(Memory))
    sources = _count(hub, select(func.count()).select_from(MemorySource))
    assert memories > 0 and sources == memories
    with hub.db.session() as session:
        hashes = session.execute(select(Memory.content_hash)).scalars().all()
    assert len(hashes) == len(set(hashes))


def test_failures_back_off_then_park_with_the_error_visible(worker_hub):
    hub = worker_hub(worker_max_attempts=2)
    ingest_sessions(hub, 1)
    worker = build_worker(hub, worker_id="w", steps=RecordingPipeline(hub, fail={"segment_session"}))
    first = worker.run_cycle(("segment",))[0]
    assert first.counts["failed"] == 1 and first.status == "ok"
    with hub.db.session() as session:
        record = session.execute(select(SessionRecord)).scalar_one()
        assert record.attempts == 1 and "exploded" in record.last_error and record.parked_at is None
        assert record.lease_owner is None
    second = worker.run_cycle(("segment",))[0]
    assert second.counts["parked"] == 1 and "parked after 2 attempts" in second.errors[0]
    third = worker.run_cycle(("segment",))[0]
    assert third.counts == {"done": 0, "failed": 0, "parked": 0, "lost": 0}  # never retried forever
    with hub.db.session() as session:
        status = worker_status(session, None, lease_seconds=30)
    assert [(p.queue, p.attempts) for p in status.parked] == [("segment", 2)]
    assert "exploded" in status.parked[0].last_error
    assert [(q.queue, q.parked) for q in status.queues] == [("segment", 1)]


def test_backoff_doubles_with_each_attempt(worker_hub):
    hub = worker_hub(worker_retry_base_seconds=100.0)
    ingest_sessions(hub, 1)
    worker = build_worker(hub, worker_id="w", steps=RecordingPipeline(hub, fail={"segment_session"}))
    worker.run_cycle(("segment",))
    with hub.db.session() as session:
        delay = session.execute(
            text("SELECT extract(epoch FROM next_attempt_at - now()) FROM sessions")
        ).scalar_one()
        assert 90 < delay <= 100
        session.execute(text("UPDATE sessions SET next_attempt_at = now()"))
    worker.run_cycle(("segment",))
    with hub.db.session() as session:
        delay = session.execute(
            text("SELECT extract(epoch FROM next_attempt_at - now()) FROM sessions")
        ).scalar_one()
    assert 190 < delay <= 200


def test_heartbeat_extends_held_leases_and_stop_releases_them(worker_hub):
    hub = worker_hub()
    ingest_sessions(hub, 2)
    worker = build_worker(hub, worker_id="w", steps=RecordingPipeline(hub))
    with hub.db.session() as session:
        leased = queues.lease(session, SEGMENT, "w", LeasePolicy(5.0, 5, 0.0), limit=2)
    assert len(leased) == 2
    worker.heartbeat()
    with hub.db.session() as session:
        left = session.execute(text("SELECT min(lease_expires_at - now()) FROM sessions")).scalar_one()
    assert left.total_seconds() > 25  # extended to the worker's 30 s lease
    worker._unregister()
    with hub.db.session() as session:
        rows = session.execute(select(SessionRecord.lease_owner, SessionRecord.attempts)).all()
    assert all(owner is None and attempts == 0 for owner, attempts in rows)


def test_a_caller_that_waits_drains_only_its_tenant_through_the_same_leases(worker_hub):
    """process_due (POST /trajectory/process, the SDK, the demo) is the worker's drain narrowed to one
    tenant: another tenant's items stay queued, an item another worker holds is left to it."""
    hub = worker_hub()
    ingest_sessions(hub, 3)
    with hub.db.session() as session:
        _, key = create_agent(session, "bob", "other")
        bob = authenticate(session, key)
        files = [IngestFile(f"bob-{i}.jsonl", (SESSIONS / "multi_task.jsonl").read_bytes()) for i in range(2)]
        hub.ingestion.ingest_files(session, bob, files)
    with hub.db.session() as session:
        mine = local_actor(session).tenant_id
        held = queues.lease(session, SEGMENT, "busy", LeasePolicy(60.0, 5, 0.0), tenant_id=mine)[0]
        # One of bob's sessions was abandoned by dying workers: its attempts ran out through expired leases.
        abandoned = session.execute(
            select(SessionRecord.id).where(SessionRecord.tenant_id == bob.tenant_id).limit(1)
        ).scalar_one()
        session.execute(
            text(
                "UPDATE sessions SET attempts = :n, lease_owner = 'dead', "
                "lease_expires_at = now() - interval '1 minute' WHERE id = :id"
            ),
            {"n": hub.settings.worker_max_attempts, "id": abandoned},
        )
    counts = build_worker(hub).process_due(mine)
    assert counts["sessions"] == 2 and counts["failed"] == 0 and counts["scored"] == counts["new_segments"]
    with hub.db.session() as session:
        queued = session.execute(
            select(SessionRecord.id, SessionRecord.tenant_id, SessionRecord.lease_owner).where(
                SessionRecord.needs_segmentation
            )
        ).all()
    assert {(r.id, r.lease_owner) for r in queued if r.tenant_id == mine} == {(held.id, "busy")}
    assert sum(r.tenant_id == bob.tenant_id for r in queued) == 2
    with hub.db.session() as session:  # my tenant's wait parked nothing of bob's; the worker's own pass does
        assert session.get(SessionRecord, (abandoned, bob.tenant_id)).parked_at is None
        assert queues.park_abandoned(session, LeasePolicy(60.0, hub.settings.worker_max_attempts, 0.0)) == 1


def test_sessions_are_leased_in_the_order_they_happened_and_segments_in_order(worker_hub):
    """Which duplicate survives a merge and which cluster a memory starts follow the order the worker takes
    items in: the sessions of one upload (due at the same instant) in the order they happened, a session's
    segments in their order -- not by random id, so the same upload gives the same result on every run."""
    hub = worker_hub()
    ingest_sessions(hub, 6)
    with hub.db.session() as session:
        ids = session.scalars(select(SessionRecord.id).order_by(SessionRecord.id)).all()
        start = datetime(2026, 1, 1, tzinfo=UTC)
        happened = {sid: start + timedelta(hours=h) for sid, h in zip(ids, (4, 0, 5, 2, 1, 3), strict=True)}
        for sid, at in happened.items():
            session.execute(
                text("UPDATE sessions SET started_at = :at, next_attempt_at = now() WHERE id = :id"),
                {"at": at, "id": sid},
            )
    with hub.db.session() as session:
        leased = queues.lease(session, SEGMENT, "w", LeasePolicy(30, 5, 0.0), limit=6)
        session.rollback()
    assert [item.id for item in leased] == sorted(ids, key=happened.__getitem__)
    build_worker(hub, worker_id="w", steps=RecordingPipeline(hub)).run_cycle(("segment",))
    with hub.db.session() as session:
        session.execute(text("UPDATE task_segments SET next_attempt_at = now()"))  # all due at one instant
        order = {g.id: (g.session_id, g.segment_index) for g in session.scalars(select(TaskSegment)).all()}
        leased = queues.lease(session, SCORE, "w", LeasePolicy(30, 5, 0.0), limit=len(order))
        session.rollback()
    got = [order[item.id] for item in leased]
    assert len(got) == len(order) > 6 and got == sorted(got)
