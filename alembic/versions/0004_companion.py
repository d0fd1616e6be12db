"""Companion memory: reflections, reflect marks (agents use it).

Revision ID: 0004_companion
Revises: 0003_worker
Create Date: 2026-11-29
"""

revision = "0004_companion"
down_revision = "0003_worker"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass  # reserved slot in the migration chain; filled by the work that owns it


def downgrade() -> None:
    pass
