"""How the upload's probes run in a small store (issue 17): the dedup probe and the cluster probes walk the
HNSW index when the tenant is most of the table, instead of sorting every row by distance (each vector
read back out of TOAST: 7.2 ms a dedup probe at 1k memories against 1.5 ms walking; a batch's cluster probe
6 ms a vector at 1.8k clusters). Behaviour, not timing (timing is `ultron bench-batch`, `bench-clusters`)."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from sqlalchemy import text

from tests.memory.test_search_plan import _explain_generic
from ultron.bench.clusters import _fill as fill_clusters
from ultron.bench.core import Corpus, bulk_fill
from ultron.clusters.service import WALK_MARK, _batch_probe_statement, raw_statement, unit
from ultron.db.plans import SORT_OFF
from ultron.memory.schemas import UploadRequest
from ultron.memory.search import _raw_sql
from ultron.memory.service import _PROBE_WALK_MARK, _nearest_params, _nearest_sql
from ultron.tenancy import local_actor

PROBE = "The nearest active memories of one type and scope"
# A single upload sends its probe inside probe_or_create_memory (one round trip with the insert).
PROBES = (PROBE, "A single upload's dedup probe")


@pytest.fixture()
def store(make_hub):  # type: ignore[no-untyped-def]
    """1,000 memories of the only tenant, analyzed, with term statistics (the bench's loader)."""
    hub = make_hub()
    with hub.db.session() as s:
        actor = local_actor(s)
    bulk_fill(hub, actor.tenant_id, actor.agent_id, Corpus(), 1000)
    return hub


def test_the_dedup_probe_walks_the_hnsw_index_in_a_small_store(store):
    hub = store
    corpus = Corpus(seed=3)
    with hub.db.session() as s:  # one connection: psycopg prepares a statement from its 5th use on it
        actor = local_actor(s)
        assert hub.memory._walks_index(s, actor.tenant_id)  # the only tenant
        for _ in range(6):
            hub.memory.upload(s, actor, UploadRequest(**corpus.memory()))
            # the setting went back with the probe: what runs next in the transaction plans as usual
            assert s.execute(text("SHOW enable_sort")).scalar_one() == "on"
            assert s.execute(text("SHOW plan_cache_mode")).scalar_one() == "auto"
        prepared = s.execute(
            text("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
        ).all()
        probes = [(sql, g, c) for sql, g, c in prepared if any(p in sql for p in PROBES)]
        # only the walking statement ran, and on its generic plan, planned once: left to choose, Postgres
        # planned it anew on every upload (0 generic and 158 custom plans after 200 uploads; 1.4 ms of
        # planning a probe at 10k)
        assert probes and all(
            sql.startswith(_PROBE_WALK_MARK) and g >= 1 and c == 0 for sql, g, c in probes
        ), probes
        raw = s.connection().connection.driver_connection
        p = hub.memory._prepare(UploadRequest(**corpus.memory()), actor)
        sql, names = _raw_sql(_nearest_sql(True), s.get_bind().dialect)
        params = _nearest_params(actor, p)
        raw.execute(SORT_OFF)
        plan = _explain_generic(raw, sql, [params[n] for n in names])
        raw.execute("RESET enable_sort")
    ann = plan[plan.index("Subquery Scan on ann") :]
    assert "Index Scan using ix_memories_embedding_hnsw" in ann, plan
    assert "Sort Key: ((m_2.embedding" not in ann, plan


def test_a_batch_probes_on_the_walking_statement(store):
    hub = store
    corpus = Corpus(seed=4)
    with hub.db.session() as s:
        actor = local_actor(s)
        reqs = [UploadRequest(**corpus.memory()) for _ in range(8)]
        prepared = hub.memory.prepare_batch(reqs, actor)
        results = hub.memory.upload_batch(s, actor, reqs, prepared)
        assert all(r.decision == "created" for r in results)
        assert s.execute(text("SHOW enable_sort")).scalar_one() == "on"
        statements = s.execute(text("SELECT statement FROM pg_prepared_statements")).scalars().all()
    probes = [sql for sql in statements if PROBE in sql]
    assert probes and all(sql.startswith(_PROBE_WALK_MARK) for sql in probes), probes


def _other_tenant(hub) -> uuid.UUID:  # type: ignore[no-untyped-def]
    tenant_id = uuid.uuid4()
    with hub.db.session() as s:
        s.execute(
            text("INSERT INTO tenants (id, name) VALUES (:id, :name)"), {"id": tenant_id, "name": "small"}
        )
    return tenant_id


def test_the_cluster_probes_walk_the_hnsw_index_for_a_tenant_that_is_most_of_the_table(make_hub):
    hub = make_hub()
    with hub.db.session() as s:
        tenant_id = local_actor(s).tenant_id
    small = _other_tenant(hub)
    dimension = hub.embedder.dimension
    fill_clusters(hub.db, small, 20, dimension, memories=0)
    fill_clusters(hub.db, tenant_id, 1000, dimension, memories=8)  # analyzes the table after
    clusters = hub.memory.clusters
    rng = np.random.default_rng(5)
    with hub.db.session() as s:
        assert clusters.walks_index(s, tenant_id)
        assert not clusters.walks_index(s, small)  # 20 of 1,020: its own rows sorted beat a walk of all
        memory_ids = s.execute(
            text("SELECT id FROM memories WHERE tenant_id = :t ORDER BY id"), {"t": tenant_id}
        ).scalars()
        for memory_id in list(memory_ids)[:6]:  # prepared from the 5th on this connection
            clusters.assign(s, tenant_id, memory_id, rng.standard_normal(dimension))
            assert s.execute(text("SHOW enable_sort")).scalar_one() == "on"
        statements = s.execute(
            text("SELECT statement, generic_plans + custom_plans FROM pg_prepared_statements")
        ).all()
        assert any(sql.startswith(WALK_MARK) and runs >= 1 for sql, runs in statements), statements
        raw = s.connection().connection.driver_connection
        sql, names = raw_statement("assign_cluster", True)
        params = {
            "tenant_id": tenant_id,
            "memory_id": uuid.uuid4(),
            "v": unit(rng.standard_normal(dimension)).astype(np.float32),
            "floor": 0.6,
            "drift": 0.9,
            "unindexed_max": 256,
        }
        raw.execute(SORT_OFF)
        plan = _explain_generic(raw, sql, [params[n] for n in names])
        # A batch's probe: one LATERAL walk per vector
        vs = [unit(rng.standard_normal(dimension)).astype(np.float32) for _ in range(3)]
        batch = s.execute(
            text("EXPLAIN " + _batch_probe_statement(True).text), {"tenant_id": tenant_id, "vs": vs}
        ).scalars()
        batch_plan = "\n".join(batch)
        raw.execute("RESET enable_sort")
    indexed = plan[plan.index("Subquery Scan on indexed") :]  # the probe's walk, an InitPlan of `best`
    assert (
        indexed.split("\n")[2].strip().startswith("->  Index Scan using ix_knowledge_clusters_centroid_hnsw")
    )
    assert "Index Scan using ix_knowledge_clusters_centroid_hnsw" in batch_plan, batch_plan
    assert "Seq Scan on knowledge_clusters" not in batch_plan, batch_plan


def test_the_term_statistics_keeper_analyzes_the_tables_a_bulk_load_left_behind(make_hub):
    # A batch load into a fresh store leaves the planner's row estimate far behind (autovacuum analyzes at
    # most once a minute): the keeper, which rebuilds the term statistics after a load, analyzes too.
    from ultron.memory.termstats import STALE_MIN, TermStatsKeeper

    hub = make_hub()
    keeper = TermStatsKeeper(hub.db)  # not started: nothing runs behind the test's back
    corpus = Corpus(seed=6)
    count = STALE_MIN + 100
    with hub.db.session() as s:
        actor = local_actor(s)
        s.execute(text("ANALYZE memories"))  # the estimate as of an almost empty table
        reqs = [UploadRequest(**corpus.memory()) for _ in range(count)]
        hub.memory.upload_batch(s, actor, reqs, hub.memory.prepare_batch(reqs, actor))
    estimate = "SELECT reltuples FROM pg_class WHERE oid = 'memories'::regclass"
    with hub.db.session() as s:
        assert s.execute(text(estimate)).scalar_one() < count / 2
    keeper.refresh(actor.tenant_id)
    assert keeper.analyzed == 1
    with hub.db.session() as s:
        assert s.execute(text(estimate)).scalar_one() >= count * 0.9
    keeper.refresh(actor.tenant_id)  # the estimate is fresh now: no second ANALYZE
    assert keeper.analyzed == 1


def test_the_keepers_analyze_gives_way_to_one_already_running(make_hub):
    # Autovacuum's VACUUM or ANALYZE holds the lock ANALYZE needs: the keeper's thread does not wait behind
    # it (its term statistics would wait too), and asks again at its next rebuild.
    from ultron.memory.termstats import TermStatsKeeper

    hub = make_hub()
    keeper = TermStatsKeeper(hub.db)
    with hub.db.engine.connect() as other:
        other.execute(text("LOCK TABLE knowledge_clusters IN SHARE UPDATE EXCLUSIVE MODE"))  # as VACUUM does
        keeper.analyze()
        assert keeper.analyzed == 0
        other.rollback()
    keeper.analyze()
    assert keeper.analyzed == 1


def test_a_tenant_walks_as_soon_as_the_keeper_rebuilt_its_statistics(make_hub):
    # Stop 28: a fresh tenant's first upload finds no term statistics, so its probes sort (no walk), and
    # that answer was kept for 10 s: a store loading batch after batch in those seconds probed every item
    # by sorting all its rows (a 500-item batch into 1.5k memories: 4.2 ms an item on its probes, against
    # 0.4 walking). The hub's keeper rebuilds the statistics a few hundred ms after a batch; the answer is
    # read again from then on, and the clusters' (read from the planner's statistics) after an ANALYZE.
    hub = make_hub()
    hub.term_stats.stop()  # its thread: the test runs the rebuild it would run, when it would
    corpus = Corpus(seed=7)
    with hub.db.session() as s:
        actor = local_actor(s)
        reqs = [UploadRequest(**corpus.memory()) for _ in range(300)]
        hub.memory.upload_batch(s, actor, reqs, hub.memory.prepare_batch(reqs, actor))
        assert not hub.memory._walks_index(s, actor.tenant_id)  # no statistics yet: the answer kept
        assert not hub.clusters.walks_index(s, actor.tenant_id)
    hub.term_stats.refresh(actor.tenant_id)  # what the keeper's thread does after the batch
    assert hub.term_stats.analyzed == 1  # 300 memories against an estimate of none: analyzed too
    with hub.db.session() as s:
        assert hub.memory._walks_index(s, actor.tenant_id)
    assert actor.tenant_id not in hub.clusters._walk_cache._known  # to be read again on its next probe
