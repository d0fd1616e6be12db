"""How the search statement runs (issue 15's speed line): one generic plan, the rare-term pool bounded, and
the companion's ripples in the same statement. Behaviour, not timing (timing is `ultron bench`)."""

from __future__ import annotations

import numpy as np
import pytest
from psycopg import ClientCursor, RawCursor
from psycopg.adapt import PyFormat, Transformer
from psycopg.rows import namedtuple_row
from sqlalchemy import text

from ultron.memory.filters import NO_FILTERS_PARAMS
from ultron.memory.schemas import UploadRequest
from ultron.memory.search import _SEARCH_SETTINGS, _WALK_SETTING, _raw_sql, _search_sql
from ultron.sdk import Ultron
from ultron.tenancy import create_agent, local_actor


@pytest.fixture()
def hub(make_hub):  # type: ignore[no-untyped-def]
    return make_hub(
        dedup_similarity_threshold=0.999, dedup_soft_threshold=0.999, fulltext_pool=20, search_candidates=5
    )


def add(hub, content):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return hub.memory.upload(s, local_actor(s), UploadRequest(content=content)).record


def test_the_rare_term_pool_leaves_out_a_term_whose_matches_would_overflow_it(hub):
    # 30 memories hold "deploy"; one holds "zyxwv", one "qwertz"; nobody holds all three query terms.
    common = {add(hub, f"deploy step {i} of the billing rollout on node{i}").id for i in range(30)}
    rare_a = add(hub, "zyxwv checksum mismatch while unpacking the wheel")
    rare_b = add(hub, "qwertz keyboard layout swapped y and z on the build host")
    with hub.db.session() as s:
        hub.memory.refresh_term_stats(s, local_actor(s).tenant_id)
        results = hub.memory.search(s, local_actor(s), "zyxwv qwertz deploy", explain=True, limit=40)
    by_id = {r.record.id: r for r in results}
    # The two rare terms fit the pool (1 + 1 <= 20) and "deploy" (30 more) would not: the pool holds the
    # rare terms' holders, found by the index, rather than an arbitrary 20 of the common term's.
    for memory in (rare_a, rare_b):
        assert memory.id in by_id
        assert by_id[memory.id].explain.from_text
    assert not any(r.explain.from_text for r in results if r.record.id in common)


def test_search_runs_on_a_generic_plan_and_leaves_the_setting_as_it_was(hub):
    target = add(hub, "pg_dump failed with too many open files; raised ulimit -n to 4096")
    add(hub, "nginx 502 after deploy: upstream keepalive timeout too short")
    with hub.db.session() as s:  # one connection: prepared statements are per connection
        for _ in range(6):  # psycopg prepares a statement from its 5th use on a connection
            found = hub.memory.search(s, local_actor(s), "pg_dump too many open files")
            assert found[0].record.id == target.id
            # RESET came with the search: what runs next in the transaction plans as usual
            assert s.execute(text("SHOW plan_cache_mode")).scalar_one() == "auto"
            # and the dense leg's own HNSW candidate list was the search's: the dedup and cluster probes
            # that come next in the transaction walk with the connection's hnsw_ef_search
            assert int(s.execute(text("SHOW hnsw.ef_search")).scalar_one()) == hub.settings.hnsw_ef_search
        plans = s.execute(
            text(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE statement LIKE '%Hybrid search in one read-only statement%'"
            )
        ).all()
    assert plans, "the search statement was not prepared"
    assert all(custom == 0 and generic >= 1 for generic, custom in plans)


def test_a_tier_filter_uses_its_own_statement(hub):
    a = add(hub, "gradle daemon out of memory; set org.gradle.jvmargs=-Xmx4g")
    b = add(hub, "gradle build cache miss after upgrading the wrapper")
    with hub.db.session() as s:
        s.execute(text("UPDATE memories SET tier = 'hot' WHERE id = :id"), {"id": a.id})
    with hub.db.session() as s:
        hot = hub.memory.search(s, local_actor(s), "gradle", tier="hot")
        every = hub.memory.search(s, local_actor(s), "gradle")
    assert [r.record.id for r in hot] == [a.id]
    assert {r.record.id for r in every} == {a.id, b.id}


