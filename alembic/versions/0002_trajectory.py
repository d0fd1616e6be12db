"""Sessions, messages, task segments, raw archive, imports (ingestion and the Trajectory Hub).

Revision ID: 0002_trajectory
Revises: 0001_core
Create Date: 2026-11-29
"""

revision = "0002_trajectory"
down_revision = "0001_core"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass  # reserved slot in the migration chain; filled by the work that owns it


def downgrade() -> None:
    pass
