"""The trajectory steps the worker's queues run: segment, score, extract.

Each step is a plain function of (session, its collaborators, the item's id): it runs inside the caller's
transaction, is idempotent, and raises on failure. The caller -- ultron/worker's lease protocol, for the
worker loop and for requests that wait alike -- records attempts, backoff and parking. `Steps` binds the
collaborators once, for the worker.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from uuid import UUID

from sqlalchemy import select
from sqlalchemy.orm import Session

from ultron.config import Settings
from ultron.db.models import MemorySource, SessionRecord, TaskSegment
from ultron.db.queries import q
from ultron.errors import NotFound
from ultron.memory.schemas import MAX_TAG_CHARS, UploadRequest, UploadResult
from ultron.tenancy import Actor
from ultron.trajectory.canonical import fingerprint
from ultron.trajectory.evidence import BOILERPLATE_SAMPLE, boilerplate
from ultron.trajectory.extraction import extract_experiences
from ultron.trajectory.messages import Message
from ultron.trajectory.metrics import score_messages
from ultron.trajectory.segmentation import segment_messages
from ultron.trajectory.sessions import load_messages

log = logging.getLogger(__name__)

MAX_TAGS_PER_MEMORY = 10


class MemoryUploader(Protocol):
    """What extraction needs of the memory service: an upload inside the caller's transaction."""

    def upload(self, session: Session, actor: Actor, request: UploadRequest) -> UploadResult: ...


def llm_budget(settings: Settings) -> int:
    return max(1024, settings.llm_max_input_tokens - settings.llm_prompt_reserve_tokens)


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
    session: Session,
    settings: Settings,
    intelligence: Any,
    session_id: UUID,
    *,
    messages: list[Message] | None = None,
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
    spans = segment_messages(messages, intelligence, llm_budget(settings))
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


def score_segment(session: Session, settings: Settings, intelligence: Any, segment_id: UUID) -> float:
    """Store every metric and the total; stage -> 'extract' at or above the threshold, else 'done'."""
    segment = _segment(session, segment_id)
    if segment.stage != "score":
        return float(segment.score or 0.0)
    messages = load_messages(session, segment.session_id, segment.start_seq, segment.end_seq)
    total, metrics, rationale = score_messages(messages, segment.topic, intelligence, llm_budget(settings))
    segment.score = total
    segment.metrics = {name: m.to_json() for name, m in metrics.items()}
    segment.rationale = rationale
    segment.scored_at = _now()
    segment.stage = "extract" if total >= settings.trajectory_memory_threshold else "done"
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


# Messages at the start of a session read to learn its harness's boilerplate.
OPENING_MESSAGES = 4


def harness_boilerplate(session: Session, record: SessionRecord) -> frozenset[str]:
    """The lines this agent's sessions of this format all open with (system prompt, task template)."""
    rows = session.execute(
        q("harness_openings"),
        {
            "tenant_id": record.tenant_id,
            "agent_name": record.agent_name,
            "format": record.format,
            "sessions": BOILERPLATE_SAMPLE,
            "opening": OPENING_MESSAGES,
        },
    ).scalars()
    return boilerplate(t or "" for t in rows)


def extract_segment(
    session: Session, settings: Settings, intelligence: Any, memory: MemoryUploader, segment_id: UUID
) -> list[UUID]:
    """Upload the segment's experiences through upload_memory and link each memory to it; stage -> 'done'."""
    segment = _segment(session, segment_id)
    if segment.stage != "extract":
        return _linked(session, segment_id)
    record = session.get(SessionRecord, (segment.session_id, segment.tenant_id))
    assert record is not None
    actor = Actor(record.tenant_id, record.agent_id, record.agent_name)
    messages = load_messages(session, segment.session_id, segment.start_seq, segment.end_seq)
    items = extract_experiences(
        messages,
        segment.topic,
        segment.score or 0.0,
        intelligence,
        llm_budget(settings),
        harness_boilerplate(session, record),
    )
    ids: list[UUID] = []
    for item in items:
        if not str(item.get("content") or "").strip():
            continue
        result = memory.upload(session, actor, _request(item, settings.max_field_chars))
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


@dataclass(frozen=True)
class Steps:
    """The three queued steps bound to their collaborators: what the worker runs on a leased item."""

    settings: Settings
    intelligence: Any
    memory: MemoryUploader

    def segment_session(
        self, session: Session, session_id: UUID, *, messages: list[Message] | None = None
    ) -> int:
        return segment_session(session, self.settings, self.intelligence, session_id, messages=messages)

    def score_segment(self, session: Session, segment_id: UUID) -> float:
        return score_segment(session, self.settings, self.intelligence, segment_id)

    def extract_segment(self, session: Session, segment_id: UUID) -> list[UUID]:
        return extract_segment(session, self.settings, self.intelligence, self.memory, segment_id)
