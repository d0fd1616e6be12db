"""Groups are rows of their own: `agent_groups` (per tenant) and `group_members`.

Until now an agent's groups were a text array on `agents` that nothing but SQL could set. The array's
values become groups and memberships; every group a memory names becomes a group too (with no members
until an admin adds them), so no group memory is left pointing at nothing. Downgrade writes the
memberships back into the array.

`memory_entities` links memories to the people, places and projects they name. Memories gain
`importance` (1-10, default 5) and `resolved_at` (a resolved memory sinks in ranking and leaves the
brief's HOT and personal sections).

Revision ID: 0011_groups
Revises: 0010_lexical_ranking
Create Date: 2026-12-01
"""

from alembic import op

revision = "0011_groups"
down_revision = "0010_lexical_ranking"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE agent_groups (
            id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
            name text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT uq_agent_groups_tenant_name UNIQUE (tenant_id, name)
        )
        """
    )
    op.execute(
        """
        CREATE TABLE group_members (
            group_id uuid NOT NULL REFERENCES agent_groups(id) ON DELETE CASCADE,
            agent_id uuid NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
            added_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (group_id, agent_id)
        )
        """
    )
    op.execute("CREATE INDEX ix_group_members_agent ON group_members (agent_id)")
    op.execute(
        """
        INSERT INTO agent_groups (tenant_id, name)
        SELECT a.tenant_id, g FROM agents a, unnest(a.groups) AS g WHERE btrim(g) <> ''
        UNION
        SELECT m.tenant_id, m.group_name FROM memories m
        WHERE m.group_name IS NOT NULL AND btrim(m.group_name) <> ''
        ON CONFLICT DO NOTHING
        """
    )
    op.execute(
        """
        INSERT INTO group_members (group_id, agent_id)
        SELECT DISTINCT gr.id, a.id
        FROM agents a, unnest(a.groups) AS g
        JOIN agent_groups gr ON gr.name = g
        WHERE gr.tenant_id = a.tenant_id
        ON CONFLICT DO NOTHING
        """
    )
    op.execute("ALTER TABLE agents DROP COLUMN groups")
    # Importance (1-10) and resolution (Ombre Brain): existing memories get the neutral 5, unresolved.
    op.execute(
        "ALTER TABLE memories ADD COLUMN importance smallint NOT NULL DEFAULT 5, "
        "ADD COLUMN resolved_at timestamptz, "
        "ADD CONSTRAINT ck_memories_importance CHECK (importance BETWEEN 1 AND 10)"
    )

    # Entities (people, places, projects) named in memories, linked for recall and vault pages.
    op.execute(
        """
        CREATE TABLE memory_entities (
            memory_id uuid NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
            tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
            kind text NOT NULL,
            name text NOT NULL,
            PRIMARY KEY (memory_id, kind, name),
            CONSTRAINT ck_memory_entities_kind CHECK (kind IN ('person', 'place', 'project'))
        )
        """
    )
    op.execute("CREATE INDEX ix_memory_entities_tenant_name ON memory_entities (tenant_id, name)")


def downgrade() -> None:
    op.execute("DROP TABLE memory_entities")
    op.execute(
        "ALTER TABLE memories DROP CONSTRAINT ck_memories_importance, DROP COLUMN importance, "
        "DROP COLUMN resolved_at"
    )
    op.execute("ALTER TABLE agents ADD COLUMN groups text[] NOT NULL DEFAULT '{}'")
    op.execute(
        """
        UPDATE agents a SET groups = sub.names
        FROM (
            SELECT m.agent_id, array_agg(g.name ORDER BY g.name) AS names
            FROM group_members m JOIN agent_groups g ON g.id = m.group_id
            GROUP BY m.agent_id
        ) sub
        WHERE a.id = sub.agent_id
        """
    )
    op.execute("DROP TABLE group_members")
    op.execute("DROP TABLE agent_groups")
