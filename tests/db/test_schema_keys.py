"""Every key holds the tenant, read from the live schema: the rule that keeps sharding by tenant_id
(Citus) and partitioning by it a data move, not a rewrite (docs/scaling.md). A new table either follows
it or is named a reference table here, on purpose."""

from __future__ import annotations

import psycopg
import pytest

from ultron.db.engine import Database
from ultron.db.migrate import downgrade

# Replicated to every node (tenants, embedding_profile) or kept on the coordinator (the workers' own
# bookkeeping, alembic's version): they hold no row of one tenant's data.
REFERENCE_TABLES = {"tenants", "embedding_profile", "workers", "worker_runs", "alembic_version"}

TABLES = """
SELECT c.oid::regclass::text AS name,
       EXISTS (SELECT 1 FROM pg_attribute a
               WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped) AS has_tenant
FROM pg_class c
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
"""

# Every primary key and every unique index, constraint-backed or not (partial and expression ones too).
UNIQUE_INDEXES = """
SELECT t.relname, i.relname AS index, x.indisprimary,
       ARRAY(SELECT a.attname FROM unnest(x.indkey) k JOIN pg_attribute a
             ON a.attrelid = t.oid AND a.attnum = k) AS columns
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
WHERE t.relnamespace = current_schema()::regnamespace AND x.indisunique
"""

FOREIGN_KEYS = """
SELECT c.conname, c.conrelid::regclass::text AS child, c.confrelid::regclass::text AS parent,
       ARRAY(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(n, i)
             JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.i) AS columns,
       ARRAY(SELECT a.attname FROM unnest(c.confkey) WITH ORDINALITY k(n, i)
             JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.i) AS parents
FROM pg_constraint c
WHERE c.contype = 'f' AND c.connamespace = current_schema()::regnamespace
"""


def key_violations(url: str) -> list[str]:
    """What breaks the rule in the database at `url`, one line each (empty: the schema is ready)."""
    bad: list[str] = []
    with psycopg.connect(url) as conn:
        tables = dict(conn.execute(TABLES).fetchall())
        distributed = {t for t in tables if t not in REFERENCE_TABLES}
        bad += [f"{t}: no tenant_id column" for t in sorted(distributed) if not tables[t]]
        keyed = {t for t, _, primary, _ in conn.execute(UNIQUE_INDEXES).fetchall() if primary}
        bad += [f"{t}: no primary key" for t in sorted(distributed - keyed)]
        for table, index, _, columns in conn.execute(UNIQUE_INDEXES).fetchall():
            if table in distributed and "tenant_id" not in columns:
                bad.append(f"{table}: unique index {index} {columns} lacks tenant_id")
        for name, child, parent, columns, parent_columns in conn.execute(FOREIGN_KEYS).fetchall():
            if child in REFERENCE_TABLES and parent not in REFERENCE_TABLES:
                bad.append(f"{child}: reference table refers to distributed {parent} ({name})")
            if child in distributed and parent in distributed:
                pairs = dict(zip(columns, parent_columns, strict=True))
                if pairs.get("tenant_id") != "tenant_id":
                    bad.append(
                        f"{child}: foreign key {name} {columns} -> {parent} lacks tenant_id = tenant_id"
                    )
    return bad


def test_every_key_of_a_tenant_table_holds_the_tenant(db_url):
    assert key_violations(db_url) == []


def test_every_tenant_table_is_checked(db_url):
    """The check sees the tables that matter (a query that matched nothing would pass anything)."""
    with psycopg.connect(db_url) as conn:
        tables = {row[0] for row in conn.execute(TABLES)}
        fks = conn.execute(FOREIGN_KEYS).fetchall()
    assert {"memories", "agents", "group_members", "cluster_members", "memory_sources", "skills"} <= tables
    assert tables >= REFERENCE_TABLES
    between = [fk for fk in fks if fk[1] not in REFERENCE_TABLES and fk[2] not in REFERENCE_TABLES]
    assert len(between) >= 30


def test_the_check_fails_on_the_schema_before_0012(db_url):
    """At 0011 (ids alone as keys, group_members without tenant) the same check finds the gaps."""
    db = Database(db_url)
    try:
        downgrade(db.engine, "0011_groups")
    finally:
        db.dispose()
    bad = key_violations(db_url)
    assert "group_members: no tenant_id column" in bad
    assert any(line.startswith("memories: unique index memories_pkey") for line in bad)
    assert any(line.startswith("agents: unique index agents_key_hash_key") for line in bad)
    assert any("foreign key memory_contributions_memory_id_fkey" in line for line in bad)


@pytest.mark.parametrize(
    "ddl, expected",
    [
        (
            "CREATE TABLE probe (id uuid PRIMARY KEY, tenant_id uuid NOT NULL)",
            "probe: unique index probe_pkey",
        ),
        (
            "CREATE TABLE probe (id uuid, tenant_id uuid, PRIMARY KEY (id, tenant_id), k text UNIQUE)",
            "probe_k_key",
        ),
        ("CREATE TABLE probe (id uuid PRIMARY KEY)", "probe: no tenant_id column"),
        ("CREATE TABLE probe (tenant_id uuid, x int)", "probe: no primary key"),
        (
            "CREATE TABLE probe (id uuid, tenant_id uuid, memory_id uuid, PRIMARY KEY (id, tenant_id), "
            "FOREIGN KEY (memory_id) REFERENCES memories (id))",
            None,  # refused by Postgres itself: memories has no unique key on id alone any more
        ),
        (
            "CREATE UNIQUE INDEX probe_ix ON memories (content_hash) WHERE status = 'active'",
            "memories: unique index probe_ix",
        ),
    ],
)
def test_a_table_that_breaks_the_rule_is_caught(db_url, ddl, expected):
    with psycopg.connect(db_url, autocommit=True) as conn:
        if expected is None:
            with pytest.raises(psycopg.errors.InvalidForeignKey):
                conn.execute(ddl)
            return
        conn.execute(ddl)
    assert any(line.startswith(expected) or expected in line for line in key_violations(db_url))
