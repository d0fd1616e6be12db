"""Skill files: the extra files of an uploaded skill directory (scripts, references), per version.

Revision ID: 0006_skill_files
Revises: 0005_skills
Create Date: 2026-12-01
"""

from alembic import op

revision = "0006_skill_files"
down_revision = "0005_skills"
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE skill_files (
    id bigserial PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    skill_id uuid NOT NULL REFERENCES skills(id) ON DELETE CASCADE,
    path text NOT NULL,
    content text NOT NULL,
    sha256 text NOT NULL,
    CONSTRAINT uq_skill_files_path UNIQUE (skill_id, path)
);
"""

DOWNGRADE = """
DROP TABLE skill_files;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
