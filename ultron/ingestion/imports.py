"""Imports of chat histories: parsed and redacted up front, turned into sessions in batches.

The job's state (status, counts, each conversation pending/imported/failed) lives in Postgres, so an
import of thousands of conversations can be paused, resumed (by any process) and reviewed afterwards.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol
from uuid import UUID

from sqlalchemy import func, insert, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from ultron.authz import require_owner
from ultron.config import Settings
from ultron.db.engine import Database
from ultron.db.models import ImportItem, ImportJob, MemorySource, SessionRecord, TaskSegment
from ultron.errors import Conflict, NotFound, ValidationFailed
from ultron.ingestion.importers import PARSERS
from ultron.ingestion.redaction import Scrubber
from ultron.ingestion.schemas import IMPORT_KINDS, ImportStatus, ReviewDecision, ReviewItem, ReviewOutcome
from ultron.tenancy import Actor
from ultron.trajectory.messages import Message
from ultron.trajectory.pipeline import archive_memories_of
from ultron.trajectory.sessions import notify_work, store_session

log = logging.getLogger(__name__)


class Segmenter(Protocol):
    """(Re)segments a stored session in the caller's transaction; returns how many new segments it got
    (ultron/trajectory/pipeline.py's segment_session). `messages`: the session's messages when the caller
    holds them."""

    def __call__(
        self, session: Session, session_id: UUID, *, messages: list[Message] | None = None
    ) -> int: ...


INSERT_BATCH = 500
REVIEW_PAGE_MAX = 500


def _status(job: ImportJob) -> ImportStatus:
    finished = job.done + job.failed
    return ImportStatus(
        id=job.id,
        kind=job.kind,
        name=job.name,
        status=job.status,
        total=job.total,
        done=job.done,
        failed=job.failed,
        progress=round(finished / job.total, 4) if job.total else 1.0,
        last_error=job.last_error,
        created_at=job.created_at,
        updated_at=job.updated_at,
        finished_at=job.finished_at,
    )


class ImportService:
    def __init__(self, settings: Settings, db: Database, scrubber: Scrubber, segment: Segmenter | None):
        self.settings = settings
        self.db = db  # `run` takes one transaction per batch
        self.scrubber = scrubber
        # Segments each stored conversation at once; None: the worker does (ingestion's segment_inline).
        self.segment = segment

    def _job(self, session: Session, actor: Actor, job_id: UUID, *, lock: bool = False) -> ImportJob:
        stmt = select(ImportJob).where(ImportJob.id == job_id, ImportJob.tenant_id == actor.tenant_id)
        job = session.execute(stmt.with_for_update() if lock else stmt).scalar_one_or_none()
        if job is None:
            raise NotFound(f"no import {job_id}")
        return job

    def start(self, session: Session, actor: Actor, kind: str, name: str, data: bytes) -> ImportStatus:
        """Parse and redact the export and queue its conversations; nothing is stored if it does not parse."""
        if kind not in IMPORT_KINDS:
            raise ValidationFailed(f"unknown import kind {kind!r}; one of {', '.join(IMPORT_KINDS)}")
        conversations = [c for c in PARSERS[kind](data) if c.messages]
        if not conversations:
            raise ValidationFailed(f"no conversations with messages found in this {kind} export")
        scrubber = self.scrubber
        job = ImportJob(
            tenant_id=actor.tenant_id,
            agent_id=actor.agent_id,
            agent_name=actor.agent_name,
            kind=kind,
            name=name,
            total=len(conversations),
        )
        session.add(job)
        session.flush()
        rows = []
        for position, conv in enumerate(conversations):
            scrubber.messages(conv.messages)
            title, _ = scrubber.text(conv.title)
            rows.append(
                {
                    "job_id": job.id,
                    "tenant_id": actor.tenant_id,
                    "position": position,
                    "external_id": conv.external_id,
                    "title": title[:500],
                    "messages": [m.to_json() for m in conv.messages],
                }
            )
        for i in range(0, len(rows), INSERT_BATCH):
            session.execute(insert(ImportItem), rows[i : i + INSERT_BATCH])
        session.flush()
        return _status(job)

    def advance(self, session: Session, actor: Actor, job_id: UUID, batch: int | None = None) -> int:
        """Turn the next batch of pending conversations into sessions; returns how many were handled."""
        job = self._job(session, actor, job_id, lock=True)
        if job.status != "running":
            return 0
        items = (
            session.execute(
                select(ImportItem)
                .where(ImportItem.job_id == job.id, ImportItem.status == "pending")
                .order_by(ImportItem.position)
                .limit(batch or self.settings.import_batch_size)
            )
            .scalars()
            .all()
        )
        owner = Actor(job.tenant_id, job.agent_id, job.agent_name)
        for item in items:
            self._import_item(session, owner, job, item)
        job.updated_at = datetime.now(UTC)
        if not items or job.done + job.failed >= job.total:
            job.status, job.finished_at = "done", datetime.now(UTC)
        if items:
            notify_work(session, job.tenant_id)
        session.flush()
        return len(items)

    def _import_item(self, session: Session, owner: Actor, job: ImportJob, item: ImportItem) -> None:
        try:
            with session.begin_nested():
                messages = [Message.from_json(m) for m in item.messages]
                meta = {"title": item.title, "import": job.name, "external_id": item.external_id}
                outcome = store_session(
                    session,
                    owner,
                    f"{job.kind}:{item.external_id}",
                    f"import_{job.kind}",
                    messages,
                    meta,
                    import_id=job.id,
                )
                if outcome.status != "unchanged" and self.segment is not None:
                    self.segment(session, outcome.session_id, messages=messages)
            item.status, item.session_id = "imported", outcome.session_id
            job.done += 1
        except (SQLAlchemyError, ValueError, KeyError) as exc:
            item.status, item.error = "failed", f"{type(exc).__name__}: {exc}"[:1000]
            job.failed += 1
            job.last_error = item.error

    def run(
        self, actor: Actor, job_id: UUID, progress: Callable[[ImportStatus], None] | None = None
    ) -> ImportStatus:
        """Advance batch by batch (one transaction each) until done or paused."""
        while True:
            with self.db.session() as session:
                handled = self.advance(session, actor, job_id)
                status = _status(self._job(session, actor, job_id))
            if progress is not None:
                progress(status)
            if handled == 0 or status.status != "running":
                return status

    def status(self, session: Session, actor: Actor, job_id: UUID) -> ImportStatus:
        return _status(self._job(session, actor, job_id))

    def list_jobs(self, session: Session, actor: Actor, limit: int = 50) -> list[ImportStatus]:
        jobs = session.execute(
            select(ImportJob)
            .where(ImportJob.tenant_id == actor.tenant_id)
            .order_by(ImportJob.created_at.desc())
            .limit(limit)
        ).scalars()
        return [_status(j) for j in jobs]

    def pause(self, session: Session, actor: Actor, job_id: UUID) -> ImportStatus:
        job = self._job(session, actor, job_id, lock=True)
        require_owner(actor, job.agent_id, f"import {job_id}")
        if job.status == "running":
            job.status, job.updated_at = "paused", datetime.now(UTC)
        elif job.status != "paused":
            raise Conflict(f"import {job_id} is {job.status}; only a running import can be paused")
        return _status(job)

    def resume(self, session: Session, actor: Actor, job_id: UUID) -> ImportStatus:
        job = self._job(session, actor, job_id, lock=True)
        require_owner(actor, job.agent_id, f"import {job_id}")
        if job.status == "paused":
            job.status, job.updated_at = "running", datetime.now(UTC)
        elif job.status != "running":
            raise Conflict(f"import {job_id} is {job.status}; only a paused import can be resumed")
        return _status(job)

    # --- review ------------------------------------------------------------------------------

    def review_list(
        self, session: Session, actor: Actor, job_id: UUID, *, limit: int = 100, offset: int = 0
    ) -> list[ReviewItem]:
        """What the import produced, one row per conversation, with its segments and memories."""
        job = self._job(session, actor, job_id)
        items = session.execute(
            select(ImportItem, SessionRecord)
            .outerjoin(SessionRecord, SessionRecord.id == ImportItem.session_id)
            .where(ImportItem.job_id == job.id)
            .order_by(ImportItem.position)
            .offset(offset)
            .limit(min(limit, REVIEW_PAGE_MAX))
        ).all()
        session_ids = [s.id for _, s in items if s is not None]
        segments = dict(
            session.execute(
                select(TaskSegment.session_id, func.count())
                .where(TaskSegment.session_id.in_(session_ids), TaskSegment.stage != "superseded")
                .group_by(TaskSegment.session_id)
            ).all()
        )
        memories: dict[UUID, list[UUID]] = {}
        for row in session.execute(
            select(MemorySource.session_id, MemorySource.memory_id).where(
                MemorySource.session_id.in_(session_ids)
            )
        ):
            memories.setdefault(row.session_id, []).append(row.memory_id)
        return [
            ReviewItem(
                item_id=item.id,
                title=item.title,
                status=item.status,
                session_id=record.id if record else None,
                review_status=record.review_status if record else None,
                messages=record.message_count if record else len(item.messages),
                segments=segments.get(record.id, 0) if record else 0,
                memory_ids=memories.get(record.id, []) if record else [],
            )
            for item, record in items
        ]

    def review(self, session: Session, actor: Actor, job_id: UUID, decision: ReviewDecision) -> ReviewOutcome:
        """Approve conversations, or discard them: their memories are archived and their work skipped.
        Only the agent that ran the import, or an admin, may review it."""
        job = self._job(session, actor, job_id)
        require_owner(actor, job.agent_id, f"import {job_id}")

        def sessions_of(item_ids: list[UUID]) -> list[SessionRecord]:
            if not item_ids:
                return []
            return list(
                session.execute(
                    select(SessionRecord)
                    .join(ImportItem, ImportItem.session_id == SessionRecord.id)
                    .where(ImportItem.job_id == job.id, ImportItem.id.in_(item_ids))
                    .with_for_update(of=SessionRecord)
                ).scalars()
            )

        approved = sessions_of(decision.approve)
        for record in approved:
            record.review_status = "approved"
        discarded = sessions_of(decision.discard)
        archived = 0
        for record in discarded:
            record.review_status, record.needs_segmentation = "discarded", False
            segments = session.execute(
                select(TaskSegment).where(
                    TaskSegment.session_id == record.id, TaskSegment.stage != "superseded"
                )
            ).scalars()
            for segment in segments:
                archived += len(archive_memories_of(session, segment, "import_discarded"))
                if segment.stage in ("score", "extract"):
                    segment.stage = "skipped"
        session.execute(update(ImportJob).where(ImportJob.id == job.id).values(updated_at=datetime.now(UTC)))
        return ReviewOutcome(approved=len(approved), discarded=len(discarded), memories_archived=archived)
