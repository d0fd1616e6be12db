"""cluster_queue: shared memories waiting for the worker to assign their knowledge cluster.

An upload no longer joins a cluster inside its request: it stores the memory and, for a shared one, a
queue row in the same statement; the worker's `cluster` step leases rows (the lease columns every queue
has, sql/worker.sql) and assigns them in batches, in upload order (`seq`). The key is (memory_id,
tenant_id), a reference to the memory within the tenant that goes with it when the memory is deleted.

No existing row changes on upgrade (a shared memory that has no cluster yet is found by the evolution
cycle's initial clustering, as before). Downgrade drops the table: a memory still queued then has no
cluster, and the older code's initial clustering (every active shared memory outside cluster_members)
assigns it, so no memory, contribution, key, scope or pin is lost.

Revision ID: 0019_cluster_queue
Revises: 0017_superseded_by
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import UUID

from alembic import op

revision = "0019_cluster_queue"
down_revision = "0017_superseded_by"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cluster_queue",
        sa.Column("memory_id", UUID(as_uuid=True), nullable=False),
        sa.Column("tenant_id", UUID(as_uuid=True), nullable=False),
        sa.Column("seq", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("lease_owner", sa.Text(), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column(
            "next_attempt_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("parked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("memory_id", "tenant_id"),
        sa.ForeignKeyConstraint(
            ["memory_id", "tenant_id"],
            ["memories.id", "memories.tenant_id"],
            ondelete="CASCADE",
            name="cluster_queue_memory_id_fkey",
        ),
    )
    op.create_index(
        "ix_cluster_queue_ready",
        "cluster_queue",
        ["next_attempt_at", "seq"],
        postgresql_where=sa.text("parked_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_cluster_queue_ready", table_name="cluster_queue")
    op.drop_table("cluster_queue")
