"""How the search statement runs (issue 15's speed line): one generic plan, the rare-term pool bounded, and
the companion's ripples in the same statement. Behaviour, not timing (timing is `ultron bench`)."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from ultron.memory.schemas import UploadRequest
from ultron.tenancy import local_actor


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
