"""Serendipity's pool query reads a bounded number of pages, however large the tenant's store.

It ran on every thin search (1 in 12-25 searches in `ultron bench`) and used to order every memory of the
tenant by last use: a full scan and sort, ~90 ms at 100k memories, which was most of the search's p95.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import text

from tests.companion.conftest import agent
from ultron.db.queries import q
from ultron.tenancy import local_actor

STORE = 1500  # ~500 heap pages: a scan of them all is far above what a bounded walk reads


def _fill(hub: Any, rows: int) -> None:
    """`rows` copies of one uploaded memory (new ids and hashes), then fresh planner statistics."""
    agent(hub, "alice").upload_memory("the payments service retries a failed charge three times")
    with hub.db.session() as s:
        s.execute(
            text(
                "INSERT INTO memories (id, tenant_id, agent_id, memory_type, content, context, resolution, "
                "tags, summary_l0, overview_l1, embedding, content_hash, search_tsv, tier, status, scope, "
                "group_name, redacted_entities, created_at, updated_at) "
                "SELECT gen_random_uuid(), m.tenant_id, m.agent_id, m.memory_type, m.content || ' #' || g, "
                "m.context, m.resolution, m.tags, m.summary_l0, m.overview_l1, m.embedding, "
                "md5(m.content_hash || g), m.search_tsv, m.tier, m.status, m.scope, m.group_name, "
                "m.redacted_entities, m.created_at, m.updated_at "
                "FROM memories m CROSS JOIN generate_series(1, :rows) g"
            ),
            {"rows": rows},
        )
    with hub.db.engine.connect() as conn:
        conn.execute(text("ANALYZE memories"))
        conn.commit()


def _pool(hub: Any) -> tuple[list[Any], int]:
    """The pool as the companion asks for it, and the pages its statement read (hit or read)."""
    with hub.db.session() as s:
        actor = local_actor(s)
        params = {
            **actor.visibility(),
            "exclude": [],
            "min_age_seconds": hub.settings.serendipity_min_age_days * 86400.0,
            "pool": 50,
        }
        ids = list(s.execute(q("serendipity_pool"), params).scalars())
        explain = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + q("serendipity_pool").text
        plan = s.execute(text(explain), params)
        top = plan.scalar_one()[0]["Plan"]
    return ids, int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))


def test_a_young_store_reads_almost_nothing(make_hub):
    hub = make_hub(serendipity_enabled=True)
    _fill(hub, STORE)
    ids, pages = _pool(hub)
    assert ids == []  # nothing is older than serendipity_min_age_days
    assert pages < 30, pages  # the (tenant_id, created_at) range is empty; a scan read every page


def test_an_old_store_yields_its_oldest_unused_memories_in_a_bounded_walk(make_hub):
    hub = make_hub(serendipity_enabled=True)
    _fill(hub, STORE)
    with hub.db.session() as s:
        # Every memory created 30-60 days ago (the n-th oldest first); the 20 oldest were used yesterday.
        s.execute(
            text(
                "WITH o AS (SELECT id, row_number() OVER (ORDER BY content_hash) AS n FROM memories) "
                "UPDATE memories m SET created_at = now() - make_interval(days => 60) "
                "+ make_interval(secs => o.n * 60), "
                "last_hit_at = CASE WHEN o.n <= 20 THEN now() - interval '1 day' END FROM o WHERE o.id = m.id"
            )
        )
        expected = list(
            s.execute(
                text("SELECT id FROM memories WHERE last_hit_at IS NULL ORDER BY created_at, id LIMIT 50")
            ).scalars()
        )
    with hub.db.engine.connect() as conn:
        conn.execute(text("ANALYZE memories"))
        conn.commit()
    ids, pages = _pool(hub)
    assert ids == expected  # the 50 oldest not used recently, oldest first
    assert pages < 250, pages  # ~70 rows walked in created_at order, not all 1,500 read and sorted
