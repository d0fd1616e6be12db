"""Skills keep an uploaded SKILL.md's own front matter.

Until now an upload kept `name`, `description` and `metadata.categories` and dropped the rest: a skill
written for an agent runtime lost its `license`, `allowed-tools` or `metadata.author` on the way through the
hub. `front_matter` holds those keys ({"extra": top-level keys, "metadata": metadata keys}, without the ones
the hub writes itself) and the export writes them back.

Revision ID: 0008_skill_front_matter
Revises: 0007_cluster_means
Create Date: 2026-11-29
"""

from alembic import op

revision = "0008_skill_front_matter"
down_revision = "0007_cluster_means"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE skills ADD COLUMN front_matter jsonb NOT NULL DEFAULT '{}'")


def downgrade() -> None:
    op.execute("ALTER TABLE skills DROP COLUMN front_matter")
