"""Reading sessions and segments (tenant-scoped, paged) and queueing them for re-processing."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ultron.authz import require_owner
from ultron.db.models import MemorySource, SessionMessage, SessionRecord, TaskSegment
from ultron.errors import Conflict, NotFound
from ultron.tenancy import Actor
from ultron.trajectory.schemas import MessageInfo, SegmentInfo, SessionDetail, SessionInfo
from ultron.trajectory.sessions import queue_segmentation

PAGE_MAX = 500


def _session_info(record: SessionRecord, segments: int = 0, memories: int = 0) -> SessionInfo:
    return SessionInfo(
        id=record.id,
        agent=record.agent_name,
        source=record.source,
        format=record.format,
        message_count=record.message_count,
        metadata=record.meta,
        import_id=record.import_id,
        review_status=record.review_status,
        needs_segmentation=record.needs_segmentation,
        attempts=record.attempts,
        last_error=record.last_error,
        parked=record.parked_at is not None,
        started_at=record.started_at,
        ended_at=record.ended_at,
        segmented_at=record.segmented_at,
        created_at=record.created_at,
        updated_at=record.updated_at,
        segments=segments,
        memories=memories,
    )


def _segment_info(segment: TaskSegment, memory_ids: list[UUID] | None = None) -> SegmentInfo:
    return SegmentInfo(
        id=segment.id,
        session_id=segment.session_id,
        segment_index=segment.segment_index,
        start_seq=segment.start_seq,
        end_seq=segment.end_seq,
        topic=segment.topic,
        fingerprint=segment.fingerprint,
        segmenter=segment.segmenter,
        stage=segment.stage,
        score=segment.score,
        metrics=segment.metrics,
        rationale=segment.rationale,
        attempts=segment.attempts,
        last_error=segment.last_error,
        scored_at=segment.scored_at,
        extracted_at=segment.extracted_at,
        created_at=segment.created_at,
        memory_ids=memory_ids or [],
    )


def _record(session: Session, actor: Actor, session_id: UUID, *, lock: bool = False) -> SessionRecord:
    stmt = select(SessionRecord).where(
        SessionRecord.id == session_id, SessionRecord.tenant_id == actor.tenant_id
    )
    record = session.execute(stmt.with_for_update() if lock else stmt).scalar_one_or_none()
    if record is None:
        raise NotFound(f"no session {session_id}")
    return record


def list_sessions(
    session: Session,
    actor: Actor,
    *,
    limit: int = 50,
    before: datetime | None = None,
    import_id: UUID | None = None,
) -> list[SessionInfo]:
    """Newest first; page with `before` = the last row's updated_at."""
    stmt = select(SessionRecord).where(SessionRecord.tenant_id == actor.tenant_id)
    if before is not None:
        stmt = stmt.where(SessionRecord.updated_at < before)
    if import_id is not None:
        stmt = stmt.where(SessionRecord.import_id == import_id)
    records = (
        session.execute(stmt.order_by(SessionRecord.updated_at.desc()).limit(min(limit, PAGE_MAX)))
        .scalars()
        .all()
    )
    ids = [r.id for r in records]
    segments = dict(
        session.execute(
            select(TaskSegment.session_id, func.count())
            .where(TaskSegment.session_id.in_(ids), TaskSegment.stage != "superseded")
            .group_by(TaskSegment.session_id)
        ).all()
    )
    memories = dict(
        session.execute(
            select(MemorySource.session_id, func.count(func.distinct(MemorySource.memory_id)))
            .where(MemorySource.session_id.in_(ids))
            .group_by(MemorySource.session_id)
        ).all()
    )
    return [_session_info(r, segments.get(r.id, 0), memories.get(r.id, 0)) for r in records]


def _links(session: Session, segment_ids: list[UUID]) -> dict[UUID, list[UUID]]:
    out: dict[UUID, list[UUID]] = {}
    rows = session.execute(
        select(MemorySource.segment_id, MemorySource.memory_id).where(
            MemorySource.segment_id.in_(segment_ids)
        )
    )
    for row in rows:
        out.setdefault(row.segment_id, []).append(row.memory_id)
    return out


