"""The tenant in every key: ready to distribute (Citus) or partition by tenant_id.

Partitioned tables and Citus distributed tables require the distribution column in every primary key and
unique constraint, and Citus requires it in every foreign key between distributed tables (so the two rows
sit on one node). This migration makes that true of every table that holds user data:

- `group_members` gains `tenant_id` (filled from its group, NOT NULL, referencing tenants);
- every primary key and unique constraint of a tenant table gets `tenant_id` as its last column, so each
  lookup that used a key (by id, by memory_id, by key_hash) still uses the same index the same way;
- every foreign key between tenant tables becomes (x_id, tenant_id) -> (id, tenant_id). `ON DELETE SET
  NULL` keeps its meaning through PostgreSQL 15's column list (`SET NULL (agent_id)`): only the id is
  cleared, never the row's tenant.

The global tables (tenants, embedding_profile, workers, worker_runs, alembic_version) keep their keys:
they are the reference / coordinator tables of the plan (docs/scaling.md). No row changes; ids stay.
One transaction; each key swap rebuilds one btree and each foreign key is validated once.

Revision ID: 0012_tenant_keys
Revises: 0011_groups
Create Date: 2026-12-01
"""

from alembic import op

revision = "0012_tenant_keys"
down_revision = "0011_groups"
branch_labels = None
depends_on = None

# (table, primary key columns before); the key after is the same columns plus tenant_id.
PRIMARY_KEYS = (
    ("agents", "id"),
    ("agent_groups", "id"),
    ("group_members", "group_id, agent_id"),
    ("memories", "id"),
    ("memory_entities", "memory_id, kind, name"),
    ("memory_contributions", "id"),
    ("hit_events", "id"),
    ("activity_events", "id"),
    ("import_jobs", "id"),
    ("sessions", "id"),
    ("session_messages", "session_id, seq"),
    ("task_segments", "id"),
    ("memory_sources", "memory_id, segment_id"),
    ("raw_user_uploads", "id"),
    ("import_items", "id"),
    ("reflection_marks", "id"),
    ("memory_ripples", "id"),
    ("knowledge_clusters", "id"),
    ("cluster_members", "memory_id"),
    ("skills", "id"),
    ("evolution_records", "id"),
    ("skill_files", "id"),
)

# (table, constraint before, columns before, constraint after); the columns after add tenant_id.
UNIQUES = (
    ("agents", "agents_key_hash_key", "key_hash", "uq_agents_key_hash"),
    ("reflection_marks", "uq_reflection_marks_agent_memory", "agent_id, memory_id", None),
    ("skill_files", "uq_skill_files_path", "skill_id, path", None),
)

# (table, column, referenced table, ON DELETE); every one keeps its name <table>_<column>_fkey.
FOREIGN_KEYS = (
    ("memories", "agent_id", "agents", "SET NULL"),
    ("memories", "merged_into_id", "memories", "SET NULL"),
    ("memory_entities", "memory_id", "memories", "CASCADE"),
    ("memory_contributions", "memory_id", "memories", "CASCADE"),
    ("memory_contributions", "agent_id", "agents", "SET NULL"),
    ("hit_events", "memory_id", "memories", "CASCADE"),
    ("hit_events", "agent_id", "agents", "SET NULL"),
    ("activity_events", "agent_id", "agents", "SET NULL"),
    ("import_jobs", "agent_id", "agents", "SET NULL"),
    ("sessions", "agent_id", "agents", "SET NULL"),
    ("sessions", "import_id", "import_jobs", "SET NULL"),
    ("session_messages", "session_id", "sessions", "CASCADE"),
    ("task_segments", "session_id", "sessions", "CASCADE"),
    ("memory_sources", "memory_id", "memories", "CASCADE"),
    ("memory_sources", "segment_id", "task_segments", "CASCADE"),
    ("memory_sources", "session_id", "sessions", "CASCADE"),
    ("raw_user_uploads", "agent_id", "agents", "SET NULL"),
    ("raw_user_uploads", "session_id", "sessions", "SET NULL"),
    ("import_items", "job_id", "import_jobs", "CASCADE"),
    ("import_items", "session_id", "sessions", "SET NULL"),
    ("reflection_marks", "agent_id", "agents", "CASCADE"),
    ("reflection_marks", "memory_id", "memories", "CASCADE"),
    ("reflection_marks", "reflection_id", "memories", "SET NULL"),
    ("memory_ripples", "memory_id", "memories", "CASCADE"),
    ("memory_ripples", "source_id", "memories", "CASCADE"),
    ("cluster_members", "memory_id", "memories", "CASCADE"),
    ("cluster_members", "cluster_id", "knowledge_clusters", "CASCADE"),
    ("skills", "source_cluster_id", "knowledge_clusters", "SET NULL"),
    ("evolution_records", "cluster_id", "knowledge_clusters", "SET NULL"),
    ("skill_files", "skill_id", "skills", "CASCADE"),
    ("group_members", "group_id", "agent_groups", "CASCADE"),
    ("group_members", "agent_id", "agents", "CASCADE"),
)


def _on_delete(action: str, column: str) -> str:
    # A composite key's SET NULL would clear tenant_id too (NOT NULL): clear only the reference.
    return f"SET NULL ({column})" if action == "SET NULL" else action


def _swap(with_tenant: bool) -> None:
    """Drop the foreign keys, rebuild the keys and uniques with (or without) tenant_id, re-add the keys."""
    for table, column, _, _ in FOREIGN_KEYS:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {table}_{column}_fkey")
    for table, cols in PRIMARY_KEYS:
        key = f"{cols}, tenant_id" if with_tenant else cols
        op.execute(
            f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey, "
            f"ADD CONSTRAINT {table}_pkey PRIMARY KEY ({key})"
        )
    for table, before, cols, after in UNIQUES:
        old, new = (before, after or before) if with_tenant else (after or before, before)
        key = f"{cols}, tenant_id" if with_tenant else cols
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {old}, ADD CONSTRAINT {new} UNIQUE ({key})")
    for table, column, parent, action in FOREIGN_KEYS:
        if with_tenant:
            on_delete = _on_delete(action, column)
            spec = f"({column}, tenant_id) REFERENCES {parent} (id, tenant_id) ON DELETE {on_delete}"
        else:
            spec = f"({column}) REFERENCES {parent} (id) ON DELETE {action}"
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {table}_{column}_fkey FOREIGN KEY {spec}")


def upgrade() -> None:
    op.execute("ALTER TABLE group_members ADD COLUMN tenant_id uuid")
    op.execute(
        "UPDATE group_members m SET tenant_id = g.tenant_id FROM agent_groups g WHERE g.id = m.group_id"
    )
    op.execute(
        "ALTER TABLE group_members ALTER COLUMN tenant_id SET NOT NULL, "
        "ADD CONSTRAINT group_members_tenant_id_fkey FOREIGN KEY (tenant_id) "
        "REFERENCES tenants (id) ON DELETE CASCADE"
    )
    _swap(with_tenant=True)


def downgrade() -> None:
    _swap(with_tenant=False)
    op.execute("ALTER TABLE group_members DROP COLUMN tenant_id")
