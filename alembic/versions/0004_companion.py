"""Companion memory: the reflection type, per-agent reflection marks, time ripples.

Revision ID: 0004_companion
Revises: 0003_worker
Create Date: 2026-11-29
"""

from alembic import op

revision = "0004_companion"
down_revision = "0003_worker"
branch_labels = None
depends_on = None

UPGRADE = """
ALTER TABLE memories DROP CONSTRAINT ck_memories_type;
ALTER TABLE memories ADD CONSTRAINT ck_memories_type
    CHECK (memory_type IN ('error','security','correction','pattern','preference','life','reflection'));

CREATE TABLE reflection_marks (
    id bigserial PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    agent_id uuid NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    memory_id uuid NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    reflection_id uuid REFERENCES memories(id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT uq_reflection_marks_agent_memory UNIQUE (agent_id, memory_id)
);

CREATE TABLE memory_ripples (
    id bigserial PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    memory_id uuid NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    source_id uuid NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    weight double precision NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ix_memory_ripples_memory_created ON memory_ripples (memory_id, created_at);
"""

DOWNGRADE = """
DROP TABLE memory_ripples;
DROP TABLE reflection_marks;
DELETE FROM memories WHERE memory_type = 'reflection';
ALTER TABLE memories DROP CONSTRAINT ck_memories_type;
ALTER TABLE memories ADD CONSTRAINT ck_memories_type
    CHECK (memory_type IN ('error','security','correction','pattern','preference','life'));
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
