"""memories.superseded_by_id: the newer memory that updates this one (same subject, changed value).

A memory that states a newer value of what an older one said ("moved to db-stage-2" after "the staging
database is db-stage-1") is linked on upload: the older row gets `superseded_by_id`, a reference to the
newer one within the tenant ((superseded_by_id, tenant_id) -> memories (id, tenant_id), ON DELETE SET NULL
of the reference only, as merged_into_id). Search ranks the current memory first and flags the older one;
nothing is archived or deleted. No row changes on upgrade (the column starts empty); downgrade drops the
column and its key, and every memory, contribution, key, scope and pin stays as it is.

Revision ID: 0017_superseded_by
Revises: 0016_shared_term_stats
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import UUID

from alembic import op

revision = "0017_superseded_by"
down_revision = "0016_shared_term_stats"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("memories", sa.Column("superseded_by_id", UUID(as_uuid=True), nullable=True))
    op.execute(
        "ALTER TABLE memories ADD CONSTRAINT memories_superseded_by_id_fkey FOREIGN KEY "
        "(superseded_by_id, tenant_id) REFERENCES memories (id, tenant_id) "
        "ON DELETE SET NULL (superseded_by_id)"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE memories DROP CONSTRAINT memories_superseded_by_id_fkey")
    op.drop_column("memories", "superseded_by_id")
