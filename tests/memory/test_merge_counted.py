"""An offline merge (the text stays as it is) counts what the upload adds in one round trip (stop 27,
sql/memory.sql `merge_counted`): the contribution, the merge hit, the upload's new words in the memory's
document, the tags' union, the redaction counts, `updated_at` and the activity row. Through the ORM these
were five round trips; the effects are the same."""

from __future__ import annotations

from sqlalchemy import event, func, select

from ultron.db.models import ActivityEvent, Memory, MemoryContribution
from ultron.memory import indexing
from ultron.memory.schemas import UploadRequest
from ultron.tenancy import local_actor

LESSON = "pytest fixtures with scope=session leak state between database tests"


def _up(hub, actor, content: str, **kw):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return hub.memory.upload(s, actor, UploadRequest(content=content, **kw))


def test_an_offline_merge_counts_everything_in_one_round_trip(hub):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        actor = local_actor(s)
    first = _up(hub, actor, LESSON, resolution="use function-scoped fixtures", tags=["pytest"])
    indexing.index_all(hub.db)
    with hub.db.session() as s:
        before = s.get(Memory, (first.record.id, actor.tenant_id))
        assert before is not None
        updated_before, hits_before = before.updated_at, before.hit_count

    sent: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        sent.append(statement)

    event.listen(hub.db.engine, "before_cursor_execute", count)
    try:
        # the same lesson with one more word (another content hash) and a new tag: merged, text kept
        again = _up(
            hub, actor, LESSON + " (zebrafish)", resolution="use function-scoped fixtures", tags=["ci"]
        )
    finally:
        event.remove(hub.db.engine, "before_cursor_execute", count)
    assert again.decision in ("merged", "merged_judge") and again.record.id == first.record.id
    assert not again.merged_text
    # The writes went in the driver's pipeline, one round trip: none of them through SQLAlchemy, where the
    # ORM sent the contribution, the hit, the UPDATE and the activity row one round trip each (what it still
    # sends is the row's lock, the record read back and the companion's entity links).
    writes = (
        "INSERT INTO memory_contributions",
        "ultron_record_hits",
        "UPDATE memories",
        "INSERT INTO activity",
    )
    assert not [x for x in sent if any(w in x for w in writes)], [x[:70] for x in sent]

    with hub.db.session() as s:
        m = s.get(Memory, (first.record.id, actor.tenant_id))
        assert m is not None
        assert m.content == first.record.content  # offline: the text stays
        assert m.tags == ["pytest", "ci"]
        assert m.hit_count == hits_before + 1
        assert m.updated_at > updated_before
        assert not m.indexed  # its document grew: the new row version waits for the worker's graph entry
        contributions = s.execute(
            select(MemoryContribution.decision, MemoryContribution.content, MemoryContribution.tags)
            .where(MemoryContribution.memory_id == m.id)
            .order_by(MemoryContribution.id)
        ).all()
        assert [c.decision for c in contributions] == ["created", again.decision]
        assert contributions[1].content == LESSON + " (zebrafish)" and contributions[1].tags == ["ci"]
        kinds = s.execute(
            select(ActivityEvent.kind, func.count())
            .where(ActivityEvent.memory_id == m.id)
            .group_by(ActivityEvent.kind)
        ).all()
        assert dict(kinds).get("merge") == 1
        # lossless: the word only the merged upload used finds the memory, and explain names its upload
        found = hub.memory.search(s, actor, "zebrafish", explain=True)
    assert found and found[0].record.id == m.id
    assert found[0].explain is not None and found[0].explain.matched_contribution is not None
    assert again.record.contributions == 2  # the record returned was read after the writes
