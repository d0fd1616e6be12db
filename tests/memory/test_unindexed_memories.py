"""A new upload's vector enters the HNSW graph in the worker (migration 0020, ultron/memory/indexing.py):
the upload's INSERT writes no graph entry, yet every probe that must see the memory at once does, by an
exact pass over the tenant's unindexed memories beside its walk."""

from __future__ import annotations

from uuid import UUID

from sqlalchemy import select, text

from ultron.db.models import Memory
from ultron.db.queries import q
from ultron.hub import build_worker
from ultron.memory import indexing
from ultron.memory.schemas import UploadRequest
from ultron.tenancy import local_actor
from ultron.worker.runner import ITEM_STEPS

OTHERS = [
    "nginx returns 502 when the upstream socket path is wrong",
    "cargo build fails: linker cc not found on a slim image",
    "make: missing separator means a recipe line starts with spaces",
    "alembic autogenerate misses a server default change",
    "redis MISCONF error: the disk is full and snapshots fail",
]
LESSON = "pytest fixtures with scope=session leak state between database tests"


def _indexed(hub, memory_id: UUID) -> bool:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return bool(s.execute(select(Memory.indexed).where(Memory.id == memory_id)).scalar_one())


def _upload(hub, actor, content: str, **kw):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return hub.memory.upload(s, actor, UploadRequest(content=content, **kw))


def _raw_knn(hub, actor, content: str) -> list[UUID]:  # type: ignore[no-untyped-def]
    vector = hub.embedder.embed([content], kind="document")[0]
    with hub.db.session() as s:
        rows = s.execute(
            q("raw_knn"), {"tenant_id": actor.tenant_id, "embedding": str(list(vector)), "k": 10}
        )
        return [row.id for row in rows]


def _lesson_among_others(hub):  # type: ignore[no-untyped-def]
    """The local agent, and LESSON uploaded after the five OTHERS (none of them indexed yet)."""
    with hub.db.session() as s:
        actor = local_actor(s)
    for other in OTHERS:
        _upload(hub, actor, other)
    return actor, _upload(hub, actor, LESSON, context="CI", resolution="use function-scoped fixtures")


def test_an_upload_waits_for_its_graph_entry_yet_search_dedup_and_supersede_see_it(hub):  # type: ignore[no-untyped-def]
    actor, first = _lesson_among_others(hub)
    assert first.decision == "created"
    assert not _indexed(hub, first.record.id)  # the INSERT wrote no HNSW entry
    assert first.record.id not in _raw_knn(hub, actor, LESSON)  # the bare walk cannot see it yet

    # search's dense leg reads it by the exact pass: found by its vector, not only by its words
    with hub.db.session() as s:
        found = hub.memory.search(s, actor, LESSON, explain=True)
    hit = next(r for r in found if r.record.id == first.record.id)
    assert hit.explain is not None and hit.explain.from_vector and hit.explain.vector_rank == 1

    # the dedup probe sees it too: the same lesson again (another content hash) merges into it
    again = _upload(hub, actor, LESSON + "!", context="CI", resolution="use function-scoped fixtures")
    assert again.decision == "merged" and again.record.id == first.record.id

    # the worker's index step puts it in the graph; the walk finds it from then on
    outcome = next(o for o in build_worker(hub).run_cycle(ITEM_STEPS, quiet=True) if o.step == "index")
    assert outcome.status == "ok", outcome.errors
    assert outcome.counts["indexed"] == len(OTHERS) + 1
    assert _indexed(hub, first.record.id)
    assert first.record.id in _raw_knn(hub, actor, LESSON)
    with hub.db.session() as s:
        found = hub.memory.search(s, actor, LESSON, explain=True)
    assert found[0].record.id == first.record.id and found[0].explain and found[0].explain.from_vector


