"""Importers of existing chat histories, and import jobs: progress, pause/resume, review."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from tests.ingestion.conftest import SESSIONS
from ultron.db.models import ImportItem, Memory, SessionRecord
from ultron.errors import Conflict, ValidationFailed
from ultron.hub import build_worker
from ultron.ingestion.schemas import ReviewDecision
from ultron.tenancy import local_actor

EXPORTS = {
    "chatgpt": ("chatgpt_conversations.json", 2),
    "claude": ("claude_export.json", 1),
    "deepseek": ("deepseek_export.json", 1),
    "markdown": ("notes.md", 2),
    "text": ("chat.txt", 2),
}


def _start(hub, kind, data, name="export"):  # type: ignore[no-untyped-def]
    with hub.db.session() as session:
        actor = local_actor(session)
        return hub.ingestion.imports.start(session, actor, kind, name, data), actor


@pytest.mark.parametrize("kind", sorted(EXPORTS))
def test_every_export_format_becomes_sessions(hub, kind):
    filename, conversations = EXPORTS[kind]
    status, actor = _start(hub, kind, (SESSIONS / filename).read_bytes())
    assert (status.total, status.done, status.status) == (conversations, 0, "running")
    final = hub.ingestion.imports.run(actor, status.id)
    assert (final.status, final.done, final.failed, final.progress) == ("done", conversations, 0, 1.0)
    with hub.db.session() as session:
        records = session.execute(select(SessionRecord)).scalars().all()
    assert len(records) == conversations
    assert all(r.format == f"import_{kind}" and r.import_id == status.id for r in records)
    assert all(r.review_status == "pending" and r.message_count >= 2 for r in records)


def test_chatgpt_import_follows_the_branch_the_user_kept(hub):
    status, actor = _start(hub, "chatgpt", (SESSIONS / "chatgpt_conversations.json").read_bytes())
    hub.ingestion.imports.run(actor, status.id)
    with hub.db.session() as session:
        record = session.execute(select(SessionRecord).where(SessionRecord.message_count == 4)).scalar_one()
        from ultron.trajectory.sessions import load_messages

        texts = [m.content for m in load_messages(session, record.id)]
    assert "(an abandoned first answer)" not in texts and texts[-1].startswith("Glad it works")


def test_an_import_pauses_and_resumes_from_its_state_in_the_database(make_hub):
    hub = make_hub(import_batch_size=10)
    conversations = [
        {
            "uuid": f"c{i}",
            "name": f"conversation {i}",
            "chat_messages": [
                {"sender": "human", "text": f"question {i} about topic {i}"},
                {"sender": "assistant", "text": f"answer {i}"},
            ],
        }
        for i in range(35)
    ]
    status, actor = _start(hub, "claude", json.dumps(conversations).encode())
    seen = []

    def pause_after_first_batch(progress):  # type: ignore[no-untyped-def]
        seen.append(progress.done)
        if progress.done == 10:
            with hub.db.session() as session:
                hub.ingestion.imports.pause(session, actor, status.id)

    paused = hub.ingestion.imports.run(actor, status.id, progress=pause_after_first_batch)
    assert paused.status == "paused" and paused.done == 10
    assert hub.ingestion.imports.run(actor, status.id).done == 10  # paused: nothing moves
    with hub.db.session() as session:
        assert hub.ingestion.imports.resume(session, actor, status.id).status == "running"
    done = hub.ingestion.imports.run(actor, status.id, progress=lambda p: seen.append(p.done))
    assert (done.status, done.done, done.progress) == ("done", 35, 1.0)
    assert seen[:2] == [10, 10] and seen[-1] == 35
    with hub.db.session() as session, pytest.raises(Conflict):
        hub.ingestion.imports.resume(session, actor, status.id)
    with hub.db.session() as session:
        assert session.execute(select(ImportItem.status).distinct()).scalars().all() == ["imported"]


def test_reimporting_the_same_export_creates_no_new_sessions(hub):
    data = (SESSIONS / "chatgpt_conversations.json").read_bytes()
    first, actor = _start(hub, "chatgpt", data)
    hub.ingestion.imports.run(actor, first.id)
    second, _ = _start(hub, "chatgpt", data)
    hub.ingestion.imports.run(actor, second.id)
    with hub.db.session() as session:
        assert len(session.execute(select(SessionRecord.id)).all()) == 2


def test_review_lists_what_an_import_produced_and_discard_archives_it(hub):
    status, actor = _start(hub, "chatgpt", (SESSIONS / "chatgpt_conversations.json").read_bytes())
    hub.ingestion.imports.run(actor, status.id)
    build_worker(hub).process_due()
    with hub.db.session() as session:
        items = hub.ingestion.imports.review_list(session, actor, status.id)
    assert [i.title for i in items] == ["Postgres connection pool exhausted", "Trip to Kyoto"]
    assert all(i.segments >= 1 for i in items)
    pool, kyoto = items
    # The pool answer was confirmed ("That fixed it"), so it scored and was extracted; the unconfirmed
    # Kyoto Q&A has no completion signal and stays below the threshold offline.
    assert pool.memory_ids and not kyoto.memory_ids
    with hub.db.session() as session:
        outcome = hub.ingestion.imports.review(
            session, actor, status.id, ReviewDecision(approve=[kyoto.item_id], discard=[pool.item_id])
        )
    assert (outcome.approved, outcome.discarded, outcome.memories_archived) == (1, 1, len(pool.memory_ids))
    with hub.db.session() as session:
        statuses = dict(session.execute(select(Memory.id, Memory.status)).all())
        reviewed = dict(session.execute(select(SessionRecord.id, SessionRecord.review_status)).all())
    assert all(statuses[m] == "archived" for m in pool.memory_ids)
    assert reviewed == {pool.session_id: "discarded", kyoto.session_id: "approved"}
    with hub.db.session() as session:
        again = hub.ingestion.imports.review_list(session, actor, status.id)
    assert [i.review_status for i in again] == ["discarded", "approved"]


def test_a_broken_export_is_refused_and_stores_nothing(hub):
    with pytest.raises(ValidationFailed, match="not valid JSON"):
        _start(hub, "chatgpt", b"{not json")
    with pytest.raises(ValidationFailed, match="no conversations"):
        _start(hub, "claude", b"[]")
