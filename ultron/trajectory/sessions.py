"""Sessions and their messages: incremental, idempotent storage and reading back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal
from uuid import UUID

from sqlalchemy import delete, func, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from ultron.db.models import SessionMessage, SessionRecord
from ultron.db.queries import q
from ultron.tenancy import Actor
from ultron.trajectory.canonical import message_digest
from ultron.trajectory.messages import Message

StoreStatus = Literal["created", "appended", "replaced", "unchanged"]
JSON_COLUMNS = {"tool_calls"}
# Messages read per round trip when a session is read back.
READ_BATCH = 5000


@dataclass
class StoreOutcome:
    session_id: UUID
    status: StoreStatus
    new_messages: int
    message_count: int


def message_row(session_id: UUID, tenant_id: UUID, seq: int, m: Message, digest: str) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "seq": seq,
        "tenant_id": tenant_id,
        "role": m.role,
        "content": m.content,
        "reasoning": m.reasoning,
        "tool_calls": m.tool_calls,
        "tool_call_id": m.tool_call_id,
        "name": m.name,
        "is_error": m.is_error,
        "stop_reason": m.stop_reason,
        "sent_at": m.sent_at,
        "digest": digest,
    }


def _first_difference(old: list[str], new: list[str]) -> int:
    for i, (a, b) in enumerate(zip(old, new, strict=False)):
        if a != b:
            return i
    return min(len(old), len(new))


def time_range(messages: list[Message]) -> tuple[datetime | None, datetime | None]:
    times = [m.sent_at for m in messages if m.sent_at is not None]
    return (min(times), max(times)) if times else (None, None)


def unchanged_session(
    session: Session, actor: Actor, source: str, messages: list[Message]
) -> StoreOutcome | None:
    """The stored session when it already holds exactly these messages (one read, no lock), else None."""
    row = session.execute(
        q("session_digests"),
        {"tenant_id": actor.tenant_id, "agent_name": actor.agent_name, "source": source},
    ).first()
    if row is None or row.message_count != len(messages) or not row.digests:
        return None
    strip_nul(messages)
    if list(row.digests) != [message_digest(m) for m in messages]:
        return None
    return StoreOutcome(row.id, "unchanged", 0, len(messages))


def strip_nul(messages: list[Message]) -> None:
    for m in messages:  # Postgres text cannot hold NUL; strip it before digests so both sides agree
        m.content = m.content.replace("\x00", "")
        m.reasoning = m.reasoning.replace("\x00", "") if m.reasoning else m.reasoning


def store_session(
    session: Session,
    actor: Actor,
    source: str,
    fmt: str,
    messages: list[Message],
    metadata: dict[str, Any],
    *,
    import_id: UUID | None = None,
) -> StoreOutcome:
    """Create the session or bring it up to date with `messages` (already redacted).

    Same content: nothing is written. Messages appended: only they are inserted. A change earlier in
    the file: the messages from the first difference on are replaced. Either change queues the session
    for (re-)segmentation.
    """
    session.execute(
        pg_insert(SessionRecord)
        .values(
            tenant_id=actor.tenant_id,
            agent_id=actor.agent_id,
            agent_name=actor.agent_name,
            source=source,
            format=fmt,
            meta=metadata,
            import_id=import_id,
            review_status="pending" if import_id else "none",
            message_count=0,
        )
        .on_conflict_do_nothing(constraint="uq_sessions_tenant_agent_source")
    )
    record = session.execute(
        select(SessionRecord)
        .where(
            SessionRecord.tenant_id == actor.tenant_id,
            SessionRecord.agent_name == actor.agent_name,
            SessionRecord.source == source,
        )
        .with_for_update()
    ).scalar_one()
    strip_nul(messages)
    digests = [message_digest(m) for m in messages]
    old = list(
        session.execute(
            select(SessionMessage.digest)
            .where(SessionMessage.session_id == record.id)
            .order_by(SessionMessage.seq)
        ).scalars()
    )
    start = _first_difference(old, digests)
    if start == len(old) == len(digests) and record.message_count == len(digests) and old:
        return StoreOutcome(record.id, "unchanged", 0, len(old))
    if start < len(old):
        session.execute(
            delete(SessionMessage).where(SessionMessage.session_id == record.id, SessionMessage.seq >= start)
        )
    rows = [
        message_row(record.id, actor.tenant_id, i, messages[i], digests[i])
        for i in range(start, len(messages))
    ]
    copy_messages(session, rows)
    status: StoreStatus = "created" if not old else ("appended" if start == len(old) else "replaced")
    first, last = time_range(messages)
    record.format = fmt
    record.meta = {**record.meta, **metadata}
    record.message_count = len(messages)
    record.started_at, record.ended_at = first, last
    queue_segmentation(record)
    session.flush()
    return StoreOutcome(record.id, status, len(rows), len(messages))


def copy_messages(session: Session, rows: list[dict[str, Any]]) -> None:
    """Bulk-load message rows with COPY on the session's own connection (inside its transaction)."""
    if not rows:
        return
    cursor = session.connection().connection.driver_connection.cursor()  # type: ignore[union-attr]
    columns = list(rows[0])
    with cursor.copy(f"COPY session_messages ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(
                [
                    json.dumps(row[c], ensure_ascii=False)
                    if c in JSON_COLUMNS and row[c] is not None
                    else row[c]
                    for c in columns
                ]
            )


def queue_segmentation(record: SessionRecord) -> None:
    """Mark a session for (re-)segmentation now, clearing any backoff or parking."""
    record.needs_segmentation = True
    record.next_attempt_at = func.now()
    record.attempts = 0
    record.parked_at = None
    record.last_error = None
    record.updated_at = datetime.now(UTC)


def notify_work(session: Session, tenant_id: UUID) -> None:
    """Wake a sleeping worker; Postgres delivers the notification when this transaction commits."""
    session.execute(text("SELECT pg_notify('ultron_work', :tenant)"), {"tenant": str(tenant_id)})


def _message(row: SessionMessage) -> Message:
    return Message(
        role=row.role,
        content=row.content,
        reasoning=row.reasoning,
        tool_calls=row.tool_calls,
        tool_call_id=row.tool_call_id,
        name=row.name,
        is_error=row.is_error,
        stop_reason=row.stop_reason,
        sent_at=row.sent_at,
        line=row.seq,
    )


def iter_messages(
    session: Session, session_id: UUID, start: int = 0, end: int | None = None
) -> Iterator[Message]:
    """Messages of a session in order (`line` holds the seq), read in keyset pages."""
    seq = start
    while True:
        stmt = select(SessionMessage).where(
            SessionMessage.session_id == session_id, SessionMessage.seq >= seq
        )
        if end is not None:
            stmt = stmt.where(SessionMessage.seq <= end)
        rows = session.execute(stmt.order_by(SessionMessage.seq).limit(READ_BATCH)).scalars().all()
        for row in rows:
            yield _message(row)
        if len(rows) < READ_BATCH:
            return
        seq = rows[-1].seq + 1


def load_messages(
    session: Session, session_id: UUID, start: int = 0, end: int | None = None
) -> list[Message]:
    return list(iter_messages(session, session_id, start, end))
