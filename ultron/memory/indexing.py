"""A new upload's vector enters the HNSW graph in the worker, not in the upload's request (migration 0020).

Inserting a vector into pgvector's HNSW graph is most of what a single upload's INSERT costs (2 ms at 10k
memories, 4 ms at 100k on a 2-core box), and nobody waits for it: an upload stores its memory with
`indexed` false, which the HNSW index's predicate leaves out, and the worker's `index` step sets it for a
batch at a time (`index_pending`), which is when the graph insert happens. Until then every probe that
must see the memory at once reads the tenant's unindexed memories exactly, beside its HNSW walk: search's
dense leg (the brief's task items too), the dedup probe and the supersede probe (sql/memory.sql,
sql/supersede.sql; the partial index ix_memories_unindexed holds only those rows).

That exact pass must stay short, so an upload indexes its own memory at once when its tenant already has
PENDING_MAX memories waiting (a hub whose worker is not running: `ultron serve --no-worker` and no
`ultron worker`); a batch defers only what fits under it. A merge that adds text to its memory's document
rewrites the row, whose new version would get a new graph entry too: it leaves that to the worker the
same way (`defer_while_few`).
"""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from sqlalchemy import ColumnElement, func, literal, select, text
from sqlalchemy.orm import Session

from ultron.db.engine import Database
from ultron.db.models import Memory

# The most memories of one tenant the probes read by an exact pass (each search reads them all): past it
# uploads write their graph entry themselves, as before migration 0020.
PENDING_MAX = 200
# Memories the worker indexes per statement (one transaction each).
INDEX_BATCH = 500

_PENDING = text(
    "SELECT count(*) FROM (SELECT 1 FROM memories WHERE tenant_id = :tenant_id AND status = 'active' "
    "AND NOT indexed LIMIT :most) w"
)

# The oldest waiting memories first, any tenant's; rows another worker holds are skipped, not waited for.
# The UPDATE is not HOT (`indexed` is in the HNSW index's predicate): the row's new version gets its HNSW
# entry and its B-tree and GIN entries again.
_INDEX_PENDING = text(
    """
WITH picked AS (
    SELECT id, tenant_id FROM memories
    WHERE status = 'active' AND NOT indexed
    ORDER BY created_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
UPDATE memories m SET indexed = true
FROM picked p
WHERE m.id = p.id AND m.tenant_id = p.tenant_id
"""
)


def defer_while_few(tenant_id: UUID) -> ColumnElement[bool]:
    """The `indexed` value for a row an UPDATE rewrites (a merge that adds text): false, the worker's to
    index, unless the tenant already has PENDING_MAX waiting. An expression, evaluated in the UPDATE."""
    waiting = (
        select(literal(1))
        .where(Memory.tenant_id == tenant_id, Memory.status == "active", ~Memory.indexed)
        .limit(PENDING_MAX)
        .subquery()
    )
    return select(func.count()).select_from(waiting).scalar_subquery() >= PENDING_MAX


def pending(session: Session, tenant_id: UUID, most: int = PENDING_MAX) -> int:
    """How many of the tenant's active memories wait for their graph entry, counted up to `most`."""
    return int(session.execute(_PENDING, {"tenant_id": tenant_id, "most": most}).scalar_one())


def index_pending(session: Session, limit: int = INDEX_BATCH) -> int:
    """Put up to `limit` waiting memories (the oldest first, across tenants) into the HNSW graph; how many.
    The caller commits."""
    result = session.execute(_INDEX_PENDING, {"limit": limit})
    return int(result.rowcount or 0)  # type: ignore[attr-defined]  # a CursorResult for an UPDATE


def index_all(db: Database, stopping: Callable[[], bool] = lambda: False) -> int:
    """`index_pending` a transaction at a time until none waits (or `stopping()`); how many were indexed.
    The worker's `index` step, and the benchmarks' stand-in for it between their uploads and searches."""
    done = 0
    while not stopping():
        with db.session() as session:
            indexed = index_pending(session)
        done += indexed
        if indexed < INDEX_BATCH:
            break
    return done
