"""Ingesting session files on real Postgres: formats, idempotence, appends, malformed lines, archive."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from tests.ingestion.conftest import SESSIONS, fixture_file
from ultron.db.models import RawUpload, SessionMessage, SessionRecord, TaskSegment
from ultron.errors import PayloadTooLarge
from ultron.ingestion.schemas import IngestFile

FORMATS = {
    "openai_messages.jsonl": ("openai", 8),
    "anthropic_blocks.jsonl": ("anthropic", 6),
    "claude_code.jsonl": ("claude_code", 6),
    "codex_rollout.jsonl": ("codex", 6),
    "multi_task.jsonl": ("openai", 17),
}


def _count(hub, model) -> int:  # type: ignore[no-untyped-def]
    with hub.db.session() as session:
        return session.execute(select(func.count()).select_from(model)).scalar_one()


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_session_format_is_stored_with_its_messages(hub, ingest, name):
    result = ingest(fixture_file(name))
    fmt, count = FORMATS[name]
    assert result.total_files == result.successful == 1, result.errors
    file = result.results[0]
    assert (file.status, file.format, file.messages) == ("created", fmt, count)
    assert file.archived and file.new_segments >= 1
    with hub.db.session() as session:
        record = session.scalars(select(SessionRecord).where(SessionRecord.id == file.session_id)).one()
        rows = (
            session.execute(
                select(SessionMessage)
                .where(SessionMessage.session_id == record.id)
                .order_by(SessionMessage.seq)
            )
            .scalars()
            .all()
        )
    assert record.source == name and record.message_count == count == len(rows)
    assert record.agent_name == "local"
    assert {r.role for r in rows} >= {"user", "assistant"}


def test_tool_calls_results_and_reasoning_are_normalized(hub, ingest):
    ingest(fixture_file("claude_code.jsonl"), fixture_file("codex_rollout.jsonl"))
    with hub.db.session() as session:
        rows = session.execute(select(SessionMessage).order_by(SessionMessage.seq)).scalars().all()
    calls = [c for r in rows for c in r.tool_calls or []]
    assert {"Bash", "shell"} <= {c["name"] for c in calls}
    tool_rows = [r for r in rows if r.role == "tool"]
    assert any(r.is_error for r in tool_rows)  # Codex exit_code 1
    assert all(r.tool_call_id for r in tool_rows)
    assert any(r.reasoning == "Missing OpenSSL development headers." for r in rows)


def test_reingesting_the_same_file_creates_nothing(hub, ingest):
    first = ingest(fixture_file("multi_task.jsonl"))
    before = (
        _count(hub, SessionRecord),
        _count(hub, SessionMessage),
        _count(hub, TaskSegment),
        _count(hub, RawUpload),
    )
    again = ingest(fixture_file("multi_task.jsonl"))
    assert again.results[0].status == "unchanged" and again.new_segments == 0
    assert again.results[0].session_id == first.results[0].session_id
    after = (
        _count(hub, SessionRecord),
        _count(hub, SessionMessage),
        _count(hub, TaskSegment),
        _count(hub, RawUpload),
    )
    assert after == before


def test_other_sources_and_agents_are_other_sessions(hub, ingest):
    data = (SESSIONS / "openai_messages.jsonl").read_bytes()
    ingest(IngestFile("a/run.jsonl", data), IngestFile("b/run.jsonl", data))
    assert _count(hub, SessionRecord) == 2


def test_an_appended_file_creates_only_the_new_segments(hub, ingest):
    lines = (SESSIONS / "multi_task.jsonl").read_text().splitlines()
    first = ingest(IngestFile("grow.jsonl", "\n".join(lines[:12]).encode()))
    assert first.new_segments == 2
    with hub.db.session() as session:
        old = {(s.id, s.fingerprint) for s in session.execute(select(TaskSegment)).scalars()}
    grown = ingest(IngestFile("grow.jsonl", "\n".join(lines).encode()))
    file = grown.results[0]
    assert (file.status, file.new_messages, file.messages, file.new_segments) == ("appended", 5, 17, 1)
    with hub.db.session() as session:
        segments = session.execute(select(TaskSegment).order_by(TaskSegment.segment_index)).scalars().all()
    assert len(segments) == 3 and all(s.stage == "score" for s in segments)
    assert old <= {(s.id, s.fingerprint) for s in segments}


def test_malformed_lines_are_reported_with_line_numbers_and_skipped(hub, ingest):
    result = ingest(fixture_file("malformed.jsonl"))
    file = result.results[0]
    assert file.status == "created" and file.messages == 3
    assert [p.line for p in file.malformed_lines] == [2, 4]
    assert any("line 2" in e for e in result.errors)


def test_a_file_with_no_messages_fails_alone(hub, ingest):
    result = ingest(IngestFile("junk.jsonl", b"not json\n{}\n"), fixture_file("openai_messages.jsonl"))
    assert result.total_files == 2 and result.successful == 1
    assert result.results[0].status == "failed" and result.results[0].error
    assert _count(hub, SessionRecord) == 1


def test_a_15_mb_file_is_ingested_but_not_archived(hub, ingest):
    big = "x" * (500 * 1024)
    lines = [
        json.dumps({"role": "user" if i % 2 == 0 else "assistant", "content": f"{i} {big}"})
        for i in range(32)
    ]
    data = "\n".join(lines).encode()
    assert len(data) > 15 * 1024 * 1024
    result = ingest(IngestFile("huge.jsonl", data), fixture_file("openai_messages.jsonl"))
    huge, small = result.results
    assert huge.status == "created" and huge.messages == 32 and not huge.archived
    assert small.archived
    with hub.db.session() as session:
        archived = session.execute(select(RawUpload.name, RawUpload.size_bytes, RawUpload.kind)).all()
    assert [(a.name, a.kind) for a in archived] == [("openai_messages.jsonl", "ingest_file")]


def test_a_file_over_the_ingest_limit_is_refused_before_anything_is_stored(make_hub):
    hub = make_hub(ingest_max_file_bytes=2048)
    with pytest.raises(PayloadTooLarge), hub.db.session() as session:
        from ultron.tenancy import local_actor

        hub.ingestion.ingest_files(
            session,
            local_actor(session),
            [fixture_file("openai_messages.jsonl"), IngestFile("big.jsonl", b"x" * 4096)],
        )
    assert _count(hub, SessionRecord) == 0


def test_an_archive_failure_never_blocks_ingestion(hub, ingest, monkeypatch):
    def broken(data: bytes):  # type: ignore[no-untyped-def]
        raise RuntimeError("archive store is broken")

    monkeypatch.setattr(hub.ingestion.scrubber, "raw", broken)
    result = ingest(fixture_file("openai_messages.jsonl"))
    assert result.results[0].status == "created" and not result.results[0].archived
    assert _count(hub, SessionRecord) == 1 and _count(hub, RawUpload) == 0


def test_many_new_files_take_the_bulk_path_with_the_same_outcome(hub, ingest, monkeypatch):
    names = sorted(FORMATS)
    calls = []
    import ultron.ingestion.service as service

    real = service.create_sessions

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(len(args[3]))
        return real(*args, **kwargs)

    monkeypatch.setattr(service, "create_sessions", spy)
    result = ingest(*(fixture_file(n) for n in names))
    assert calls == [len(names)]
    assert [r.status for r in result.results] == ["created"] * len(names)
    assert [(r.format, r.messages) for r in result.results] == [FORMATS[n] for n in names]
    assert all(r.archived and r.new_segments >= 1 for r in result.results)
    with hub.db.session() as session:
        pending = session.execute(select(SessionRecord.needs_segmentation)).scalars().all()
        segments = session.execute(select(func.count()).select_from(TaskSegment)).scalar_one()
    assert pending == [False] * len(names) and segments == result.new_segments
    again = ingest(*(fixture_file(n) for n in names))
    assert [r.status for r in again.results] == ["unchanged"] * len(names)


def test_a_failed_bulk_insert_falls_back_to_one_file_at_a_time(hub, ingest, monkeypatch):
    import ultron.ingestion.service as service
    from ultron.ingestion.batch import BulkConflict

    def conflict(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise BulkConflict("someone else created it")

    monkeypatch.setattr(service, "create_sessions", conflict)
    result = ingest(fixture_file("openai_messages.jsonl"), fixture_file("codex_rollout.jsonl"))
    assert [r.status for r in result.results] == ["created", "created"]
    assert _count(hub, SessionRecord) == 2


def test_an_archive_failure_in_the_bulk_path_never_blocks_ingestion(hub, ingest, monkeypatch):
    def broken(data: bytes):  # type: ignore[no-untyped-def]
        raise RuntimeError("archive store is broken")

    monkeypatch.setattr(hub.ingestion.scrubber, "raw", broken)
    result = ingest(fixture_file("openai_messages.jsonl"), fixture_file("codex_rollout.jsonl"))
    assert [(r.status, r.archived) for r in result.results] == [("created", False), ("created", False)]
    assert _count(hub, SessionRecord) == 2 and _count(hub, RawUpload) == 0
