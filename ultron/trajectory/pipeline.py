"""The trajectory steps a worker (or `process_pending`) runs: segment, score, extract.

Each step runs inside the caller's transaction, is idempotent, and raises on failure; the caller
records attempts, backoff and parking. `process_pending` is the in-process driver for callers without
a worker: tests, `ultron trajectory process`, the SDK.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from uuid import UUID

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from ultron.db.models import MemorySource, SessionRecord, TaskSegment
from ultron.db.queries import q
from ultron.errors import NotFound
from ultron.ingestion.formats import Message
from ultron.memory.schemas import MAX_TAG_CHARS, UploadRequest
from ultron.tenancy import Actor
from ultron.trajectory.canonical import fingerprint
from ultron.trajectory.extraction import extract_experiences
from ultron.trajectory.metrics import score_messages
from ultron.trajectory.segmentation import segment_messages
from ultron.trajectory.sessions import load_messages

if TYPE_CHECKING:
    from ultron.hub import Hub

log = logging.getLogger(__name__)

# process_pending's own bookkeeping (the worker keeps its own): retry later, park after this many tries.
RETRY_DELAY = timedelta(seconds=30)
MAX_ATTEMPTS = 5
MAX_TAGS_PER_MEMORY = 10


def llm_budget(hub: Hub) -> int:
    return max(1024, hub.settings.llm_max_input_tokens - hub.settings.llm_prompt_reserve_tokens)


def _now() -> datetime:
    return datetime.now(UTC)


def archive_memories_of(session: Session, segment: TaskSegment, reason: str) -> list[UUID]:
    """Archive the memories that only this segment produced; returns their ids."""
    rows = session.execute(
        q("archive_segment_memories"),
        {"segment_id": segment.id, "tenant_id": segment.tenant_id, "reason": reason},
    ).all()
    return [row.id for row in rows]


def _supersede(session: Session, segment: TaskSegment) -> None:
    archived = archive_memories_of(session, segment, "segment_changed")
    if archived:
        log.info("segment %s changed: archived %d memories", segment.id, len(archived))
    segment.stage = "superseded"
    segment.updated_at = _now()


def segment_session(
    session: Session, hub: Hub, session_id: UUID, *, messages: list[Message] | None = None
) -> int:
    """(Re)segment a session; returns how many new segments it got. Unchanged segments are kept as they
    are; a segment whose messages changed is superseded and its memories archived. `messages`: the
    session's stored messages when the caller already holds them (ingest), to save reading them back."""
    # The work queue spans tenants: its items are found by id alone (the key's leading column).
    stmt = select(SessionRecord).where(SessionRecord.id == session_id).with_for_update()
    record = session.execute(stmt).scalar_one_or_none()
    if record is None:
        raise NotFound(f"no session {session_id}")
    if messages is None or len(messages) != record.message_count:
        messages = load_messages(session, session_id)
    spans = segment_messages(messages, hub.intelligence, llm_budget(hub))
    live = session.execute(
        select(TaskSegment).where(TaskSegment.session_id == session_id, TaskSegment.stage != "superseded")
    ).scalars()
    by_key = {(s.start_seq, s.end_seq, s.fingerprint): s for s in live}
    kept: set[UUID] = set()
    new = 0
    skip = record.review_status == "discarded"
    for index, span in enumerate(spans):
        fp = fingerprint(messages[span.start : span.end + 1])
        same = by_key.get((span.start, span.end, fp))
        if same is not None:
            same.segment_index = index
            kept.add(same.id)
            continue
        session.add(
            TaskSegment(
                tenant_id=record.tenant_id,
                session_id=session_id,
                segment_index=index,
                start_seq=span.start,
                end_seq=span.end,
                topic=span.topic,
                fingerprint=fp,
                segmenter=span.segmenter,
                stage="skipped" if skip else "score",
            )
        )
        new += 1
    for segment in by_key.values():
        if segment.id not in kept:
            _supersede(session, segment)
    record.needs_segmentation = False
    record.segmented_at = _now()
    record.last_error = None
    session.flush()
    return new


def _segment(session: Session, segment_id: UUID) -> TaskSegment:
    stmt = select(TaskSegment).where(TaskSegment.id == segment_id).with_for_update()  # a queue item
    segment = session.execute(stmt).scalar_one_or_none()
    if segment is None:
        raise NotFound(f"no task segment {segment_id}")
    return segment


def score_segment(session: Session, hub: Hub, segment_id: UUID) -> float:
    """Store every metric and the total; stage -> 'extract' at or above the threshold, else 'done'."""
    segment = _segment(session, segment_id)
    if segment.stage != "score":
        return float(segment.score or 0.0)
    messages = load_messages(session, segment.session_id, segment.start_seq, segment.end_seq)
    total, metrics, rationale = score_messages(messages, segment.topic, hub.intelligence, llm_budget(hub))
    segment.score = total
    segment.metrics = {name: m.to_json() for name, m in metrics.items()}
    segment.rationale = rationale
    segment.scored_at = _now()
    segment.stage = "extract" if total >= hub.settings.trajectory_memory_threshold else "done"
    segment.updated_at = _now()
    session.flush()
    return total


