"""Worker runs, leases, heartbeats (the background worker).

Revision ID: 0003_worker
Revises: 0002_trajectory
Create Date: 2026-11-29
"""

from alembic import op

revision = "0003_worker"
down_revision = "0002_trajectory"
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE workers (
    id text PRIMARY KEY,
    hostname text NOT NULL,
    pid integer NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    stopped_at timestamptz,
    current_step text
);

CREATE TABLE worker_runs (
    id bigserial PRIMARY KEY,
    cycle_id uuid NOT NULL,
    worker_id text NOT NULL,
    step text NOT NULL,
    status text NOT NULL DEFAULT 'running',
    started_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    counts jsonb NOT NULL DEFAULT '{}',
    errors jsonb NOT NULL DEFAULT '[]',
    CONSTRAINT ck_worker_runs_status
        CHECK (status IN ('running','ok','failed','skipped','interrupted'))
);
CREATE INDEX ix_worker_runs_started ON worker_runs (started_at);
CREATE INDEX ix_worker_runs_cycle ON worker_runs (cycle_id);

-- Tier changes become HOT updates (no new entry in the HNSW, GIN and btree indexes): no index holds
-- `tier`, and pages keep room for the new row version.
DROP INDEX ix_memories_tenant_status_tier;
CREATE INDEX ix_memories_tenant_status ON memories (tenant_id, status);
ALTER TABLE memories SET (fillfactor = 80);

-- The HNSW index covers active memories only (ultron/db/vectors.py), so archiving adds no graph entry.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_indexes WHERE indexname = 'ix_memories_embedding_hnsw') THEN
        DROP INDEX ix_memories_embedding_hnsw;
        CREATE INDEX ix_memories_embedding_hnsw ON memories USING hnsw (embedding vector_cosine_ops)
            WITH (m = 16, ef_construction = 64) WHERE status = 'active';
    END IF;
END $$;
"""

DOWNGRADE = """
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_indexes WHERE indexname = 'ix_memories_embedding_hnsw') THEN
        DROP INDEX ix_memories_embedding_hnsw;
        CREATE INDEX ix_memories_embedding_hnsw ON memories USING hnsw (embedding vector_cosine_ops)
            WITH (m = 16, ef_construction = 64);
    END IF;
END $$;
ALTER TABLE memories RESET (fillfactor);
DROP INDEX ix_memories_tenant_status;
CREATE INDEX ix_memories_tenant_status_tier ON memories (tenant_id, status, tier);
DROP TABLE worker_runs;
DROP TABLE workers;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
