"""Sessions, messages, task segments, raw archive, imports (ingestion and the Trajectory Hub).

Revision ID: 0002_trajectory
Revises: 0001_core
Create Date: 2026-11-29
"""

from alembic import op

revision = "0002_trajectory"
down_revision = "0001_core"
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE import_jobs (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    agent_id uuid REFERENCES agents(id) ON DELETE SET NULL,
    agent_name text NOT NULL,
    kind text NOT NULL,
    name text NOT NULL,
    status text NOT NULL DEFAULT 'running',
    total integer NOT NULL DEFAULT 0,
    done integer NOT NULL DEFAULT 0,
    failed integer NOT NULL DEFAULT 0,
    last_error text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    CONSTRAINT ck_import_jobs_kind CHECK (kind IN ('chatgpt','claude','deepseek','markdown','text')),
    CONSTRAINT ck_import_jobs_status CHECK (status IN ('running','paused','done','failed'))
);
CREATE INDEX ix_import_jobs_tenant_created ON import_jobs (tenant_id, created_at);

CREATE TABLE sessions (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    agent_id uuid REFERENCES agents(id) ON DELETE SET NULL,
    agent_name text NOT NULL,
    source text NOT NULL,
    format text NOT NULL,
    message_count integer NOT NULL DEFAULT 0,
    metadata jsonb NOT NULL DEFAULT '{}',
    import_id uuid REFERENCES import_jobs(id) ON DELETE SET NULL,
    review_status text NOT NULL DEFAULT 'none',
    started_at timestamptz,
    ended_at timestamptz,
    needs_segmentation boolean NOT NULL DEFAULT true,
    segmented_at timestamptz,
    lease_owner text,
    lease_expires_at timestamptz,
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error text,
    parked_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT uq_sessions_tenant_agent_source UNIQUE (tenant_id, agent_name, source),
    CONSTRAINT ck_sessions_review CHECK (review_status IN ('none','pending','approved','discarded'))
);
CREATE INDEX ix_sessions_tenant_updated ON sessions (tenant_id, updated_at);
CREATE INDEX ix_sessions_import ON sessions (import_id);
CREATE INDEX ix_sessions_pending ON sessions (next_attempt_at)
    WHERE needs_segmentation AND parked_at IS NULL;

CREATE TABLE session_messages (
    session_id uuid NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq integer NOT NULL,
    tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    role text NOT NULL,
    content text NOT NULL DEFAULT '',
    reasoning text,
    tool_calls jsonb,
    tool_call_id text,
    name text,
    is_error boolean,
    stop_reason text,
    sent_at timestamptz,
    digest text NOT NULL,
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE task_segments (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    session_id uuid NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    segment_index integer NOT NULL,
    start_seq integer NOT NULL,
    end_seq integer NOT NULL,
    topic text NOT NULL DEFAULT '',
    fingerprint text NOT NULL,
    segmenter text NOT NULL,
    stage text NOT NULL DEFAULT 'score',
    score double precision,
    metrics jsonb NOT NULL DEFAULT '{}',
    rationale text,
    scored_at timestamptz,
    extracted_at timestamptz,
    lease_owner text,
    lease_expires_at timestamptz,
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error text,
    parked_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ck_task_segments_stage CHECK (stage IN ('score','extract','done','skipped','superseded')),
    CONSTRAINT ck_task_segments_range CHECK (end_seq >= start_seq)
);
CREATE INDEX ix_task_segments_session ON task_segments (session_id, segment_index);
CREATE INDEX ix_task_segments_tenant_stage ON task_segments (tenant_id, stage);
CREATE INDEX ix_task_segments_pending ON task_segments (next_attempt_at)
    WHERE stage IN ('score','extract') AND parked_at IS NULL;

CREATE TABLE memory_sources (
    memory_id uuid NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    segment_id uuid NOT NULL REFERENCES task_segments(id) ON DELETE CASCADE,
    session_id uuid NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    decision text NOT NULL,
    contributions integer NOT NULL DEFAULT 1,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (memory_id, segment_id)
);
CREATE INDEX ix_memory_sources_segment ON memory_sources (segment_id);
CREATE INDEX ix_memory_sources_session ON memory_sources (session_id);

CREATE TABLE raw_user_uploads (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    agent_id uuid REFERENCES agents(id) ON DELETE SET NULL,
    agent_name text NOT NULL,
    kind text NOT NULL,
    name text NOT NULL DEFAULT '',
    size_bytes bigint NOT NULL,
    sha256 text NOT NULL,
    content bytea NOT NULL,
    redacted_entities jsonb NOT NULL DEFAULT '{}',
    session_id uuid REFERENCES sessions(id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ck_raw_uploads_kind CHECK (kind IN ('ingest_file','ingest_text'))
);
CREATE INDEX ix_raw_uploads_tenant_sha ON raw_user_uploads (tenant_id, sha256);
CREATE INDEX ix_raw_uploads_tenant_created ON raw_user_uploads (tenant_id, created_at);

CREATE TABLE import_items (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    job_id uuid NOT NULL REFERENCES import_jobs(id) ON DELETE CASCADE,
    tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    position integer NOT NULL,
    external_id text NOT NULL,
    title text NOT NULL DEFAULT '',
    messages jsonb NOT NULL,
    status text NOT NULL DEFAULT 'pending',
    error text,
    session_id uuid REFERENCES sessions(id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ck_import_items_status CHECK (status IN ('pending','imported','failed'))
);
CREATE INDEX ix_import_items_job_status ON import_items (job_id, status, position);
"""

DOWNGRADE = """
DROP TABLE import_items;
DROP TABLE raw_user_uploads;
DROP TABLE memory_sources;
DROP TABLE task_segments;
DROP TABLE session_messages;
DROP TABLE sessions;
DROP TABLE import_jobs;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
