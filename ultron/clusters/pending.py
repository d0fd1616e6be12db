"""Shared memories waiting for their cluster (the `cluster_queue` table).

An upload does not join a cluster inside its request: the memory's INSERT writes a queue row with it
(sql/memory.sql, create_memory; a batch's rows by one statement), and the worker's `cluster` step leases
rows of the queue (ultron/worker/queues.py, the protocol every queue follows) and assigns each tenant's batch
in upload order with `ClusterService.assign_many`: the end state of one `assign` per memory, in a few
statements for the whole batch. Nothing reads a memory's cluster on the way to an answer (search, the
brief); skills read clusters in the evolution cycle, whose initial clustering first assigns what is still
queued (`assign_unleased`), so a hub that runs no worker loop still clusters every memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol
from uuid import UUID

from sqlalchemy.orm import Session

from ultron.db.queries import q

CATCH_UP_PAGE = 500  # queue rows the evolution cycle's catch-up assigns per statement batch


class Assigns(Protocol):
    def assign_many(
        self, session: Session, tenant_id: UUID, items: Sequence[tuple[UUID, Any]]
    ) -> list[UUID]: ...


def assign_queued(session: Session, clusters: Assigns, tenant_id: UUID, memory_ids: Sequence[UUID]) -> int:
    """The cluster step of a batch of one tenant's queue rows (claimed by the caller): the memories that
    still need a cluster join one, in upload order; how many did. The caller deletes the rows."""
    rows = session.execute(q("queued_memories"), {"tenant_id": tenant_id, "ids": list(memory_ids)}).all()
    clusters.assign_many(session, tenant_id, [(row.id, row.embedding) for row in rows])
    return len(rows)


def assign_unleased(session: Session, clusters: Assigns, tenant_id: UUID) -> int:
    """Every queue row of the tenant no live lease holds, assigned and deleted, page by page in upload
    order (the evolution cycle's catch-up, `ClusterService.run_initial_clustering`); how many memories
    joined a cluster."""
    done = 0
    while True:
        ids = list(
            session.execute(
                q("unleased_cluster_queue"), {"tenant_id": tenant_id, "limit": CATCH_UP_PAGE}
            ).scalars()
        )
        if not ids:
            return done
        done += assign_queued(session, clusters, tenant_id, ids)
        session.execute(q("drop_cluster_queue"), {"tenant_id": tenant_id, "ids": ids})
