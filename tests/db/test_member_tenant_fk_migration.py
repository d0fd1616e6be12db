"""Migration 0015 (cluster_members without its own key on tenants) carries a full store made at 0014 across
and back with nothing lost; without that key a member row still cannot name a tenant its memory and cluster
are not in, and deleting a tenant still deletes its members."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from tests.db.test_tenant_keys_migration import _columns, _rows
from ultron.db.engine import Database
from ultron.db.migrate import downgrade, upgrade_to_head

BEFORE = "0014_unindexed_clusters"
KEYS = (
    "SELECT conname FROM pg_constraint "
    "WHERE conrelid = CAST('cluster_members' AS regclass) AND contype = 'f' ORDER BY conname"
)
COMPOSITE = ["cluster_members_cluster_id_fkey", "cluster_members_memory_id_fkey"]


def _keys(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [row[0] for row in conn.execute(KEYS).fetchall()]


def test_a_full_store_at_0014_upgrades_whole_and_back(filled):
    assert _keys(filled) == COMPOSITE
    db = Database(filled)
    try:
        downgrade(db.engine, BEFORE)
        assert _keys(filled) == sorted([*COMPOSITE, "cluster_members_tenant_id_fkey"])
        at_0014 = _columns(filled)
        before = _rows(filled, at_0014)
        for table in ("memories", "knowledge_clusters", "cluster_members", "tenants"):
            assert before[table], table
        upgrade_to_head(db.engine)
        assert _keys(filled) == COMPOSITE
        assert _rows(filled, at_0014) == before
        downgrade(db.engine, BEFORE)
        assert _rows(filled, at_0014) == before
        assert "cluster_members_tenant_id_fkey" in _keys(filled)
        upgrade_to_head(db.engine)
    finally:
        db.dispose()


def test_the_composite_keys_still_hold_the_tenant(filled):
    with psycopg.connect(filled) as conn:
        member = conn.execute(
            "SELECT memory_id, cluster_id, tenant_id FROM cluster_members ORDER BY memory_id LIMIT 1"
        ).fetchone()
        assert member is not None
        memory_id, cluster_id, tenant_id = member
        other = conn.execute("SELECT id FROM tenants WHERE id <> %s LIMIT 1", (tenant_id,)).fetchone()
        assert other is not None  # the filled store has a second tenant
        conn.execute(
            "DELETE FROM cluster_members WHERE memory_id = %s AND tenant_id = %s", (memory_id, tenant_id)
        )
        for tenant in (other[0], uuid.uuid4()):  # another tenant's, and no tenant at all
            with pytest.raises(psycopg.errors.ForeignKeyViolation), conn.transaction():
                conn.execute(
                    "INSERT INTO cluster_members (memory_id, cluster_id, tenant_id) VALUES (%s, %s, %s)",
                    (memory_id, cluster_id, tenant),
                )
        conn.rollback()

        members = conn.execute("SELECT count(*) FROM cluster_members WHERE tenant_id = %s", (tenant_id,))
        assert members.fetchone()[0] > 0  # type: ignore[index]
        conn.execute("DELETE FROM tenants WHERE id = %s", (tenant_id,))
        left = conn.execute("SELECT count(*) FROM cluster_members WHERE tenant_id = %s", (tenant_id,))
        assert left.fetchone()[0] == 0  # type: ignore[index]
        conn.rollback()
