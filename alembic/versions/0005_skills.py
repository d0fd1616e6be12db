"""Knowledge clusters and the Skill Hub.

Revision ID: 0005_skills
Revises: 0004_companion
Create Date: 2026-11-29
"""

revision = "0005_skills"
down_revision = "0004_companion"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass  # reserved slot in the migration chain; filled by the work that owns it


def downgrade() -> None:
    pass
