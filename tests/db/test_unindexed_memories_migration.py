"""Migration 0020 (memories.indexed: a new upload's graph entry is the worker's) carries a full store made at
0019 across and back with nothing lost: every existing memory is indexed, and the HNSW index is rebuilt
with the predicate each side expects."""

from __future__ import annotations

import psycopg

from tests.db.test_tenant_keys_migration import _columns, _rows
from ultron.db.engine import Database
from ultron.db.migrate import downgrade, upgrade_to_head

BEFORE = "0019_cluster_queue"


def _hnsw_predicate(url: str) -> str:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_memories_embedding_hnsw'"
        ).fetchone()
        assert row is not None
        return str(row[0]).split(" WHERE ", 1)[1]


def _has_column(url: str) -> bool:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM information_schema.columns "
            "WHERE table_name = 'memories' AND column_name = 'indexed'"
        ).fetchone()
        return bool(row and row[0])


def test_a_full_store_at_0019_upgrades_whole_and_back(filled):  # type: ignore[no-untyped-def]
    db = Database(filled)
    try:
        downgrade(db.engine, BEFORE)
        assert not _has_column(filled)
        assert "indexed" not in _hnsw_predicate(filled)
        at_0019 = _columns(filled)
        before = _rows(filled, at_0019)
        for table in ("memories", "memory_contributions", "tenants", "agents"):
            assert before[table], table
        upgrade_to_head(db.engine)
        assert _has_column(filled)
        assert "indexed" in _hnsw_predicate(filled)
        assert _rows(filled, at_0019) == before
        with psycopg.connect(filled) as conn:
            assert conn.execute("SELECT count(*) FROM memories WHERE NOT indexed").fetchone() == (0,)
            # a memory still waiting for the worker when the store is downgraded comes back whole too
            conn.execute(
                "UPDATE memories SET indexed = false WHERE id = (SELECT min(id::text)::uuid FROM memories)"
            )
        downgrade(db.engine, BEFORE)
        assert _rows(filled, at_0019) == before
        assert "indexed" not in _hnsw_predicate(filled)
        upgrade_to_head(db.engine)
    finally:
        db.dispose()
