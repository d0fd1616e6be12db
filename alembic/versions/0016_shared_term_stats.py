"""Term statistics from shared memories only: ranking no longer depends on what the caller cannot see.

`ultron_refresh_term_stats(tenant)` counted the lexemes of every active memory of the tenant, private and
group ones included, so `explain.text_coverage` (and the ranking itself) told any agent whether a word
occurs in memories it cannot read (issue 33, found 4). Redefined over the tenant's active *shared*
memories, which every agent of the tenant sees; every tenant's statistics are rebuilt. No row of user data
changes. Downgrade restores the old definition and rebuilds them again.

Revision ID: 0016_shared_term_stats
Revises: 0015_member_tenant_fk
Create Date: 2026-12-03
"""

from alembic import op

revision = "0016_shared_term_stats"
down_revision = "0015_member_tenant_fk"
branch_labels = None
depends_on = None

REFRESH = """
CREATE OR REPLACE FUNCTION ultron_refresh_term_stats(p_tenant uuid) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    -- One rebuild per tenant at a time (two hub processes may ask at once).
    PERFORM pg_advisory_xact_lock(1431044112, hashtext(p_tenant::text));
    DELETE FROM term_stats WHERE tenant_id = p_tenant;
    INSERT INTO term_stats (tenant_id, lexeme, ndoc)
    SELECT p_tenant, s.word, s.ndoc
    FROM ts_stat(format('SELECT search_tsv FROM memories WHERE tenant_id = %L AND status = %L{scope}',
                        p_tenant, 'active')) s;
    GET DIAGNOSTICS n = ROW_COUNT;
    INSERT INTO term_totals (tenant_id, docs, avg_len, refreshed_at)
    SELECT p_tenant, count(*), coalesce(avg(length(search_tsv)), 0), now()
    FROM memories WHERE tenant_id = p_tenant AND status = 'active'{scope_plain}
    ON CONFLICT (tenant_id) DO UPDATE
        SET docs = excluded.docs, avg_len = excluded.avg_len, refreshed_at = excluded.refreshed_at
        WHERE (term_totals.docs, term_totals.avg_len) IS DISTINCT FROM (excluded.docs, excluded.avg_len);
    RETURN n;
END $$;
"""


def upgrade() -> None:
    op.execute(
        REFRESH.format(scope=" AND scope = 'shared'".replace("'", "''"), scope_plain=" AND scope = 'shared'")
    )
    op.execute("SELECT ultron_refresh_term_stats(id) FROM tenants")


def downgrade() -> None:
    op.execute(REFRESH.format(scope="", scope_plain=""))
    op.execute("SELECT ultron_refresh_term_stats(id) FROM tenants")