def test_a_memory_waiting_for_its_graph_entry_is_superseded_by_a_newer_value(hub):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        actor = local_actor(s)
    old = _upload(hub, actor, "The staging database is db-stage-1 on port 5432")
    new = _upload(hub, actor, "The staging database moved to db-stage-2 on port 5432")
    assert new.decision == "created" and not _indexed(hub, old.record.id)
    with hub.db.session() as s:
        superseded_by = s.execute(select(Memory.superseded_by_id).where(Memory.id == old.record.id)).scalar()
    assert superseded_by == new.record.id  # the supersede probe's exact pass found the unindexed older one


def test_past_pending_max_an_upload_indexes_its_own_memory(hub, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(indexing, "PENDING_MAX", 2)
    with hub.db.session() as s:
        actor = local_actor(s)
    ids = [_upload(hub, actor, text).record.id for text in OTHERS[:4]]
    assert [_indexed(hub, i) for i in ids] == [False, False, True, True]  # no worker ran: bounded
    with hub.db.session() as s:
        assert indexing.pending(s, actor.tenant_id) == 2


def test_a_batch_defers_only_what_fits_under_pending_max(hub, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(indexing, "PENDING_MAX", 3)
    with hub.db.session() as s:
        actor = local_actor(s)
    first = _upload(hub, actor, OTHERS[0]).record.id
    reqs = [UploadRequest(content=t) for t in OTHERS[1:]]
    prepared = hub.memory.prepare_batch(reqs, actor)
    with hub.db.session() as s:
        results = hub.memory.upload_batch(s, actor, reqs, prepared)
    ids = [r.record.id for r in results]  # type: ignore[union-attr]  # no item was refused
    assert not _indexed(hub, first)
    assert [_indexed(hub, i) for i in ids] == [False, False, True, True]
    with hub.db.session() as s:
        assert indexing.index_pending(s) == 3
    with hub.db.session() as s:
        assert indexing.pending(s, actor.tenant_id) == 0
        assert s.execute(text("SELECT count(*) FROM memories WHERE NOT indexed")).scalar_one() == 0


def test_a_merge_that_adds_text_leaves_the_new_row_versions_graph_entry_to_the_worker(hub):  # type: ignore[no-untyped-def]
    actor, first = _lesson_among_others(hub)
    indexing.index_all(hub.db)
    assert _indexed(hub, first.record.id)

    # The same upload again adds no text: a HOT update (hit, updated_at), the graph entry kept.
    same = _upload(hub, actor, LESSON, context="CI", resolution="use function-scoped fixtures")
    assert same.decision == "merged" and same.record.id == first.record.id
    assert _indexed(hub, first.record.id)

    # One that adds text rewrites the memory's document: its new row version waits for the worker's
    # index step, as a new upload does, and every probe still sees it.
    more = _upload(hub, actor, LESSON + "!", context="CI", resolution="use function-scoped fixtures")
    assert more.decision == "merged" and more.record.id == first.record.id
    assert not _indexed(hub, first.record.id)
    assert first.record.id not in _raw_knn(hub, actor, LESSON)
    with hub.db.session() as s:
        found = hub.memory.search(s, actor, LESSON, explain=True)
    assert found[0].record.id == first.record.id and found[0].explain and found[0].explain.vector_rank == 1
    again = _upload(hub, actor, LESSON, context="CI", resolution="use function-scoped fixtures")
    assert again.decision == "merged" and again.record.id == first.record.id  # the dedup probe too

    assert indexing.index_all(hub.db) == 1
    assert _indexed(hub, first.record.id) and first.record.id in _raw_knn(hub, actor, LESSON)


def test_past_pending_max_a_merge_keeps_its_graph_entry_in_the_request(hub, monkeypatch):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        actor = local_actor(s)
    first = _upload(hub, actor, LESSON, context="CI", resolution="use function-scoped fixtures")
    indexing.index_all(hub.db)
    monkeypatch.setattr(indexing, "PENDING_MAX", 2)
    for other in OTHERS[:2]:  # two wait: the bound is reached
        _upload(hub, actor, other)
    more = _upload(hub, actor, LESSON + "!", context="CI", resolution="use function-scoped fixtures")
    assert more.decision == "merged"
    assert _indexed(hub, first.record.id)
