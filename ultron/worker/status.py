"""What the worker is doing: recent step runs, live workers, queue depths, parked items."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel, Field
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from ultron.db.models import WorkerProcess
from ultron.db.queries import q

# A worker whose heartbeat is older than this many lease periods is shown as not alive.
ALIVE_LEASES = 2.0


class StepRun(BaseModel):
    id: int
    cycle_id: UUID
    worker_id: str
    step: str
    status: str
    started_at: datetime
    finished_at: datetime | None
    counts: dict[str, Any]
    errors: list[Any]


class WorkerInfo(BaseModel):
    id: str
    hostname: str
    pid: int
    started_at: datetime
    heartbeat_at: datetime
    stopped_at: datetime | None
    current_step: str | None
    alive: bool


class QueueDepth(BaseModel):
    queue: str = Field(
        description="segment (sessions), score or extract (segments), cluster (new shared memories)"
    )
    tenant_id: UUID
    ready: int
    waiting: int = Field(description="backing off after a failure")
    leased: int
    parked: int


class ParkedItem(BaseModel):
    queue: str
    id: str
    tenant_id: UUID
    attempts: int
    last_error: str | None
    parked_at: datetime


class WorkerStatus(BaseModel):
    workers: list[WorkerInfo]
    runs: list[StepRun]
    queues: list[QueueDepth]
    parked: list[ParkedItem]


def worker_status(
    session: Session,
    tenant_id: UUID | None,
    *,
    lease_seconds: float,
    runs: int = 30,
    parked: int = 50,
) -> WorkerStatus:
    """Queues and parked items of one tenant (all when None); runs and workers are hub-wide."""
    alive_after = func.now() - func.make_interval(0, 0, 0, 0, 0, 0, lease_seconds * ALIVE_LEASES)
    worker_rows = session.execute(
        select(
            WorkerProcess, (WorkerProcess.stopped_at.is_(None)) & (WorkerProcess.heartbeat_at > alive_after)
        )
        .order_by(WorkerProcess.heartbeat_at.desc())
        .limit(50)
    ).all()
    return WorkerStatus(
        workers=[
            WorkerInfo(
                id=w.id,
                hostname=w.hostname,
                pid=w.pid,
                started_at=w.started_at,
                heartbeat_at=w.heartbeat_at,
                stopped_at=w.stopped_at,
                current_step=w.current_step,
                alive=bool(alive),
            )
            for w, alive in worker_rows
        ],
        runs=[
            StepRun.model_validate(r._asdict()) for r in session.execute(q("recent_runs"), {"limit": runs})
        ],
        queues=[
            QueueDepth.model_validate(r._asdict())
            for r in session.execute(q("queue_depths"), {"tenant_id": tenant_id})
        ],
        parked=[
            ParkedItem.model_validate(r._asdict())
            for r in session.execute(q("parked_items"), {"tenant_id": tenant_id, "limit": parked})
        ],
    )


_MARK_ABANDONED = text(
    """
    UPDATE worker_runs r
    SET status = 'interrupted', finished_at = now(),
        errors = r.errors || '["abandoned: its worker stopped heartbeating (killed?)"]'::jsonb
    WHERE r.status = 'running' AND r.worker_id <> :keep
      AND NOT EXISTS (
          SELECT 1 FROM workers w
          WHERE w.id = r.worker_id AND w.stopped_at IS NULL
            AND w.heartbeat_at > now() - make_interval(secs => :stale)
      )
    """
)


def mark_abandoned_runs(session: Session, stale_seconds: float, *, keep: str = "") -> int:
    """Runs left `running` by a worker that is gone (SIGKILL, a crash, a lost host): marked `interrupted`
    once its heartbeat is `stale_seconds` old. Every live worker does this on start and each heartbeat.
    Returns how many it marked."""
    result = session.execute(_MARK_ABANDONED, {"keep": keep, "stale": stale_seconds})
    return int(result.rowcount or 0)  # type: ignore[attr-defined]
