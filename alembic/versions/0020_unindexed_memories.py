"""memories.indexed: a new upload's vector enters the HNSW graph in the worker, not in the upload's request.

Inserting a vector into the HNSW graph was the largest single cost of an upload (2 ms at 10k memories, 4 ms
at 100k, measured on the upload's own INSERT), and no caller needs to wait for it: the memory is found
at once without it. An upload now stores its memory with `indexed` false; the HNSW index holds only the
rows with `indexed` true (its predicate: `status = 'active' AND indexed`), so that INSERT writes no graph
entry. The worker's `index` step sets `indexed` in batches (ultron/memory/indexing.py) and the graph insert
happens there. Until then every nearest-neighbour probe that must see the memory at once (search's dense
leg, which the brief's task items also come from, the dedup probe, the supersede probe) reads the tenant's
unindexed memories by an exact pass through the partial index `ix_memories_unindexed` beside its HNSW
walk; an upload indexes its memory itself when its tenant already has PENDING_MAX waiting (no worker
running), so that pass stays short.

On upgrade every existing memory is indexed (the column's default, true: no row is rewritten) and the HNSW
index is rebuilt with the new predicate (minutes on a large store). Downgrade rebuilds it with the old
predicate over every active memory and drops the column: no memory, contribution, key, scope or pin changes.

Revision ID: 0020_unindexed_memories
Revises: 0019_cluster_queue
Create Date: 2026-12-03
"""

import sqlalchemy as sa

from alembic import op

revision = "0020_unindexed_memories"
down_revision = "0019_cluster_queue"
branch_labels = None
depends_on = None

# ultron/db/vectors.py's HNSW_M and HNSW_EF_CONSTRUCTION when this migration was written
_WITH = "WITH (m = 16, ef_construction = 64)"


def _rebuild_hnsw(predicate: str) -> None:
    """The memories' HNSW index again, under `predicate`, when there is one (a store whose embedding
    profile is not recorded yet has none: ultron/db/vectors.py creates it)."""
    op.execute(
        f"""
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_indexes WHERE indexname = 'ix_memories_embedding_hnsw') THEN
        DROP INDEX ix_memories_embedding_hnsw;
        CREATE INDEX ix_memories_embedding_hnsw ON memories USING hnsw (embedding vector_cosine_ops)
            {_WITH} WHERE {predicate};
    END IF;
END $$;
"""
    )


def upgrade() -> None:
    op.add_column(
        "memories", sa.Column("indexed", sa.Boolean(), server_default=sa.text("true"), nullable=False)
    )
    op.execute(
        "CREATE INDEX ix_memories_unindexed ON memories (tenant_id) WHERE status = 'active' AND NOT indexed"
    )
    _rebuild_hnsw("status = 'active' AND indexed")


def downgrade() -> None:
    op.execute("DROP INDEX ix_memories_unindexed")
    _rebuild_hnsw("status = 'active'")
    op.drop_column("memories", "indexed")
