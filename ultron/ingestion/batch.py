"""The bulk path of ingest for files that are new sessions: a few statements per request, not per file.

Many small session files are the common case (one file per agent run). Each new one would otherwise
cost a dozen round trips (savepoint, insert, lock, COPY, segment, archive...). Here all the request's
new sessions are inserted in one statement, their messages in one COPY, their segments in one insert
and their raw archives in one; anything unexpected (a concurrent ingest of the same source) rolls the
bulk savepoint back and the caller takes the per-file path instead.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from uuid import UUID

from sqlalchemy import insert, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from ultron.config import Settings
from ultron.db.models import RawUpload, SessionRecord, TaskSegment
from ultron.db.queries import q
from ultron.ingestion.formats import ParsedSession
from ultron.ingestion.redaction import Scrubber
from ultron.ingestion.schemas import FileResult, IngestFile, LineProblem
from ultron.tenancy import Actor
from ultron.trajectory.canonical import fingerprint, message_digest
from ultron.trajectory.segmentation import segment_messages
from ultron.trajectory.sessions import copy_messages, message_row, strip_nul, time_range


class IngestionHost(Protocol):
    """What a bulk ingest reads of ultron/ingestion/service.py's IngestionService (its caller)."""

    settings: Settings
    intelligence: Any
    scrubber: Scrubber

    @property
    def segment_inline(self) -> bool: ...


log = logging.getLogger(__name__)


class BulkConflict(Exception):
    """Another transaction created one of these sessions meanwhile: use the per-file path."""


@dataclass
class Prepared:
    file: IngestFile
    parsed: ParsedSession
    problems: list[LineProblem]


def existing_sources(session: Session, actor: Actor, names: list[str]) -> dict[str, list[str]]:
    """{source: its message digests in order} for the names that are sessions already (one read)."""
    rows = session.execute(
        q("sessions_digests"),
        {"tenant_id": actor.tenant_id, "agent_name": actor.agent_name, "sources": names},
    ).all()
    return {row.source: list(row.digests or []) for row in rows}


def archived_digests(session: Session, actor: Actor, digests: list[str]) -> set[str]:
    rows = session.execute(
        select(RawUpload.sha256).where(
            RawUpload.tenant_id == actor.tenant_id,
            RawUpload.kind == "ingest_file",
            RawUpload.sha256.in_(digests),
        )
    ).scalars()
    return set(rows)


def unchanged_results(
    service: IngestionHost,
    session: Session,
    actor: Actor,
    prepared: dict[int, Prepared],
    known: dict[str, list[str]],
) -> dict[int, FileResult]:
    """Files whose session already holds exactly their messages: nothing to write."""
    same: dict[int, Prepared] = {}
    for i, p in prepared.items():
        stored = known.get(p.file.name)
        if stored:
            strip_nul(p.parsed.messages)
            if stored == [message_digest(m) for m in p.parsed.messages]:
                same[i] = p
    if not same:
        return {}
    cap = service.settings.raw_archive_max_bytes
    shas = {i: hashlib.sha256(p.file.content).hexdigest() for i, p in same.items()}
    archived = archived_digests(session, actor, list(shas.values()))
    ids = dict(
        session.execute(
            select(SessionRecord.source, SessionRecord.id).where(
                SessionRecord.tenant_id == actor.tenant_id,
                SessionRecord.agent_name == actor.agent_name,
                SessionRecord.source.in_([p.file.name for p in same.values()]),
            )
        ).all()
    )
    return {
        i: FileResult(
            name=p.file.name,
            status="unchanged",
            session_id=ids[p.file.name],
            format=p.parsed.format,
            messages=len(p.parsed.messages),
            archived=shas[i] in archived and len(p.file.content) <= cap,
            malformed_lines=p.problems,
        )
        for i, p in same.items()
    }


def _segment_rows(
    service: IngestionHost, actor: Actor, session_id: UUID, prepared: Prepared
) -> list[dict[str, Any]]:
    messages = prepared.parsed.messages
    spans = segment_messages(messages, service.intelligence, 0)
    return [
        {
            "tenant_id": actor.tenant_id,
            "session_id": session_id,
            "segment_index": index,
            "start_seq": span.start,
            "end_seq": span.end,
            "topic": span.topic,
            "fingerprint": fingerprint(messages[span.start : span.end + 1]),
            "segmenter": span.segmenter,
            "stage": "score",
        }
        for index, span in enumerate(spans)
    ]


