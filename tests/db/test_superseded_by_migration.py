"""Migration 0017 (memories.superseded_by_id) carries a full store made at 0015 across and back with nothing
lost; the link holds only within a tenant and is cleared, not cascaded, when the newer memory goes."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from tests.db.test_tenant_keys_migration import _columns, _rows
from ultron.db.engine import Database
from ultron.db.migrate import downgrade, upgrade_to_head

BEFORE = "0015_member_tenant_fk"


def _has_column(url: str) -> bool:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM information_schema.columns "
            "WHERE table_name = 'memories' AND column_name = 'superseded_by_id'"
        ).fetchone()
        return bool(row and row[0])


def test_a_full_store_at_0015_upgrades_whole_and_back(filled):  # type: ignore[no-untyped-def]
    assert _has_column(filled)
    db = Database(filled)
    try:
        downgrade(db.engine, BEFORE)
        assert not _has_column(filled)
        at_0015 = _columns(filled)
        before = _rows(filled, at_0015)
        for table in ("memories", "memory_contributions", "tenants"):
            assert before[table], table
        upgrade_to_head(db.engine)
        assert _has_column(filled)
        assert _rows(filled, at_0015) == before
        downgrade(db.engine, BEFORE)
        assert _rows(filled, at_0015) == before
        upgrade_to_head(db.engine)
    finally:
        db.dispose()


def test_the_link_stays_in_its_tenant_and_is_cleared_with_the_newer(filled):  # type: ignore[no-untyped-def]
    with psycopg.connect(filled) as conn:
        rows = conn.execute("SELECT id, tenant_id FROM memories ORDER BY tenant_id, id").fetchall()
        by_tenant: dict[object, list[object]] = {}
        for memory_id, tenant_id in rows:
            by_tenant.setdefault(tenant_id, []).append(memory_id)
        tenant, ids = next((t, i) for t, i in by_tenant.items() if len(i) >= 2)
        others = [i for t, held in by_tenant.items() if t != tenant for i in held]
        for elsewhere in [*others[:1], uuid.uuid4()]:  # another tenant's memory, and none at all
            with pytest.raises(psycopg.errors.ForeignKeyViolation), conn.transaction():
                conn.execute("UPDATE memories SET superseded_by_id = %s WHERE id = %s", (elsewhere, ids[0]))
        conn.execute("UPDATE memories SET superseded_by_id = %s WHERE id = %s", (ids[1], ids[0]))
        conn.execute("DELETE FROM memory_contributions WHERE memory_id = %s", (ids[1],))
        conn.execute("DELETE FROM memories WHERE id = %s", (ids[1],))
        kept = conn.execute(
            "SELECT superseded_by_id, tenant_id FROM memories WHERE id = %s", (ids[0],)
        ).fetchone()
        assert kept == (None, tenant)
        conn.rollback()
