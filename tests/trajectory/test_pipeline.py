"""The trajectory steps on real Postgres: segment -> score -> extract, incremental re-segmentation,
and exactly-the-right memories archived when a segment changes."""

from __future__ import annotations

from sqlalchemy import select

from tests.ingestion.conftest import SESSIONS, fixture_file
from ultron.db.models import Memory, MemorySource, SessionRecord, TaskSegment
from ultron.hub import build_worker
from ultron.ingestion.schemas import IngestFile
from ultron.memory.schemas import UploadRequest
from ultron.tenancy import local_actor
from ultron.trajectory.metrics import WEIGHTS


def _ingest(hub, *files):  # type: ignore[no-untyped-def]
    with hub.db.session() as session:
        return hub.ingestion.ingest_files(session, local_actor(session), list(files))


def _segments(hub):  # type: ignore[no-untyped-def]
    with hub.db.session() as session:
        return (
            session.execute(select(TaskSegment).order_by(TaskSegment.segment_index, TaskSegment.created_at))
            .scalars()
            .all()
        )


def _sources(hub) -> dict:  # type: ignore[type-arg,no-untyped-def]
    with hub.db.session() as session:
        rows = session.execute(select(MemorySource.memory_id, MemorySource.segment_id)).all()
    return {r.memory_id: r.segment_id for r in rows}


def _status(hub, memory_ids):  # type: ignore[no-untyped-def]
    with hub.db.session() as session:
        rows = session.execute(
            select(Memory.id, Memory.status, Memory.archived_reason).where(Memory.id.in_(memory_ids))
        )
        return {r.id: (r.status, r.archived_reason) for r in rows}


def test_offline_end_to_end_segments_scores_and_linked_memories(make_hub):
    hub = make_hub(ingest_segment_inline=False)
    result = _ingest(hub, fixture_file("multi_task.jsonl"))
    assert result.new_segments == 0  # queued for the worker step
    with hub.db.session() as session:
        assert session.execute(select(SessionRecord.needs_segmentation)).scalar_one() is True

    counts = build_worker(hub).process_due()
    assert counts["sessions"] == 1 and counts["new_segments"] == 3 and counts["scored"] == 3
    assert counts["failed"] == 0

    segments = _segments(hub)
    assert [(s.start_seq, s.end_seq) for s in segments] == [(0, 8), (9, 11), (12, 16)]
    for s in segments:
        assert set(WEIGHTS) <= set(s.metrics)
        assert all(0 <= m["value"] <= 1 for m in s.metrics.values() if m["value"] is not None)
        assert all(m["detail"] for m in s.metrics.values())
    payments, changelog, k8s = segments
    assert payments.metrics["tool_success"]["value"] == 2 / 3
    assert payments.metrics["errors_recovered"]["value"] == 1.0
    assert k8s.metrics["completion"]["value"] == 0.0
    assert payments.score >= 0.7 and changelog.score >= 0.7 and k8s.score < 0.7
    assert [s.stage for s in segments] == ["done", "done", "done"]
    assert payments.extracted_at and k8s.extracted_at is None

    sources = _sources(hub)
    assert set(sources.values()) == {payments.id, changelog.id}
    with hub.db.session() as session:
        memory = session.get(
            Memory, (next(m for m, s in sources.items() if s == payments.id), payments.tenant_id)
        )
    assert "test_refund_rounding" in memory.content and "quantize" in memory.resolution
    assert "trajectory" in memory.tags

    again = build_worker(hub).process_due()
    assert again == {k: 0 for k in again}  # nothing left: idempotent


