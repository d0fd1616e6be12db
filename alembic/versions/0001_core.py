"""Core schema: tenants, agents, embedding profile, memories, contributions, hits, activity.

Revision ID: 0001_core
Revises:
Create Date: 2026-11-29
"""

from alembic import op

revision = "0001_core"
down_revision = None
branch_labels = None
depends_on = None

UPGRADE = """
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE tenants (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name text NOT NULL UNIQUE,
    settings jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE agents (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    name text NOT NULL,
    key_hash text UNIQUE,
    key_prefix text,
    groups text[] NOT NULL DEFAULT '{}',
    is_admin boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz,
    last_seen_at timestamptz,
    CONSTRAINT uq_agents_tenant_name UNIQUE (tenant_id, name)
);

CREATE TABLE embedding_profile (
    id smallint PRIMARY KEY DEFAULT 1,
    provider text NOT NULL,
    model_name text NOT NULL,
    dimension integer NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ck_embedding_profile_singleton CHECK (id = 1)
);

CREATE TABLE memories (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    agent_id uuid REFERENCES agents(id) ON DELETE SET NULL,
    memory_type text NOT NULL,
    content text NOT NULL,
    context text NOT NULL DEFAULT '',
    resolution text NOT NULL DEFAULT '',
    tags text[] NOT NULL DEFAULT '{}',
    summary_l0 text NOT NULL DEFAULT '',
    overview_l1 text NOT NULL DEFAULT '',
    embedding vector,
    content_hash text NOT NULL,
    search_tsv tsvector NOT NULL,
    tier text NOT NULL DEFAULT 'warm',
    status text NOT NULL DEFAULT 'active',
    hit_count integer NOT NULL DEFAULT 0,
    last_hit_at timestamptz,
    scope text NOT NULL DEFAULT 'shared',
    group_name text,
    pinned boolean NOT NULL DEFAULT false,
    valence double precision,
    arousal double precision,
    redacted_entities jsonb NOT NULL DEFAULT '{}',
    merged_into_id uuid REFERENCES memories(id) ON DELETE SET NULL,
    archived_reason text,
    archived_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ck_memories_type
        CHECK (memory_type IN ('error','security','correction','pattern','preference','life')),
    CONSTRAINT ck_memories_tier CHECK (tier IN ('hot','warm','cold')),
    CONSTRAINT ck_memories_status CHECK (status IN ('active','archived')),
    CONSTRAINT ck_memories_scope CHECK (scope IN ('shared','private','group'))
);
CREATE INDEX ix_memories_tenant_status_tier ON memories (tenant_id, status, tier);
CREATE INDEX ix_memories_tenant_type_status ON memories (tenant_id, memory_type, status);
CREATE INDEX ix_memories_tenant_hash ON memories (tenant_id, content_hash);
CREATE INDEX ix_memories_tenant_created ON memories (tenant_id, created_at);
-- fastupdate off: a pending list would be scanned by every search until the next vacuum.
CREATE INDEX ix_memories_search_tsv ON memories USING gin (search_tsv) WITH (fastupdate = off);

CREATE TABLE memory_contributions (
    id bigserial PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    memory_id uuid NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    agent_id uuid REFERENCES agents(id) ON DELETE SET NULL,
    decision text NOT NULL,
    similarity double precision,
    content text NOT NULL,
    context text NOT NULL DEFAULT '',
    resolution text NOT NULL DEFAULT '',
    tags text[] NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ix_contributions_memory ON memory_contributions (memory_id, created_at);

CREATE TABLE hit_events (
    id bigserial PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    memory_id uuid NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    agent_id uuid REFERENCES agents(id) ON DELETE SET NULL,
    signal text NOT NULL,
    weight integer NOT NULL,
    counted boolean NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ck_hit_events_signal CHECK (signal IN ('search','details','merge'))
);
CREATE INDEX ix_hit_events_memory_agent ON hit_events (memory_id, agent_id, signal, created_at);
CREATE INDEX ix_hit_events_tenant_created ON hit_events (tenant_id, created_at);

CREATE TABLE activity_events (
    id bigserial PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    agent_id uuid REFERENCES agents(id) ON DELETE SET NULL,
    kind text NOT NULL,
    memory_id uuid,
    detail jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ix_activity_tenant_kind_created ON activity_events (tenant_id, kind, created_at);

-- One use of each memory by one agent. A hit counts (raises hit_count by its weight) only if the same
-- agent has no counted hit of the same signal on that memory inside the window; every use is logged.
-- Returns the ids whose hit_count rose.
CREATE FUNCTION ultron_record_hits(
    p_tenant uuid, p_agent uuid, p_ids uuid[], p_signal text, p_weight integer, p_window_seconds float8
) RETURNS SETOF uuid LANGUAGE sql VOLATILE AS $$
    WITH decided AS (
        SELECT i.memory_id,
               NOT EXISTS (
                   SELECT 1 FROM hit_events h
                   WHERE h.memory_id = i.memory_id
                     AND h.agent_id IS NOT DISTINCT FROM p_agent
                     AND h.signal = p_signal AND h.counted
                     AND h.created_at > now() - make_interval(secs => p_window_seconds)
               ) AS counted
        FROM (SELECT DISTINCT unnest(p_ids) AS memory_id) i
        JOIN memories m ON m.id = i.memory_id AND m.tenant_id = p_tenant
    ), logged AS (
        INSERT INTO hit_events (tenant_id, memory_id, agent_id, signal, weight, counted)
        SELECT p_tenant, memory_id, p_agent, p_signal, p_weight, counted FROM decided
    )
    UPDATE memories m
    SET hit_count = m.hit_count + p_weight, last_hit_at = now()
    FROM decided d
    WHERE m.id = d.memory_id AND d.counted AND m.tenant_id = p_tenant
    RETURNING m.id
$$;
"""

DOWNGRADE = """
DROP FUNCTION ultron_record_hits(uuid, uuid, uuid[], text, integer, float8);
DROP TABLE activity_events;
DROP TABLE hit_events;
DROP TABLE memory_contributions;
DROP TABLE memories;
DROP TABLE embedding_profile;
DROP TABLE agents;
DROP TABLE tenants;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