def _linked(session: Session, segment_id: UUID) -> list[UUID]:
    return list(
        session.execute(select(MemorySource.memory_id).where(MemorySource.segment_id == segment_id)).scalars()
    )


def _request(item: dict[str, Any], limit: int) -> UploadRequest:
    tags = [str(t).strip().lower()[:MAX_TAG_CHARS] for t in item.get("tags") or [] if str(t).strip()]
    return UploadRequest(
        content=str(item["content"])[:limit],
        context=str(item.get("context") or "")[:limit],
        resolution=str(item.get("resolution") or "")[:limit],
        tags=tags[:MAX_TAGS_PER_MEMORY],
    )


def extract_segment(session: Session, hub: Hub, segment_id: UUID) -> list[UUID]:
    """Upload the segment's experiences through upload_memory and link each memory to it; stage -> 'done'."""
    segment = _segment(session, segment_id)
    if segment.stage != "extract":
        return _linked(session, segment_id)
    record = session.get(SessionRecord, (segment.session_id, segment.tenant_id))
    assert record is not None
    actor = Actor(record.tenant_id, record.agent_id, record.agent_name)
    messages = load_messages(session, segment.session_id, segment.start_seq, segment.end_seq)
    items = extract_experiences(
        messages, segment.topic, segment.score or 0.0, hub.intelligence, llm_budget(hub)
    )
    ids: list[UUID] = []
    for item in items:
        if not str(item.get("content") or "").strip():
            continue
        result = hub.memory.upload(session, actor, _request(item, hub.settings.max_field_chars))
        session.execute(
            q("link_memory_source"),
            {
                "memory_id": result.record.id,
                "segment_id": segment.id,
                "session_id": segment.session_id,
                "tenant_id": segment.tenant_id,
                "decision": "created" if result.decision == "created" else "merged",
            },
        )
        ids.append(result.record.id)
    segment.stage = "done"
    segment.extracted_at = _now()
    segment.updated_at = _now()
    session.flush()
    return list(dict.fromkeys(ids))


# --- in-process driver ------------------------------------------------------------------------------


def _record_failure(
    hub: Hub, model: type[SessionRecord] | type[TaskSegment], item_id: UUID, exc: Exception
) -> None:
    log.warning("trajectory step failed for %s %s: %s", model.__tablename__, item_id, exc)
    with hub.db.session() as session:
        attempts = model.attempts + 1
        session.execute(
            update(model)
            .where(model.id == item_id)
            .values(
                attempts=attempts,
                last_error=f"{type(exc).__name__}: {exc}"[:2000],
                next_attempt_at=func.now() + RETRY_DELAY * func.power(2, model.attempts),
            )
        )
        session.execute(
            update(model)
            .where(model.id == item_id, model.attempts >= MAX_ATTEMPTS)
            .values(parked_at=func.now())
        )


def _ids(hub: Hub, query: str, params: dict[str, Any]) -> list[UUID]:
    with hub.db.session() as session:
        return [row.id for row in session.execute(q(query), params).all()]


def _run_sessions(hub: Hub, tenant_id: UUID | None, limit: int, counts: dict[str, int]) -> None:
    for session_id in _ids(hub, "pending_sessions", {"tenant_id": tenant_id, "limit": limit}):
        try:
            with hub.db.session() as session:
                if session.execute(q("lock_session_for_work"), {"id": session_id}).first() is None:
                    continue
                counts["new_segments"] += segment_session(session, hub, session_id)
                counts["sessions"] += 1
        except Exception as exc:  # noqa: BLE001 - recorded on the row; the next item still runs
            counts["failed"] += 1
            _record_failure(hub, SessionRecord, session_id, exc)


def _run_segments(hub: Hub, stage: str, tenant_id: UUID | None, limit: int, counts: dict[str, int]) -> None:
    params = {"tenant_id": tenant_id, "limit": limit, "stage": stage}
    for segment_id in _ids(hub, "pending_segments", params):
        try:
            with hub.db.session() as session:
                if (
                    session.execute(q("lock_segment_for_work"), {"id": segment_id, "stage": stage}).first()
                    is None
                ):
                    continue
                if stage == "score":
                    score_segment(session, hub, segment_id)
                    counts["scored"] += 1
                else:
                    counts["memories"] += len(extract_segment(session, hub, segment_id))
                    counts["extracted"] += 1
        except Exception as exc:  # noqa: BLE001 - recorded on the row; the next item still runs
            counts["failed"] += 1
            _record_failure(hub, TaskSegment, segment_id, exc)


def process_pending(hub: Hub, *, tenant_id: UUID | None = None, limit: int = 100) -> dict[str, int]:
    """Segment, score and extract whatever is due (up to `limit` items per step), one transaction each."""
    counts = {"sessions": 0, "new_segments": 0, "scored": 0, "extracted": 0, "memories": 0, "failed": 0}
    _run_sessions(hub, tenant_id, limit, counts)
    _run_segments(hub, "score", tenant_id, limit, counts)
    _run_segments(hub, "extract", tenant_id, limit, counts)
    return counts
