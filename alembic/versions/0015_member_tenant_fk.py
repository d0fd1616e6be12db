"""cluster_members loses its foreign key on tenant_id alone: the two composite keys already carry the tenant.

`cluster_members_memory_id_fkey` ((memory_id, tenant_id) -> memories) and `cluster_members_cluster_id_fkey`
((cluster_id, tenant_id) -> knowledge_clusters) both hold `tenant_id`, and each parent's own tenant_id refers
to `tenants` (ON DELETE CASCADE): a member row can name no tenant that does not exist, and deleting a tenant
still deletes its members (through its memories and its clusters). The third key, `tenant_id -> tenants`,
checked nothing the other two do not, at the price of one more trigger and a row lock on the tenant's row in
every cluster assignment (the upload path: ~0.02 ms of EXPLAIN ANALYZE's trigger time, docs/skills.md, stop
18). No row changes. Downgrade adds the key back (every row satisfies it, by the two composite keys).

Revision ID: 0015_member_tenant_fk
Revises: 0014_unindexed_clusters
Create Date: 2026-12-02
"""

from alembic import op

revision = "0015_member_tenant_fk"
down_revision = "0014_unindexed_clusters"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_constraint("cluster_members_tenant_id_fkey", "cluster_members", type_="foreignkey")


def downgrade() -> None:
    op.create_foreign_key(
        "cluster_members_tenant_id_fkey",
        "cluster_members",
        "tenants",
        ["tenant_id"],
        ["id"],
        ondelete="CASCADE",
    )
