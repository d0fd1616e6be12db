"""Knowledge clusters and the Skill Hub.

Revision ID: 0005_skills
Revises: 0004_companion
Create Date: 2026-11-29
"""

from alembic import op

revision = "0005_skills"
down_revision = "0004_companion"
branch_labels = None
depends_on = None

# Vector columns get their dimension (and HNSW indexes) with the embedding profile (ultron/db/vectors.py).
UPGRADE = """
CREATE TABLE knowledge_clusters (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    topic text NOT NULL DEFAULT '',
    centroid vector,
    centroid_norm double precision NOT NULL DEFAULT 0,
    member_count integer NOT NULL DEFAULT 0,
    skill_slug text,
    superseded_slugs text[] NOT NULL DEFAULT '{}',
    members_at_last_version integer NOT NULL DEFAULT 0,
    failed_attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ix_knowledge_clusters_tenant_count ON knowledge_clusters (tenant_id, member_count);

CREATE TABLE cluster_members (
    memory_id uuid PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
    cluster_id uuid NOT NULL REFERENCES knowledge_clusters(id) ON DELETE CASCADE,
    tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    embedding vector,
    joined_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ix_cluster_members_cluster_joined ON cluster_members (cluster_id, joined_at);

CREATE TABLE skills (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    slug text NOT NULL,
    version_major integer NOT NULL,
    version_minor integer NOT NULL,
    version_patch integer NOT NULL,
    name text NOT NULL,
    description text NOT NULL DEFAULT '',
    body text NOT NULL,
    categories text[] NOT NULL DEFAULT '{}',
    embedding vector,
    status text NOT NULL DEFAULT 'active',
    score double precision,
    source_cluster_id uuid REFERENCES knowledge_clusters(id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ck_skills_status CHECK (status IN ('active','superseded')),
    CONSTRAINT uq_skills_version UNIQUE (tenant_id, slug, version_major, version_minor, version_patch)
);
CREATE INDEX ix_skills_tenant_status ON skills (tenant_id, status);

CREATE TABLE evolution_records (
    id bigserial PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    cluster_id uuid REFERENCES knowledge_clusters(id) ON DELETE SET NULL,
    skill_slug text,
    old_version text,
    new_version text,
    old_score double precision,
    new_score double precision,
    status text NOT NULL,
    trigger text NOT NULL,
    detail text NOT NULL DEFAULT '',
    memory_ids uuid[] NOT NULL DEFAULT '{}',
    started_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz
);
CREATE INDEX ix_evolution_records_cluster ON evolution_records (cluster_id, started_at);
"""

DOWNGRADE = """
DROP TABLE evolution_records;
DROP TABLE skills;
DROP TABLE cluster_members;
DROP TABLE knowledge_clusters;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
