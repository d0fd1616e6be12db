"""The cluster step: an upload stores its memory and leaves its cluster to the worker, which assigns it at
its next tick through the cluster queue's lease protocol (ultron/clusters/pending.py)."""

from __future__ import annotations

import threading
import time

from sqlalchemy import func, select, text

from ultron.bench.core import Corpus
from ultron.db.models import ClusterMember, ClusterQueueItem, Memory
from ultron.db.queries import q
from ultron.hub import build_worker
from ultron.sdk import Ultron
from ultron.tenancy import local_actor
from ultron.worker.runner import ITEM_STEPS

TEXTS = [
    "pytest fixtures with scope=session leak state between database tests",
    "docker build cache misses when COPY comes before pip install",
    "alembic autogenerate misses a server default change on Postgres",
    "gunicorn worker killed by the OOM killer during the nightly report export",
]


def _members(hub) -> dict:  # type: ignore[no-untyped-def,type-arg]
    with hub.db.session() as s:
        return dict(s.execute(select(ClusterMember.memory_id, ClusterMember.cluster_id)).all())


def _queued(hub) -> int:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return int(s.scalar(select(func.count()).select_from(ClusterQueueItem)) or 0)


def test_an_upload_is_found_at_once_and_gets_its_cluster_at_the_next_worker_tick(worker_hub):  # type: ignore[no-untyped-def]
    hub = worker_hub()
    alice = Ultron(hub=hub, agent="alice")
    record = alice.upload_memory(TEXTS[0], "CI", "use function-scoped fixtures")
    found = alice.search_memories("pytest fixtures leak state between tests")
    assert record.id in [r.record.id for r in found]  # search never waits for the cluster
    assert record.id not in _members(hub)  # the request did not assign it
    outcome = next(o for o in build_worker(hub).run_cycle(ITEM_STEPS, quiet=True) if o.step == "cluster")
    assert outcome.status == "ok", outcome.errors
    assert outcome.counts["assigned"] == 1
    assert record.id in _members(hub)  # one tick
    assert _queued(hub) == 0


def test_a_batch_is_assigned_in_upload_order_as_one_assign_per_memory_would(worker_hub):  # type: ignore[no-untyped-def]
    """The worker's batch ends where one `assign` per memory, in upload order, ends (the request's old
    behaviour): the same memberships when the clusters are made again one `assign` at a time."""
    hub = worker_hub(cluster_similarity_threshold=0.5)
    corpus = Corpus(seed=5)
    items = [corpus.memory() for _ in range(60)]
    result = Ultron(hub=hub, agent="alice").upload_batch(items)
    ids = [r.memory_id for r in result.results if r.decision == "created"]
    assert len(ids) > 30
    build_worker(hub).run_cycle(("cluster",), quiet=True)
    got = _members(hub)
    assert set(got) == set(ids) and _queued(hub) == 0
    with hub.db.session() as s:
        s.execute(text("DELETE FROM cluster_members"))
        s.execute(text("DELETE FROM knowledge_clusters"))
    with hub.db.session() as s:
        tenant = local_actor(s).tenant_id
        for memory_id in ids:
            vector = s.scalar(text("SELECT embedding FROM memories WHERE id = :id"), {"id": memory_id})
            hub.clusters.assign(s, tenant, memory_id, vector)
    want = _members(hub)

    def groups(members: dict) -> list:  # type: ignore[type-arg]
        first: dict = {}  # type: ignore[type-arg]
        return [first.setdefault(members[m], len(first)) for m in ids]

    assert groups(got) == groups(want)
    assert len(set(got.values())) > 1


def test_a_memory_merged_away_or_made_private_before_the_tick_gets_no_cluster(worker_hub):  # type: ignore[no-untyped-def]
    hub = worker_hub()
    alice = Ultron(hub=hub, agent="alice")
    kept = alice.upload_memory(TEXTS[1])
    gone = alice.upload_memory(TEXTS[2])
    with hub.db.session() as s:
        s.execute(text("UPDATE memories SET status = 'archived' WHERE id = :id"), {"id": gone.id})
    build_worker(hub).run_cycle(("cluster",), quiet=True)
    assert set(_members(hub)) == {kept.id}
    assert _queued(hub) == 0


def test_a_failing_batch_backs_off_with_its_error_and_its_memories_stay_whole(worker_hub, monkeypatch):  # type: ignore[no-untyped-def]
    hub = worker_hub(worker_retry_base_seconds=60.0)
    alice = Ultron(hub=hub, agent="alice")
    record = alice.upload_memory(TEXTS[3])
    worker = build_worker(hub)

    def explode(*_a, **_k):  # type: ignore[no-untyped-def]
        raise RuntimeError("assignment exploded")

    monkeypatch.setattr(worker.clusters, "assign_many", explode)
    outcome = worker.run_cycle(("cluster",), quiet=True)[0]
    assert outcome.counts["failed"] == 1
    with hub.db.session() as s:
        row = s.get(ClusterQueueItem, (record.id, local_actor(s).tenant_id))
        assert row is not None and row.lease_owner is None and "assignment exploded" in (row.last_error or "")
        assert row.attempts == 1
    assert alice.get_memory(record.id).content == TEXTS[3]
    with hub.db.session() as s:  # `ultron worker status` shows it backing off
        depths = [(r.queue, r.ready, r.waiting) for r in s.execute(q("queue_depths"), {"tenant_id": None})]
    assert ("cluster", 0, 1) in depths
    monkeypatch.undo()
    assert build_worker(hub).run_cycle(("cluster",), quiet=True)[0].counts["done"] == 0  # backing off


def test_the_running_worker_assigns_a_new_memory_within_seconds(worker_hub):  # type: ignore[no-untyped-def]
    """No NOTIFY, a 30 s queue poll: the cluster poll (worker_cluster_poll_seconds) picks it up."""
    hub = worker_hub(worker_cluster_poll_seconds=0.2, decay_interval_hours=24.0)
    worker = build_worker(hub, worker_id="clusterer")
    thread = threading.Thread(target=worker.run_forever)
    thread.start()
    try:
        time.sleep(0.5)
        record = Ultron(hub=hub, agent="alice").upload_memory(TEXTS[0])
        start = time.monotonic()
        while record.id not in _members(hub):
            assert time.monotonic() - start < 10, "the worker left the new memory without a cluster"
            time.sleep(0.05)
        # the same poll put its vector into the HNSW graph (the `index` step runs before `cluster`)
        with hub.db.session() as s:
            assert s.execute(select(Memory.indexed).where(Memory.id == record.id)).scalar_one()
    finally:
        worker.stop()
        thread.join(timeout=30)
    assert not thread.is_alive()