def show_session(
    session: Session, actor: Actor, session_id: UUID, *, superseded: bool = False
) -> SessionDetail:
    record = _record(session, actor, session_id)
    stmt = select(TaskSegment).where(TaskSegment.session_id == session_id)
    if not superseded:
        stmt = stmt.where(TaskSegment.stage != "superseded")
    segments = (
        session.execute(stmt.order_by(TaskSegment.segment_index, TaskSegment.created_at)).scalars().all()
    )
    links = _links(session, [s.id for s in segments])
    infos = [_segment_info(s, links.get(s.id)) for s in segments]
    memories = len({m for ids in links.values() for m in ids})
    live = sum(1 for s in segments if s.stage != "superseded")
    return SessionDetail(session=_session_info(record, live, memories), segments=infos)


def session_messages(
    session: Session, actor: Actor, session_id: UUID, *, start: int = 0, limit: int = 200
) -> list[MessageInfo]:
    _record(session, actor, session_id)
    rows = session.execute(
        select(SessionMessage)
        .where(SessionMessage.session_id == session_id, SessionMessage.seq >= start)
        .order_by(SessionMessage.seq)
        .limit(min(limit, PAGE_MAX))
    ).scalars()
    return [
        MessageInfo(
            seq=r.seq,
            role=r.role,
            content=r.content,
            reasoning=r.reasoning,
            tool_calls=r.tool_calls,
            tool_call_id=r.tool_call_id,
            is_error=r.is_error,
            sent_at=r.sent_at,
        )
        for r in rows
    ]


def reprocess_session(session: Session, actor: Actor, session_id: UUID) -> SessionInfo:
    """Queue a session for segmentation again (unchanged segments keep their scores and memories)."""
    record = _record(session, actor, session_id, lock=True)
    require_owner(actor, record.agent_id, f"session {session_id}")
    queue_segmentation(record)
    session.flush()
    session.refresh(record)
    return _session_info(record)


def list_segments(
    session: Session,
    actor: Actor,
    *,
    session_id: UUID | None = None,
    stage: str | None = None,
    limit: int = 100,
    before: datetime | None = None,
) -> list[SegmentInfo]:
    """Newest first; page with `before` = the last row's created_at."""
    stmt = select(TaskSegment).where(TaskSegment.tenant_id == actor.tenant_id)
    if session_id is not None:
        stmt = stmt.where(TaskSegment.session_id == session_id)
    if stage is not None:
        stmt = stmt.where(TaskSegment.stage == stage)
    if before is not None:
        stmt = stmt.where(TaskSegment.created_at < before)
    segments = (
        session.execute(stmt.order_by(TaskSegment.created_at.desc()).limit(min(limit, PAGE_MAX)))
        .scalars()
        .all()
    )
    links = _links(session, [s.id for s in segments])
    return [_segment_info(s, links.get(s.id)) for s in segments]


def _segment(session: Session, actor: Actor, segment_id: UUID, *, lock: bool = False) -> TaskSegment:
    stmt = select(TaskSegment).where(TaskSegment.id == segment_id, TaskSegment.tenant_id == actor.tenant_id)
    segment = session.execute(stmt.with_for_update() if lock else stmt).scalar_one_or_none()
    if segment is None:
        raise NotFound(f"no task segment {segment_id}")
    return segment


def show_segment(session: Session, actor: Actor, segment_id: UUID) -> SegmentInfo:
    segment = _segment(session, actor, segment_id)
    return _segment_info(segment, _links(session, [segment.id]).get(segment.id))


def reprocess_segment(session: Session, actor: Actor, segment_id: UUID) -> SegmentInfo:
    """Score (and, if good enough, extract) the segment again; extraction merges into its own memories."""
    segment = _segment(session, actor, segment_id, lock=True)
    owner = session.get(SessionRecord, (segment.session_id, segment.tenant_id))
    require_owner(actor, owner.agent_id if owner else None, f"task segment {segment_id}")
    if segment.stage == "superseded":
        raise Conflict(f"task segment {segment_id} was superseded by a newer segmentation")
    segment.stage, segment.attempts, segment.parked_at, segment.last_error = "score", 0, None, None
    segment.next_attempt_at = datetime.now(UTC)
    segment.updated_at = datetime.now(UTC)
    session.flush()
    return _segment_info(segment, _links(session, [segment.id]).get(segment.id))
