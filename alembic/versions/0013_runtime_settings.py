"""Settings an admin changes at run time, per tenant: `runtime_settings`.

One row per (tenant, setting) that differs from the process's configuration; the value is JSON (a number,
a boolean or null). Nothing existing changes; downgrade drops the table (the hub falls back to its
configuration).

Revision ID: 0013_runtime_settings
Revises: 0012_tenant_keys
Create Date: 2026-12-01
"""

from alembic import op

revision = "0013_runtime_settings"
down_revision = "0012_tenant_keys"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE runtime_settings (
            tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
            name text NOT NULL,
            value jsonb,
            updated_at timestamptz NOT NULL DEFAULT now(),
            updated_by uuid,
            PRIMARY KEY (tenant_id, name),
            CONSTRAINT runtime_settings_updated_by_fkey FOREIGN KEY (updated_by, tenant_id)
                REFERENCES agents (id, tenant_id) ON DELETE SET NULL (updated_by)
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE runtime_settings")