def _archive_many(
    service: IngestionHost, session: Session, actor: Actor, items: list[tuple[Prepared, UUID]]
) -> set[str]:
    """Archive the files under the cap whose content is not archived yet; returns the archived names."""
    cap = service.settings.raw_archive_max_bytes
    small = [
        (p, sid, hashlib.sha256(p.file.content).hexdigest()) for p, sid in items if len(p.file.content) <= cap
    ]
    seen = set(
        session.execute(
            select(RawUpload.sha256).where(
                RawUpload.tenant_id == actor.tenant_id,
                RawUpload.kind == "ingest_file",
                RawUpload.sha256.in_([digest for _, _, digest in small]),
            )
        ).scalars()
    )
    rows = []
    for p, session_id, digest in small:
        if digest in seen:
            continue
        seen.add(digest)
        clean, counts = service.scrubber.raw(p.file.content)
        rows.append(
            {
                "tenant_id": actor.tenant_id,
                "agent_id": actor.agent_id,
                "agent_name": actor.agent_name,
                "kind": "ingest_file",
                "name": p.file.name,
                "size_bytes": len(p.file.content),
                "sha256": digest,
                "content": clean,
                "redacted_entities": counts,
                "session_id": session_id,
            }
        )
    if rows:
        session.execute(insert(RawUpload), rows)
    return {p.file.name for p, _, _ in small}


def create_sessions(
    service: IngestionHost, session: Session, actor: Actor, prepared: list[Prepared]
) -> list[FileResult]:
    """Insert every file in `prepared` as a new session (none exists yet); raises BulkConflict if one does."""
    inline = service.segment_inline
    now = datetime.now(UTC)
    rows = []
    for p in prepared:
        strip_nul(p.parsed.messages)
        metadata, _ = service.scrubber.json(p.parsed.metadata)
        first, last = time_range(p.parsed.messages)
        rows.append(
            {
                "tenant_id": actor.tenant_id,
                "agent_id": actor.agent_id,
                "agent_name": actor.agent_name,
                "source": p.file.name,
                "format": p.parsed.format,
                "meta": metadata or {},
                "message_count": len(p.parsed.messages),
                "started_at": first,
                "ended_at": last,
                "needs_segmentation": not inline,
                "segmented_at": now if inline else None,
            }
        )
    created = session.execute(
        pg_insert(SessionRecord)
        .values(rows)
        .on_conflict_do_nothing(constraint="uq_sessions_tenant_agent_source")
        .returning(SessionRecord.id, SessionRecord.source)
    ).all()
    if len(created) != len(rows):
        raise BulkConflict(f"{len(rows) - len(created)} of the sessions appeared meanwhile")
    ids = {row.source: row.id for row in created}
    message_rows: list[dict[str, Any]] = []
    segment_rows: list[dict[str, Any]] = []
    for p in prepared:
        sid = ids[p.file.name]
        message_rows += [
            message_row(sid, actor.tenant_id, i, m, message_digest(m))
            for i, m in enumerate(p.parsed.messages)
        ]
        if inline:
            segment_rows += _segment_rows(service, actor, sid, p)
    copy_messages(session, message_rows)
    if segment_rows:
        session.execute(insert(TaskSegment), segment_rows)
    archived: set[str] = set()
    try:
        with session.begin_nested():  # an archive failure never blocks ingestion
            archived = _archive_many(service, session, actor, [(p, ids[p.file.name]) for p in prepared])
    except (SQLAlchemyError, ValueError, RuntimeError) as exc:
        log.warning(
            "raw archive of %d files failed (%s); ingestion goes on", len(prepared), type(exc).__name__
        )
    segments: dict[UUID, int] = {}
    for r in segment_rows:
        segments[r["session_id"]] = segments.get(r["session_id"], 0) + 1
    return [
        FileResult(
            name=p.file.name,
            status="created",
            session_id=ids[p.file.name],
            format=p.parsed.format,
            messages=len(p.parsed.messages),
            new_messages=len(p.parsed.messages),
            new_segments=segments.get(ids[p.file.name], 0),
            archived=p.file.name in archived,
            malformed_lines=p.problems,
        )
        for p in prepared
    ]
