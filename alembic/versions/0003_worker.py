"""Worker runs, leases, heartbeats (the background worker).

Revision ID: 0003_worker
Revises: 0002_trajectory
Create Date: 2026-11-29
"""

revision = "0003_worker"
down_revision = "0002_trajectory"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass  # reserved slot in the migration chain; filled by the work that owns it


def downgrade() -> None:
    pass