def _pool_statement(hub, upto: str, tail: str) -> str:  # type: ignore[no-untyped-def]
    """The search statement as run, cut before the CTE `upto`, ending with `tail` instead."""
    sql = _search_sql(False, hub.settings.search_candidates, hub.settings.fulltext_pool).text
    return sql[: sql.index(f"), {upto} AS ")] + ")\n" + tail


def _walk(node):  # type: ignore[no-untyped-def]
    yield node
    for child in node.get("Plans", []):
        yield from _walk(child)


def _pools(hub, query: str):  # type: ignore[no-untyped-def]
    """(the statement's full-text pool, the union of the three pools each read alone, how many of the
    all-terms and phrase scans ran: the rare-terms one always runs)."""
    pool = hub.settings.fulltext_pool
    statement = _pool_statement(hub, "cand", "SELECT id FROM pool")
    with hub.db.session() as s:
        actor = local_actor(s)
        vector = np.asarray(hub.embedder.embed([query], kind="query")[0], dtype=np.float32)
        params = hub.memory._search_params(actor, query, vector, None, 10)
        got = set(s.execute(text(statement), params).scalars())
        plan = s.execute(text("EXPLAIN (ANALYZE, FORMAT JSON) " + statement), params).scalar_one()[0]["Plan"]
        conditions = ("Filter", "Recheck Cond", "Index Cond")
        ran = sum(  # a scan of memories by a constant tsquery (the rare one's comes from its CTE, r.q)
            1
            for n in _walk(plan)
            if n.get("Relation Name") == "memories"
            and n["Actual Loops"]
            and any("search_tsv @@" in n.get(c, "") and ".q)" not in n.get(c, "") for c in conditions)
        )
        rare_q = s.execute(text(_pool_statement(hub, "rare_hits", "SELECT q FROM rare")), params).scalar_one()
        want: set = set()
        for tsquery in (params["phrase_q"], params["all_q"], rare_q):
            if tsquery:
                want |= set(
                    s.execute(
                        text(
                            "SELECT id FROM memories WHERE tenant_id = :t AND status = 'active' "
                            "AND search_tsv @@ to_tsquery('simple', :q) LIMIT :n"
                        ),
                        {"t": actor.tenant_id, "q": tsquery, "n": pool},
                    ).scalars()
                )
    return got, want, ran


def test_the_full_text_pool_reads_a_pool_only_when_the_one_before_may_have_been_cut(hub):
    # fulltext_pool 20. deploy 31 memories, billing 31, rollout 30, canary 25; zyxwv 1.
    for i in range(25):
        add(hub, f"deploy billing rollout step {i} on node{i}")
    for i in range(5):
        add(hub, f"deploy canary billing then rollout of shard{i}")
    for i in range(20):
        add(hub, f"canary flag {i} flipped on host{i}")
    rare = add(hub, "zyxwv deploy billing checksum mismatch")
    for i in range(12):  # 63 memories: no term is in half of them (a query of such terms reads no pool)
        add(hub, f"lunch order {i} for the offsite in room{i}")
    with hub.db.session() as s:
        hub.memory.refresh_term_stats(s, local_actor(s).tenant_id)
    # The rare term's pool is whole (1 match): the all-terms and phrase pools hold nothing more; not read.
    got, want, ran = _pools(hub, "zyxwv deploy billing")
    assert got == want == {rare.id} and ran == 0
    # The rarest term's pool is cut (canary: 25 > 20), the all-terms one whole (5): no phrase scan.
    got, want, ran = _pools(hub, "canary billing")
    assert got == want and len(got) >= 20 and ran == 1
    # Both cut (rollout 30, all three terms 30): the phrase pool is read too.
    got, want, ran = _pools(hub, "deploy billing rollout")
    assert got == want and ran == 2
    # A phrase cut at 16 words does not hold every term: its pool is read whatever the others held.
    got, want, ran = _pools(hub, "zyxwv " + " ".join(f"word{i}" for i in range(20)))
    assert got == want == {rare.id} and ran == 1