def test_a_changed_segment_archives_exactly_the_memories_it_produced(hub):
    lines = (SESSIONS / "multi_task.jsonl").read_text().splitlines()
    _ingest(hub, IngestFile("s.jsonl", "\n".join(lines).encode()))
    build_worker(hub).process_due()
    first = _segments(hub)
    sources = _sources(hub)
    payments_memories = [m for m, s in sources.items() if s == first[0].id]
    changelog_memories = [m for m, s in sources.items() if s == first[1].id]
    assert payments_memories and changelog_memories

    # A person uploads to the changelog memory too: it is no longer only the segment's.
    with hub.db.session() as session:
        record = session.get(Memory, (changelog_memories[0], first[1].tenant_id))
        hub.memory.upload(
            session,
            local_actor(session),
            UploadRequest(content=record.content, context=record.context, resolution=record.resolution),
        )

    edited = (
        lines[:7] + [lines[7].replace("all 12 payment tests pass", "all 13 payment tests pass")] + lines[8:]
    )
    result = _ingest(hub, IngestFile("s.jsonl", "\n".join(edited).encode()))
    assert result.results[0].status == "replaced" and result.new_segments == 1

    segments = _segments(hub)
    stages = {s.id: s.stage for s in segments}
    assert stages[first[0].id] == "superseded"
    assert stages[first[1].id] == "done" and stages[first[2].id] == "done"
    status = _status(hub, payments_memories + changelog_memories)
    assert all(status[m] == ("archived", "segment_changed") for m in payments_memories)
    assert all(status[m][0] == "active" for m in changelog_memories)

    counts = build_worker(hub).process_due()
    assert counts["scored"] == 1 and counts["extracted"] == 1
    old_ids = {s.id for s in first}
    new = next(s for s in _segments(hub) if s.id not in old_ids)
    assert (new.start_seq, new.end_seq, new.stage) == (0, 8, "done")
    assert new.fingerprint != first[0].fingerprint
    assert new.id in set(_sources(hub).values())


def test_reprocessing_an_unchanged_session_keeps_its_segments(hub):
    _ingest(hub, fixture_file("multi_task.jsonl"))
    build_worker(hub).process_due()
    before = {(s.id, s.stage) for s in _segments(hub)}
    with hub.db.session() as session:
        record = session.execute(select(SessionRecord)).scalar_one()
        record.needs_segmentation = True
    counts = build_worker(hub).process_due()
    assert counts["sessions"] == 1 and counts["new_segments"] == 0
    assert {(s.id, s.stage) for s in _segments(hub)} == before


def test_a_failing_step_is_recorded_and_retried_later_not_forever(hub, monkeypatch):
    _ingest(hub, fixture_file("openai_messages.jsonl"))

    def boom(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("scoring exploded")

    monkeypatch.setattr("ultron.trajectory.pipeline.score_messages", boom)
    counts = build_worker(hub).process_due()
    assert counts["failed"] == 1
    segment = _segments(hub)[0]
    assert segment.stage == "score" and segment.attempts == 1 and "scoring exploded" in segment.last_error
    assert build_worker(hub).process_due()["failed"] == 0  # backed off: not due yet


def _the_memory_of(make_hub, fixture: str):  # type: ignore[no-untyped-def]
    """Ingest one fixture, run the worker's trajectory steps: (their counts, the segments, the one memory)."""
    hub = make_hub(ingest_segment_inline=False)
    _ingest(hub, fixture_file(fixture))
    counts = build_worker(hub).process_due()
    assert counts["memories"] == 1 and counts["failed"] == 0
    with hub.db.session() as session:
        memory = session.execute(select(Memory)).scalar_one()
    return counts, _segments(hub), memory


def test_a_codex_session_opening_with_agents_md_gives_the_task_its_errors_and_the_fix(make_hub):
    # Codex CLI's shape as it is now: AGENTS.md and the environment as the session's first user turns, and
    # commands as ["bash", "-lc", ...]; a jest failure, a patch, a passing run
    _, (segment,), memory = _the_memory_of(make_hub, "codex_agents_md.jsonl")
    assert segment.topic.startswith("The cart total test fails after the currency refactor")
    assert memory.content.startswith("The cart total test fails after the currency refactor")
    assert "AGENTS.md" not in memory.content and "environment_context" not in memory.content
    assert "● cart total › formats prices above 999" in memory.content
    assert memory.resolution.startswith("apply_patch <<'EOF'")
    assert memory.resolution.endswith("Verified with: `pnpm test`")


def test_a_fix_that_passed_is_kept_when_the_next_request_in_the_session_fails(make_hub):
    # Claude Code: a /clear command, a system reminder glued to the task, the fix checked and passing; then
    # "thanks! now also add a test for the BOM case", whose run fails. That request was read as a follow-up
    # of one task whose last check failed: nothing was kept of the fix.
    counts, (first, second), memory = _the_memory_of(make_hub, "claude_code_followup.jsonl")
    assert counts["new_segments"] == 2
    assert first.topic.startswith("the nightly ETL dies with UnicodeDecodeError")
    assert second.topic.startswith("thanks! now also add a test")
    assert memory.content.startswith("the nightly ETL dies with UnicodeDecodeError")
    assert "system-reminder" not in memory.content and "todo list" not in memory.content
    assert 'encoding="utf-8-sig"' in memory.resolution
    assert memory.resolution.endswith("Verified with: `python -m pytest tests/test_load.py -q`")
