"""Migration 0014 (the partial index on the clusters not yet in the HNSW index) carries a full store made at
0013 across with nothing lost, and its downgrade indexes the clusters that waited for the worker."""

from __future__ import annotations

import psycopg

from tests.db.test_tenant_keys_migration import _columns, _rows
from ultron.db.engine import Database
from ultron.db.migrate import downgrade, upgrade_to_head

BEFORE = "0013_runtime_settings"
INDEX = "ix_knowledge_clusters_unindexed"
PENDING = (
    "SELECT id, CAST(l2_normalize(mean) AS text) FROM knowledge_clusters "
    "WHERE centroid IS NULL AND mean IS NOT NULL AND member_count > 0 ORDER BY id"
)


def _index(url: str) -> str | None:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", (INDEX,)).fetchone()
    return None if row is None else str(row[0])


def test_a_full_store_at_0013_upgrades_whole_and_downgrade_indexes_the_waiting_clusters(filled):
    db = Database(filled)
    try:
        with psycopg.connect(filled) as conn:
            pending = conn.execute(PENDING).fetchall()
        assert pending  # the uploads started clusters that wait for the worker
        assert "WHERE (centroid IS NULL)" in (_index(filled) or "")

        downgrade(db.engine, BEFORE)
        assert _index(filled) is None
        with psycopg.connect(filled) as conn:
            assert conn.execute(PENDING).fetchall() == []  # at 0013 every live cluster is in the HNSW index
            centroids = conn.execute(
                "SELECT id, CAST(centroid AS text) FROM knowledge_clusters WHERE id = ANY(%s) ORDER BY id",
                ([cluster_id for cluster_id, _ in pending],),
            ).fetchall()
        assert centroids == pending  # each took its mean's direction, as the worker would have written

        at_0013 = _columns(filled)
        before = _rows(filled, at_0013)
        for table in ("memories", "knowledge_clusters", "cluster_members", "skills"):
            assert before[table], table
        upgrade_to_head(db.engine)
        assert _rows(filled, at_0013) == before
        assert "WHERE (centroid IS NULL)" in (_index(filled) or "")
        downgrade(db.engine, BEFORE)
        assert _rows(filled, at_0013) == before
        upgrade_to_head(db.engine)
        assert _index(filled) is not None
    finally:
        db.dispose()