def test_a_query_made_only_of_common_words_reads_only_its_phrase_pool(hub):
    # 40 memories: deploy and billing are each in 30 (at least half: no IDF weight in classic BM25), five
    # of them hold "billing deploy" in that order. fulltext_pool 20.
    for i in range(25):
        add(hub, f"deploy billing step {i} on node{i}")
    phrase = {add(hub, f"billing deploy hotfix {i} for shard{i}").id for i in range(5)}
    for i in range(10):
        add(hub, f"canary flag {i} flipped on host{i}")
    with hub.db.session() as s:
        hub.memory.refresh_term_stats(s, local_actor(s).tenant_id)
    got, _, ran = _pools(hub, "billing deploy")
    # Neither the rarest term's pool (20 of billing's 30 holders, an arbitrary cut of most of the store)
    # nor the all-terms one is read; the phrase pool is.
    assert got == phrase and ran == 1
    with hub.db.session() as s:
        actor = local_actor(s)
        found = hub.memory.search(s, actor, "billing deploy", limit=5, explain=True)
    assert {r.record.id for r in found} == phrase
    # One term that ranks (canary, in 10) and the pools are as before: the rarest term's, whole.
    got, want, ran = _pools(hub, "billing deploy canary")
    assert got == want and len(got) == 10 and ran == 0


def _explain_generic(raw, sql: str, values: list) -> str:  # type: ignore[no-untyped-def]
    """EXPLAIN of `sql`'s generic plan, its parameters typed as psycopg sends them."""
    tx = Transformer(raw)
    tx.dump_sequence(values, [PyFormat.AUTO] * len(values))
    types = [
        raw.execute("SELECT format_type(%s::oid, NULL)", (oid,)).fetchone()[0] if oid else "text"
        for oid in tx.types
    ]
    raw.execute(f"PREPARE plan_probe({', '.join(types)}) AS {sql}")
    cursor = ClientCursor(raw)
    cursor.execute(
        f"EXPLAIN EXECUTE plan_probe({', '.join(['%s::' + t for t in types])})",
        [v.tolist() if isinstance(v, np.ndarray) else v for v in values],
    )
    plan = "\n".join(r[0] for r in cursor.fetchall())
    raw.execute("DEALLOCATE plan_probe")
    return plan


def test_the_dense_leg_walks_the_hnsw_index_in_a_small_store(make_hub):
    # At ~1k memories the planner costs a sort of the whole tenant below the HNSW walk: it does not count
    # reading each row's vector back out of TOAST (6,200 buffers, 4.4 ms against 0.5 ms for the walk). A
    # tenant that is most of the table plans its search with sorts off, so the ORDER BY goes to the index.
    from ultron.bench.core import Corpus, bulk_fill  # the bench's loader: 1,000 memories by COPY in ~1 s

    hub = make_hub()
    with hub.db.session() as s:
        actor = local_actor(s)
    bulk_fill(hub, actor.tenant_id, actor.agent_id, Corpus(), 1000)  # with ANALYZE and the term statistics
    st = hub.settings
    query = "timeout retry docker"
    vector = np.asarray(hub.embedder.embed([query], kind="query")[0], dtype=np.float32)
    with hub.db.session() as s:
        assert hub.memory._walks_index(s, actor.tenant_id)  # the only tenant
        raw = s.connection().connection.driver_connection
        walk, _ = _raw_sql(
            _search_sql(False, st.search_candidates, st.fulltext_pool, True), s.get_bind().dialect
        )
        sql, names = _raw_sql(
            _search_sql(False, st.search_candidates, st.fulltext_pool), s.get_bind().dialect
        )
        params = hub.memory._search_params(actor, query, vector, None, 10, st)
        values = [params[name] for name in names]
        raw.execute(_SEARCH_SETTINGS.format(ef=st.search_ef_search) + _WALK_SETTING)
        plan = _explain_generic(raw, walk, values)
        dense = plan[plan.index("CTE vec") : plan.index("CTE totals")]
        assert "Index Scan using ix_memories_embedding_hnsw" in dense, dense
        # Two branches (migration 0020): the walk, with no sort below it, and the exact pass over the
        # memories not in the graph yet, through their partial index; the sorts left are of those few rows
        # and of the two branches' bounded union.
        walk_branch, fresh_branch = dense.split("Subquery Scan on")[1:]
        assert "ix_memories_embedding_hnsw" in walk_branch and "Sort" not in walk_branch, dense
        assert "Index Scan using ix_memories_unindexed" in fresh_branch, dense
        assert "Seq Scan" not in dense, dense
        # What the planner picks left alone: the sort of the whole tenant that the setting is there to avoid.
        raw.execute("RESET enable_sort")
        plain = _explain_generic(raw, sql, values)
        assert "Sort Key: ((m_1.embedding <=>" in plain[plain.index("CTE vec") : plain.index("CTE totals")]
    with hub.db.session() as s:  # the search itself runs the walking statement, and puts the setting back
        for _ in range(6):  # psycopg prepares a statement from its 5th use on a connection
            assert hub.memory.search(s, actor, query)
            assert s.execute(text("SHOW enable_sort")).scalar_one() == "on"
        prepared = s.execute(text("SELECT statement FROM pg_prepared_statements")).scalars().all()
    assert any(p.startswith("-- planned with sorts off") for p in prepared)


