"""Migration 0016 (memories keeps rows up to 4 KB whole) carries a full store made at 0015 across and back
with nothing lost, and a memory written at head keeps its embedding on its heap page, not in TOAST."""

from __future__ import annotations

import psycopg

from tests.db.test_tenant_keys_migration import _columns, _rows
from ultron.db.engine import Database
from ultron.db.migrate import downgrade, upgrade_to_head
from ultron.sdk import Ultron

BEFORE = "0015_member_tenant_fk"
OPTIONS = "SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = CAST('memories' AS regclass)"
# Postgres starts to TOAST a row past this many bytes (TOAST_TUPLE_THRESHOLD on 8 KB pages).
TOAST_THRESHOLD = 2032


def _options(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        row = conn.execute(OPTIONS).fetchone()
        assert row is not None
        return sorted(row[0])


def test_a_full_store_at_0015_upgrades_whole_and_back(filled):
    assert "toast_tuple_target=4080" in _options(filled)
    db = Database(filled)
    try:
        downgrade(db.engine, BEFORE)
        assert not any(o.startswith("toast_tuple_target") for o in _options(filled))
        assert "fillfactor=80" in _options(filled)  # migration 0003's option is left alone
        columns = _columns(filled)
        before = _rows(filled, columns)
        for table in ("memories", "memory_contributions", "agents", "tenants", "knowledge_clusters"):
            assert before[table], table
        upgrade_to_head(db.engine)
        assert _options(filled) == ["fillfactor=80", "toast_tuple_target=4080"]
        assert _rows(filled, columns) == before
        downgrade(db.engine, BEFORE)
        assert _rows(filled, columns) == before
        upgrade_to_head(db.engine)
    finally:
        db.dispose()


def test_a_memory_past_the_toast_threshold_keeps_its_embedding_on_its_page(hub, db_url):
    # Sixty distinct words: with its summaries and search vector the row is well past 2 KB.
    words = " ".join(f"w{i}x{i * 7919 % 1000}" for i in range(60))
    made = Ultron(hub=hub).upload_memory(f"slow query on the orders table {words}", resolution="add an index")
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT pg_column_size(m.*), pg_column_size(m.embedding), pg_column_toast_chunk_id(m.embedding) "
            "FROM memories m WHERE m.id = %s",
            (made.id,),
        ).fetchone()
    assert row is not None
    size, vector_size, chunk = row
    assert vector_size > 1000  # the hash embedder's 256 floats
    assert size > TOAST_THRESHOLD  # a row Postgres would toast by default...
    assert chunk is None  # ...keeps its vector inline (before 0016 it went out of line)
