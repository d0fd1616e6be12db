"""Per-item work queues: sessions to segment, segments to score, segments to extract; and the batch queue
of shared memories waiting for their cluster (`cluster_queue`).

Every queue follows one lease protocol (see sql/worker.sql): lease in one statement, work in the item's
own transaction while holding its row, clear the lease in that same transaction, record a failure in a
separate short one (back off, park after the last attempt).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from sqlalchemy.orm import Session

from ultron.config import Settings
from ultron.db.queries import q

log = logging.getLogger(__name__)

# Longest retry delay: a parked-soon item is still looked at once a day.
MAX_BACKOFF_SECONDS = 86_400.0
# Longest error text kept on an item (a traceback's last lines are enough to act on).
MAX_ERROR_CHARS = 4000

Handler = Callable[[Session, UUID], Any]


@dataclass(frozen=True)
class Queue:
    """One kind of leased item. `stage` selects segments; sessions have none."""

    name: str
    item: str
    stage: str | None = None

    @property
    def table(self) -> str:
        return f"{self.item}s"

    def params(self, **params: Any) -> dict[str, Any]:
        return {**params, "stage": self.stage} if self.stage is not None else params


SEGMENT = Queue("segment", "session")
SCORE = Queue("score", "segment", "score")
EXTRACT = Queue("extract", "segment", "extract")
QUEUES = (SEGMENT, SCORE, EXTRACT)
TABLES = ("sessions", "segments", "cluster_queue")


@dataclass(frozen=True)
class Leased:
    id: UUID
    tenant_id: UUID
    attempts: int


@dataclass(frozen=True)
class LeasePolicy:
    lease_seconds: float
    max_attempts: int
    retry_base_seconds: float

    @classmethod
    def from_settings(cls, settings: Settings) -> LeasePolicy:
        return cls(
            settings.worker_lease_seconds, settings.worker_max_attempts, settings.worker_retry_base_seconds
        )


def lease(
    session: Session,
    queue: Queue,
    owner: str,
    policy: LeasePolicy,
    limit: int = 1,
    exclude: Collection[UUID] = (),
    tenant_id: UUID | None = None,
) -> list[Leased]:
    """Lease up to `limit` ready items in one statement (never one in `exclude`; only `tenant_id`'s when
    given)."""
    rows = session.execute(
        q(f"lease_{queue.table}"),
        queue.params(
            owner=owner,
            lease_seconds=policy.lease_seconds,
            max_attempts=policy.max_attempts,
            limit=limit,
            exclude=list(exclude),
            tenant_id=tenant_id,
        ),
    ).all()
    return [Leased(r.id, r.tenant_id, r.attempts) for r in rows]


def claim(session: Session, queue: Queue, item_id: UUID, owner: str) -> bool:
    """Lock the item for this transaction if this worker still holds its lease."""
    found = session.execute(q(f"claim_{queue.item}"), queue.params(id=item_id, owner=owner)).first()
    return found is not None


def finish(session: Session, queue: Queue, item_id: UUID, owner: str) -> None:
    session.execute(q(f"finish_{queue.item}"), {"id": item_id, "owner": owner})


def fail(session: Session, queue: Queue, item_id: UUID, owner: str, error: str, policy: LeasePolicy) -> bool:
    """Record a failed attempt; returns True when the item is now parked."""
    row = session.execute(
        q(f"fail_{queue.item}"),
        {
            "id": item_id,
            "owner": owner,
            "error": error[-MAX_ERROR_CHARS:],
            "base_seconds": policy.retry_base_seconds,
            "max_backoff_seconds": MAX_BACKOFF_SECONDS,
            "max_attempts": policy.max_attempts,
        },
    ).first()
    return bool(row and row.parked)


def park_abandoned(session: Session, policy: LeasePolicy, tenant_id: UUID | None = None) -> int:
    """Park items whose attempts ran out through expired leases alone (their worker kept dying); only
    `tenant_id`'s when given (a request waiting on its own tenant's work touches no other tenant's)."""
    parked = 0
    params = {"max_attempts": policy.max_attempts, "tenant_id": tenant_id}
    for table in TABLES:
        parked += len(session.execute(q(f"park_abandoned_{table}"), params).all())
    return parked


def heartbeat(session: Session, owner: str, lease_seconds: float) -> None:
    for table in TABLES:
        session.execute(q(f"heartbeat_{table}"), {"owner": owner, "lease_seconds": lease_seconds})


def release(session: Session, owner: str) -> None:
    """Give back leases taken but not started (shutdown); their attempt is not counted."""
    for table in TABLES:
        session.execute(q(f"release_{table}"), {"owner": owner})


# --- the cluster queue: the same protocol, a batch of one tenant's rows per transaction -----------------


@dataclass(frozen=True)
class LeasedBatch:
    tenant_id: UUID
    ids: list[UUID]  # in upload order
    attempts: int  # the most any of them has used


def lease_cluster_batches(
    session: Session, owner: str, policy: LeasePolicy, limit: int, tenant_id: UUID | None = None
) -> list[LeasedBatch]:
    """Lease up to `limit` ready rows of the cluster queue in one statement, grouped by tenant, each group
    in upload order."""
    rows = session.execute(
        q("lease_cluster_queue"),
        {
            "owner": owner,
            "lease_seconds": policy.lease_seconds,
            "max_attempts": policy.max_attempts,
            "limit": limit,
            "tenant_id": tenant_id,
        },
    ).all()
    groups: dict[UUID, list[Any]] = {}
    for r in sorted(rows, key=lambda r: r.seq):
        groups.setdefault(r.tenant_id, []).append(r)
    return [LeasedBatch(t, [r.id for r in rs], max(r.attempts for r in rs)) for t, rs in groups.items()]


def park_abandoned_clusters(session: Session, policy: LeasePolicy, tenant_id: UUID | None = None) -> int:
    """park_abandoned for the cluster queue alone."""
    params = {"max_attempts": policy.max_attempts, "tenant_id": tenant_id}
    return len(session.execute(q("park_abandoned_cluster_queue"), params).all())


def claim_cluster_batch(session: Session, batch: LeasedBatch, owner: str) -> list[UUID]:
    """Lock the batch's rows this worker still holds for this transaction: their ids, in upload order."""
    params = {"tenant_id": batch.tenant_id, "ids": batch.ids, "owner": owner}
    return list(session.execute(q("claim_cluster_queue"), params).scalars())


def finish_cluster_batch(session: Session, tenant_id: UUID, ids: list[UUID], owner: str) -> None:
    session.execute(q("finish_cluster_queue"), {"tenant_id": tenant_id, "ids": ids, "owner": owner})


def fail_cluster_batch(
    session: Session, batch: LeasedBatch, owner: str, error: str, policy: LeasePolicy
) -> bool:
    """Record a failed attempt of the whole batch; True when its rows are now parked."""
    rows = session.execute(
        q("fail_cluster_queue"),
        {
            "tenant_id": batch.tenant_id,
            "ids": batch.ids,
            "owner": owner,
            "error": error[-MAX_ERROR_CHARS:],
            "base_seconds": policy.retry_base_seconds,
            "max_backoff_seconds": MAX_BACKOFF_SECONDS,
            "max_attempts": policy.max_attempts,
        },
    ).all()
    return any(r.parked for r in rows)