def test_a_small_tenant_among_large_ones_keeps_the_planners_choice(make_hub):
    from ultron.bench.core import Corpus, bulk_fill  # the bench's loader (COPY)

    hub = make_hub()
    with hub.db.session() as s:
        big = local_actor(s)
        create_agent(s, "eve", "other")
    bulk_fill(hub, big.tenant_id, big.agent_id, Corpus(), 300)
    small = Ultron(hub=hub, agent="eve")
    small.upload_memory("gradle daemon out of memory; set org.gradle.jvmargs=-Xmx4g")
    with hub.db.session() as s:
        other = s.execute(text("SELECT id FROM tenants WHERE id <> :t"), {"t": big.tenant_id}).scalar_one()
        hub.memory.refresh_term_stats(s, other)
        s.execute(text("ANALYZE memories"))
    with hub.db.session() as s:
        assert hub.memory._walks_index(s, big.tenant_id)
        assert not hub.memory._walks_index(s, other)  # 1 of 301 memories: its own rows, sorted
    assert small.search_memories("gradle out of memory")


def test_the_search_reads_its_rows_in_binary_as_the_same_values_as_text(hub):
    # _fetch_on_generic_plan asks for binary results (no float formatting and parsing on either side):
    # every column, the reply's jsonb, the entity names and the counts included, must load as the text
    # protocol loads it, or the results built from them would differ.
    for position, turn in enumerate(
        ["Maya: how long were you without hot water in Lisbon?", "Tom: almost two weeks, 12 days"]
    ):
        with hub.db.session() as s:
            hub.memory.upload(
                s, local_actor(s), UploadRequest(content=turn, thread="chat-1", position=position)
            )
    add(hub, "pg_dump failed with too many open files; raised ulimit -n to 4096")
    add(hub, "pg_dump failed with too many open files; raised ulimit -n to 4096 again")
    query = "how long were you without hot water"
    with hub.db.session() as s:
        actor = local_actor(s)
        hub.memory.refresh_term_stats(s, actor.tenant_id)
        st = hub.settings
        vector = np.asarray(hub.embedder.embed([query], kind="query")[0], dtype=np.float32)
        params = hub.memory._search_params(actor, query, vector, None, 10, st)
        params.update(NO_FILTERS_PARAMS)
        sql, names = _raw_sql(
            _search_sql(False, st.search_candidates, st.fulltext_pool), s.get_bind().dialect
        )
        raw = s.connection().connection.driver_connection
        rows = {}
        for binary in (False, True):
            cursor = RawCursor(raw, row_factory=namedtuple_row)
            cursor.execute(sql, [params[name] for name in names], binary=binary)
            rows[binary] = cursor.fetchall()
    assert any(r.reply is not None for r in rows[True])  # the question turn came with its reply
    assert rows[True] == rows[False]
    assert [[type(v) for v in r] for r in rows[True]] == [[type(v) for v in r] for r in rows[False]]
