"""Search: hybrid candidates, score = relevance x tier boost x (1 - w + w x hotness), projections, hits.

The lexical ranker itself (IDF, stems, phrases, time, threads, confidence) is tested in test_lexical.py."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from ultron.errors import NotFound, ValidationFailed
from ultron.memory.records import project
from ultron.memory.schemas import UploadRequest
from ultron.sdk._local import LocalBackend
from ultron.tenancy import local_actor


@pytest.fixture()
def hub(make_hub):  # type: ignore[no-untyped-def]
    """Ranking tests store near-identical texts on purpose: only exact duplicates merge here."""
    return make_hub(dedup_similarity_threshold=0.999, dedup_soft_threshold=0.999)


def add(hub, content, context="", resolution=""):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return hub.memory.upload(
            s, local_actor(s), UploadRequest(content=content, context=context, resolution=resolution)
        ).record


def search(hub, query, **kw):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        results = hub.memory.search(s, local_actor(s), query, **kw)
    hub.hits.flush()  # search hits are written off the request path
    return results


def hit_count(hub, memory_id) -> int:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return s.execute(
            text("SELECT hit_count FROM memories WHERE id = :id"), {"id": memory_id}
        ).scalar_one()


def set_row(hub, memory_id, **values):  # type: ignore[no-untyped-def]
    sets = ", ".join(f"{k} = {v}" for k, v in values.items())
    with hub.db.session() as s:
        s.execute(text(f"UPDATE memories SET {sets} WHERE id = :id"), {"id": memory_id})


def test_most_relevant_first_and_explain_components_multiply(hub):
    a = add(hub, "postgres connection pool exhausted under load", "api server", "raise pool_size")
    add(hub, "redis eviction policy drops session keys", "cache", "use volatile-lru")
    results = search(hub, "postgres connection pool exhausted", explain=True)
    assert results[0].record.id == a.id
    e = results[0].explain
    assert e is not None and e.from_vector and e.from_text
    assert (e.vector_rank, e.text_rank_position) == (1, 1)
    st = hub.settings
    w_lex, w_dense = st.fulltext_weight, 1 - st.fulltext_weight
    if st.search_fusion == "rrf":
        fused = (w_dense / (st.rrf_k + 1) + w_lex / (st.rrf_k + 1)) / ((w_dense + w_lex) / (st.rrf_k + 1))
    else:
        fused = w_dense * e.vector_similarity + w_lex * e.text_rank / (e.text_rank + st.lexical_half)
    assert e.fused == pytest.approx(fused, rel=1e-6)
    boost = st.phrase_match_boost if e.phrase_match else 0.0
    assert e.relevance == pytest.approx(e.fused + e.neighbour_credit + boost, rel=1e-6)
    w = hub.settings.time_decay_weight
    assert e.hotness == pytest.approx(math.exp(-hub.settings.decay_alpha * e.days_since_hit), rel=1e-6)
    # The companion's factors (freshness for a memory minutes old, urgency, importance, ...) multiply too.
    factors = (e.freshness, e.urgency, e.importance, e.resolved, e.entity, e.question)
    companion = math.prod(f or 1.0 for f in factors)
    assert e.freshness is not None and e.freshness > 1
    base = e.relevance * e.tier_boost * (1 - w + w * e.hotness)
    assert e.score == pytest.approx(base * companion, rel=1e-4)
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)


def test_tier_boost_lifts_a_hot_memory_over_a_more_relevant_cold_one(hub):
    exact = add(hub, "kubectl apply fails with forbidden error for namespace prod")
    near = add(hub, "kubectl apply fails with forbidden error for namespace staging")
    query = "kubectl apply forbidden error namespace prod"
    plain = search(hub, query, explain=True)
    assert plain[0].record.id == exact.id
    rel = {r.record.id: r.explain.relevance for r in plain}
    assert rel[exact.id] / rel[near.id] < 1.2 / 0.8  # the boost can overturn this gap

    set_row(hub, exact.id, tier="'cold'")
    set_row(hub, near.id, tier="'hot'")
    boosted = search(hub, query, explain=True)
    assert boosted[0].record.id == near.id
    by_id = {r.record.id: r.explain for r in boosted}
    assert by_id[near.id].tier_boost == 1.2 and by_id[exact.id].tier_boost == 0.8


def test_hotness_decays_with_days_since_last_hit(hub):
    fresh = add(hub, "terraform state lock stuck after a cancelled apply run")
    stale = add(hub, "terraform state lock stuck after a cancelled plan run")
    set_row(
        hub, stale.id, last_hit_at="now() - interval '100 days'", created_at="now() - interval '200 days'"
    )
    results = {r.record.id: r.explain for r in search(hub, "terraform state lock stuck", explain=True)}
    assert results[stale.id].days_since_hit == pytest.approx(100, abs=0.01)
    assert results[stale.id].hotness == pytest.approx(math.exp(-0.05 * 100), rel=1e-3)
    assert results[fresh.id].hotness == pytest.approx(1.0, abs=1e-3)
    w = hub.settings.time_decay_weight
    ratio = results[stale.id].score / results[stale.id].relevance
    assert ratio == pytest.approx(1 - w + w * math.exp(-5), rel=1e-3)


def test_chinese_is_searchable_by_keyword(hub):
    target = add(hub, "数据库连接池耗尽导致接口超时", "高并发下的订单服务", "调大连接池并设置获取超时")
    add(hub, "前端打包体积过大导致首屏加载缓慢", "移动端页面", "开启代码分割")
    results = search(hub, "连接池 超时", explain=True)
    assert results[0].record.id == target.id
    assert results[0].explain.from_text and results[0].explain.text_rank > 0


def test_l0_and_l1_projections(hub):
    add(
        hub,
        "npm ci fails: lockfile out of date",
        "GitHub Actions runner",
        "run npm install and commit the lock",
    )
    l0 = search(hub, "npm ci lockfile", detail_level="l0")[0].record
    assert l0.summary_l0 and (l0.content, l0.context, l0.resolution, l0.overview_l1) == ("", "", "", "")
    l1 = search(hub, "npm ci lockfile", detail_level="l1")[0].record
    assert l1.summary_l0 and l1.overview_l1 and l1.context == "GitHub Actions runner"
    assert (l1.content, l1.resolution) == ("", "")


def test_bad_search_input(hub):
    for kwargs in ({"detail_level": "full"}, {"tier": "lukewarm"}, {"limit": 0}, {"limit": 1000}):
        with pytest.raises(ValidationFailed):
            search(hub, "anything", **kwargs)
    with pytest.raises(ValidationFailed):
        search(hub, "   ")


def test_tier_filter(hub):
    a = add(hub, "gradle daemon runs out of memory on CI")
    add(hub, "gradle build cache misses after upgrade")
    set_row(hub, a.id, tier="'hot'")
    assert [r.record.id for r in search(hub, "gradle", tier="hot")] == [a.id]


def test_hit_signals_search_plus_one_details_plus_two_merge_plus_one(hub):
    rec = add(hub, "pip resolver backtracks forever on conflicting pins", "", "constrain numpy<2")
    assert hit_count(hub, rec.id) == 0
    search(hub, "pip resolver backtracks")
    assert hit_count(hub, rec.id) == 1
    with hub.db.session() as s:
        details = hub.memory.details(s, local_actor(s), [rec.id])
    assert details[0].hit_count == 3
    add(hub, "pip resolver backtracks forever on conflicting pins", "", "constrain numpy<2")
    assert hit_count(hub, rec.id) == 4


def test_one_agent_cannot_inflate_hits_by_repeating_itself(hub):
    rec = add(hub, "docker buildx cache export fails with 403 on GHCR")
    for _ in range(5):
        search(hub, "buildx cache export 403")
    assert hit_count(hub, rec.id) == 1
    others = [LocalBackend(hub, agent=f"peer-{i}", owns_hub=False) for i in range(3)]
    for peer in others:
        peer.search("buildx cache export 403")
        peer.search("buildx cache export 403")
    hub.hits.flush()
    assert hit_count(hub, rec.id) == 4
    with hub.db.session() as s:
        logged = s.execute(text("SELECT count(*), count(*) FILTER (WHERE counted) FROM hit_events")).one()
    assert tuple(logged) == (11, 4)


def test_details_of_unknown_ids_is_not_found_and_counts_nothing(hub):
    rec = add(hub, "jest snapshot mismatch after timezone change")
    with hub.db.session() as s, pytest.raises(NotFound):
        hub.memory.details(s, local_actor(s), [rec.id, rec.id.__class__(int=1)])
    assert hit_count(hub, rec.id) == 0


def test_archived_memories_leave_search(hub):
    rec = add(hub, "cargo build fails: linker cc not found")
    set_row(hub, rec.id, status="'archived'")
    assert search(hub, "cargo linker cc not found") == []


def test_search_hits_are_written_by_the_background_flusher(make_hub):
    hub = make_hub(hit_flush_seconds=0.05)
    rec = add(hub, "vite dev server hot reload stops after renaming a folder")
    with hub.db.session() as s:
        hub.memory.search(s, local_actor(s), "vite hot reload renaming folder")
    deadline = time.monotonic() + 10
    while hit_count(hub, rec.id) == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert hit_count(hub, rec.id) == 1
    assert hub.hits.pending() == 0
    with hub.db.session() as s:
        kinds = s.execute(text("SELECT kind FROM activity_events ORDER BY id")).scalars().all()
    assert kinds == ["upload", "search"]


def test_buffered_search_hits_are_written_at_close(make_hub, settings):
    hub = make_hub(hit_flush_seconds=0)
    rec = add(hub, "sbt compile hangs resolving snapshots from a dead mirror")
    with hub.db.session() as s:
        hub.memory.search(s, local_actor(s), "sbt snapshots dead mirror")
    assert hub.hits.pending() == 1
    hub.close()
    from ultron.hub import Hub

    reopened = Hub.open(settings)
    try:
        assert hit_count(reopened, rec.id) == 1
    finally:
        reopened.close()


def test_a_search_record_is_the_memory_s_full_record_projected(hub):
    """Search builds each record from its row with the projection's blanks in place (one validation): it
    must equal the full record (as details reads it) projected, every field, type and set field alike."""
    with hub.db.session() as s:
        made = hub.memory.upload(
            s,
            local_actor(s),
            UploadRequest(
                content="kafka consumer lag grows after the broker upgrade",
                context="payments cluster, kafka 3.7",
                resolution="raise fetch.max.bytes and restart the consumers",
                tags=["kafka", "lag"],
                valence=-0.4,
                arousal=0.7,
                thread="incident-42",
                position=3,
                occurred_at=datetime(2026, 3, 14, 19, 0, tzinfo=UTC),
                importance=8,
            ),
        ).record
    for level in ("l0", "l1"):
        with hub.db.session() as s:
            full = hub.memory.get(s, local_actor(s), made.id)
        found = search(hub, "kafka consumer lag broker upgrade", detail_level=level)[0].record
        expected = project(full, level)
        assert found.id == made.id and found.thread == "incident-42" and found.importance == 8
        assert found == expected and found.model_fields_set == expected.model_fields_set
        assert [type(v) for v in found.__dict__.values()] == [type(v) for v in expected.__dict__.values()]
        assert found.model_dump_json() == expected.model_dump_json()


def test_a_memory_that_only_asks_sinks_below_the_answer_found_with_it(make_hub):
    # A chat's question turn shares the asker's words and answers nothing; on the conversation suite such
    # turns were the top result for 28 of the 69 questions whose evidence was not first. A memory that asks
    # and holds its resolution is an answer and keeps its score.
    def ranked(**settings):  # type: ignore[no-untyped-def]
        hub = make_hub(dedup_similarity_threshold=0.999, dedup_soft_threshold=0.999, **settings)
        names = {
            add(hub, "So how's the warehouse migration going?").id: "asks",
            add(
                hub, "We moved the whole warehouse to Snowflake last week, the migration went fine."
            ).id: "answer",
            add(
                hub, "How do I migrate the warehouse schema?", resolution="run dbt with --full-refresh"
            ).id: "howto",
        }
        results = search(hub, "What happened with the warehouse migration?", explain=True)
        return [(names[r.record.id], r) for r in results]

    results = ranked()
    order = [name for name, _ in results]
    assert order[0] == "answer" and order.index("asks") > order.index("answer")
    assert {name: r.confidence for name, r in results}["asks"] == "low"
    factors = {name: r.explain.question for name, r in results}
    assert factors == {"asks": 0.8, "answer": None, "howto": None}
    scores = [r.score for _, r in results if r.confidence == "high"]
    assert scores == sorted(scores, reverse=True)
    # Unweighted (1.0), the question turn came first: the behaviour this replaces.
    assert [name for name, _ in ranked(question_weight=1.0)][0] == "asks"


def test_a_memory_that_only_asks_is_never_a_confident_result(make_hub):
    # A new user's chat: "How long was I without hot water?" found the bot's own "how long were you without
    # hot water?" flagged confident, and confident results come before every low one, so the sunk score
    # did not move it below an answer flagged low. A question answers nothing: it is flagged low.
    def results(**settings):  # type: ignore[no-untyped-def]
        hub = make_hub(dedup_similarity_threshold=0.999, dedup_soft_threshold=0.999, **settings)
        asks = add(hub, "Oh no, how long were you without hot water?").id
        answer = add(hub, "Almost two weeks without hot water until the boiler part arrived.").id
        found = search(hub, "How long was I without hot water?")
        names = {asks: "asks", answer: "answer"}
        return [(names[r.record.id], r.confidence) for r in found]

    assert results() == [("answer", "low"), ("asks", "low")]
    # Without the rule (weight 1.0) the question turn was a confident result, above the answer.
    assert results(question_weight=1.0) == [("asks", "high"), ("answer", "low")]


def _chat(hub, actor, turns):  # type: ignore[no-untyped-def]
    """Turns of one thread, in order: (content, scope); returns their ids."""
    ids = []
    with hub.db.session() as s:
        for position, (content, scope) in enumerate(turns, start=1):
            req = UploadRequest(content=content, thread="chat-7", position=position, scope=scope)
            ids.append(hub.memory.upload(s, actor, req).record.id)
    return ids


HOT_WATER = [
    ("The landlord finally sent someone about the boiler.", "shared"),
    ("Oh no, how long were you without hot water?", "shared"),
    ("Almost two weeks, cold showers at the gym every morning.", "shared"),
    ("My sister is hosting lunch on Sunday.", "shared"),
]


def test_a_question_turn_hands_its_place_to_the_reply_after_it(make_hub):
    # The reply shares no word with the question asked of the hub: the bot's question found for it now
    # brings its reply in with its own score (x 0.8) and confidence, and says so.
    def top(**settings):  # type: ignore[no-untyped-def]
        hub = make_hub(dedup_similarity_threshold=0.999, dedup_soft_threshold=0.999, **settings)
        with hub.db.session() as s:
            actor = local_actor(s)
        asks, reply = _chat(hub, actor, HOT_WATER)[1:3]
        with hub.db.session() as s:
            found = hub.memory.search(s, actor, "How long was I without hot water?", limit=2, explain=True)
            stored = project(hub.memory.get(s, actor, reply), "l0")
        return asks, reply, found, stored

    asks, reply, found, stored = top()
    first = found[0]
    assert first.record.id == reply and first.confidence == "high"
    # The reply's record, built from the statement's JSON column, is the record a read returns.
    assert first.record == stored
    assert first.explain.reply_to == asks and first.explain.question is None
    assert [r.record.id for r in found].index(asks) > 0 and len(found) == 2
    # Off (reply_weight 0), the behaviour before: the reply was flagged low, below confident results.
    asks, reply, found, _ = top(reply_weight=0.0)
    held = {r.record.id: r for r in found}
    assert reply not in held or (held[reply].confidence == "low" and held[reply].explain.reply_to is None)


def test_no_reply_is_handed_that_only_asks_is_gone_or_is_not_the_askers_to_see(make_hub):
    hub = make_hub(dedup_similarity_threshold=0.999, dedup_soft_threshold=0.999)
    from tests.memory.test_dedup_lossless import agent

    other, _ = agent(hub, "other-agent")
    with hub.db.session() as s:
        me = local_actor(s)

    def handed(turns, owner_of_reply=None, delete_reply=False):  # type: ignore[no-untyped-def]
        with hub.db.session() as s:
            s.execute(text("DELETE FROM memories WHERE thread = 'chat-7'"))
        ids = _chat(hub, me, turns[:2])
        with hub.db.session() as s:
            req = UploadRequest(content=turns[2][0], thread="chat-7", position=3, scope=turns[2][1])
            ids.append(hub.memory.upload(s, owner_of_reply or me, req).record.id)
        if delete_reply:
            with hub.db.session() as s:
                hub.memory.delete(s, me, ids[2])
        with hub.db.session() as s:
            found = hub.memory.search(s, me, "How long was I without hot water?", limit=5, explain=True)
        return [r for r in found if r.explain.reply_to is not None]

    assert handed(HOT_WATER)  # the control: handed
    assert not handed(HOT_WATER[:2] + [("Why do you ask, is yours broken too?", "shared")])
    assert handed(HOT_WATER, owner_of_reply=other)  # shared by another agent: handed
    private = HOT_WATER[:2] + [("Almost two weeks, cold showers at the gym every morning.", "private")]
    assert not handed(private, owner_of_reply=other)
    assert not handed(HOT_WATER, delete_reply=True)
