"""The lexical ranker (issue 15): IDF from term statistics, stems, exact identifiers, phrases, no absolute
common-term cutoff; conversation place and time; calibrated confidence."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from ultron.memory import fulltext
from ultron.memory.schemas import UploadRequest
from ultron.memory.timeq import query_time_range
from ultron.tenancy import local_actor


@pytest.fixture()
def hub(make_hub):  # type: ignore[no-untyped-def]
    """Only exact duplicates merge: the ranking is what is under test."""
    return make_hub(dedup_similarity_threshold=0.999, dedup_soft_threshold=0.999)


def add(hub, content, **fields):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return hub.memory.upload(s, local_actor(s), UploadRequest(content=content, **fields)).record


def refresh(hub) -> None:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        hub.memory.refresh_term_stats(s, local_actor(s).tenant_id)


def search(hub, query, **kw):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return hub.memory.search(s, local_actor(s), query, **kw)


def test_index_text_stems_english_and_keeps_identifiers_exact():
    doc = fulltext.index_text("Researching why psycopg.errors.UniqueViolation broke on Python 3.12 builds")
    assert doc.split() == [
        "research",
        "whi",
        "psycopg.errors.uniqueviolation",
        "broke",
        "on",
        "python",
        "3.12",
        "build",
    ]
    q = fulltext.lexical_query("What did they research about the builds?")
    assert q.terms == ["research", "build"]  # "did", "what", "they", "about", "the" are stop words
    assert fulltext.index_text("ERR_SSL_PROTOCOL_ERROR in node-18") == "err_ssl_protocol_error in node-18"


def test_the_c_stemmer_gives_the_stems_the_python_port_gives():
    # Stop 28: stemming runs on PyStemmer's C stemmers (a dependency; snowballstemmer.stemmer() picks them
    # when installed), 15x faster. Stores indexed by the Python port must keep matching their queries: the
    # same stem for every word of the shipped data sets and docs.
    import re
    from pathlib import Path

    import Stemmer
    from snowballstemmer.english_stemmer import EnglishStemmer

    root = Path(__file__).parents[2]
    words: set[str] = set()
    texts = [*root.glob("ultron/bench/data/*.jsonl"), *root.glob("docs/*.md"), *root.glob("tests/data/*.*")]
    for path in texts:
        words |= {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z']+", path.read_text(encoding="utf-8"))}
    assert len(words) > 5000
    assert isinstance(fulltext._stemmer(), Stemmer.Stemmer)
    port = EnglishStemmer()
    differ = [w for w in sorted(words) if fulltext._stemmer().stemWord(w) != port.stemWord(w)]
    assert differ == []


def test_stemming_matches_other_word_forms(hub):
    target = add(hub, "Caroline has been researching adoption agencies for months")
    add(hub, "the weather in the mountains was cold and windy")
    refresh(hub)
    results = search(hub, "what did Caroline research about adopting", explain=True)
    assert results[0].record.id == target.id
    assert results[0].explain.text_rank > 0 and results[0].explain.text_rank_position == 1


def test_rare_terms_outweigh_common_ones(hub):
    """IDF: the word every memory shares cannot decide the ranking; the rare one does."""
    for i in range(12):
        add(hub, f"Melanie talked about her weekend plans number {i} with friends")
    rare = add(hub, "I finally bought a pottery wheel")
    common_heavy = add(hub, "Melanie Melanie said Melanie likes Melanie things")
    refresh(hub)
    results = search(hub, "Melanie pottery wheel", explain=True)
    assert results[0].record.id == rare.id
    by_id = {r.record.id: r.explain for r in results}
    assert by_id[rare.id].text_rank > by_id[common_heavy.id].text_rank


def test_adjacent_query_words_rank_a_phrase_first(hub):
    scattered = add(hub, "the green light on the river bank turned red before the bridge")
    phrase = add(hub, "we stopped at the red bridge near the old mill")
    refresh(hub)
    results = search(hub, "red bridge", explain=True)
    assert results[0].record.id == phrase.id
    by_id = {r.record.id: r.explain for r in results}
    assert by_id[phrase.id].text_rank > by_id[scattered.id].text_rank


def test_a_phrase_of_common_words_is_found_past_the_old_absolute_cutoff(make_hub):
    """Before: terms matching more than 200 memories were dropped, so a query made of them found nothing
    by text. Now the phrase pool finds the one memory holding the five words in order."""
    hub = make_hub(dedup_similarity_threshold=0.999, dedup_soft_threshold=0.999, fulltext_pool=20)
    words = ["north", "window", "garden", "yellow", "letter", "morning", "street"]
    with hub.db.session() as s:
        actor = local_actor(s)
        for i in range(60):
            order = words[i % 7 :] + words[: i % 7]
            content = f"note {i}: " + " ".join(reversed(order)) + f" item{i}"
            hub.memory.upload(s, actor, UploadRequest(content=content))
    target = add(hub, "note x: north window garden yellow letter and more")
    refresh(hub)
    results = search(hub, "north window garden yellow letter", explain=True, limit=10)
    assert results[0].record.id == target.id
    assert results[0].explain.from_text


def test_stats_are_rebuilt_from_active_memories(hub):
    add(hub, "kafka consumer lag grows after a rebalance")
    b = add(hub, "kafka broker disk fills with old segments")
    refresh(hub)
    with hub.db.session() as s:
        ndoc = s.execute(text("SELECT ndoc FROM term_stats WHERE lexeme = 'kafka'")).scalar_one()
        docs = s.execute(text("SELECT docs FROM term_totals")).scalar_one()
        assert (ndoc, docs) == (2, 2)
        s.execute(text("UPDATE memories SET status = 'archived' WHERE id = :id"), {"id": b.id})
    refresh(hub)
    with hub.db.session() as s:
        assert s.execute(text("SELECT ndoc FROM term_stats WHERE lexeme = 'kafka'")).scalar_one() == 1


def test_the_hub_keeps_term_stats_fresh_without_the_worker(hub):
    """The keeper rebuilds a tenant's statistics in the background once enough memories changed."""
    from ultron.memory.termstats import MIN_CHANGES

    for i in range(2 * MIN_CHANGES + 1):
        add(hub, f"grafana panel {i} shows no data after the upgrade")
    deadline = time.monotonic() + 30
    ndoc = 0
    while time.monotonic() < deadline:
        with hub.db.session() as s:
            ndoc = s.execute(text("SELECT max(ndoc) FROM term_stats WHERE lexeme = 'grafana'")).scalar() or 0
        if ndoc >= MIN_CHANGES:
            break
        time.sleep(0.2)
    assert ndoc >= MIN_CHANGES


def test_thread_position_and_occurred_at_are_stored_and_explained(make_hub):
    hub = make_hub(dedup_similarity_threshold=0.999, dedup_soft_threshold=0.999, neighbour_weight=0.3)
    when = datetime(2026, 2, 7, 20, 15, tzinfo=UTC)
    subject = add(
        hub, "Jonas: have you read the book I lent you?", thread="chat-1", position=1, occurred_at=when
    )
    answer = add(hub, "Maya: loved it, the ending made me cry", thread="chat-1", position=2, occurred_at=when)
    add(hub, "Maya: the weather is awful today", thread="chat-2", position=1)
    refresh(hub)
    assert answer.thread == "chat-1" and answer.position == 2 and answer.occurred_at == when
    results = search(hub, "what did Maya think of the book Jonas lent", explain=True)
    by_id = {r.record.id: r.explain for r in results}
    assert by_id[answer.id].neighbour_credit > 0 and by_id[subject.id].neighbour_credit > 0
    dated = {r.record.id: r.explain for r in search(hub, "what happened in February 2026", explain=True)}
    assert dated[answer.id].time_match and not any(
        e.time_match for i, e in dated.items() if i not in (answer.id, subject.id)
    )


def test_occurred_at_needs_a_timezone():
    with pytest.raises(ValueError, match="timezone"):
        UploadRequest(content="x", occurred_at=datetime(2026, 1, 1))  # noqa: DTZ001


def test_query_time_range():
    assert query_time_range("what did she do in March 2026?") == (
        datetime(2026, 3, 1, tzinfo=UTC),
        datetime(2026, 4, 1, tzinfo=UTC),
    )
    assert query_time_range("2026年5月发生了什么") == (
        datetime(2026, 5, 1, tzinfo=UTC),
        datetime(2026, 6, 1, tzinfo=UTC),
    )
    assert query_time_range("late December 2025")[1] == datetime(2026, 1, 1, tzinfo=UTC)
    assert query_time_range("how do I fix the build") is None


def test_unrelated_results_are_flagged_low_confidence(make_hub):
    hub = make_hub(dedup_similarity_threshold=0.999, dedup_soft_threshold=0.999)
    add(hub, "pandas import error: numpy.dtype size changed, may indicate binary incompatibility")
    add(hub, "webpack build runs out of memory on the CI runner")
    refresh(hub)
    unrelated = search(hub, "postgres connection refused", explain=True)
    assert all(r.confidence == "low" for r in unrelated)
    related = search(hub, "pandas numpy dtype size changed", explain=True)
    assert related[0].confidence == "high"
    assert all(
        r.confidence == "low" for r in search(hub, "pandas numpy dtype size changed", min_relevance=1.01)
    )


def test_thread_returns_the_neighbouring_turns_in_order(hub):
    turns = [
        add(hub, f"turn {i}: {word} about the weekend", thread="t-1", position=i)
        for i, word in enumerate(["alpha", "bravo", "charlie", "delta", "echo"])
    ]
    add(hub, "another chat entirely, about the weather", thread="t-2", position=2)
    with hub.db.session() as s:
        around = hub.memory.thread(s, local_actor(s), turns[2].id, span=1)
        alone = hub.memory.thread(s, local_actor(s), add(hub, "no thread here").id)
    assert [r.id for r in around] == [t.id for t in turns[1:4]]
    assert len(alone) == 1


def test_query_names_are_capitalised_words_and_chinese_person_names():
    assert fulltext.query_names("What colour is Jonas's car?") == {fulltext.normalize("jonas")}
    assert fulltext.query_names("Which marathon did Tom run with Priya’s sister?") == {"tom", "priya"}
    # a capital opening a sentence says nothing; identifiers and lower-case queries hold no names
    assert fulltext.query_names("Postgres connection refused. Tell me why") == set()
    assert fulltext.query_names("ModuleNotFoundError for pandas in node-18 with CORS") == set()
    assert fulltext.query_names("when did caroline join the program") == set()
    assert fulltext.query_names("陈浩的女朋友叫什么名字？") == {"陈浩"}
    q = fulltext.lexical_query("What colour is Jonas's car?")
    flags = dict(zip(q.unit_q, q.unit_name or [], strict=True))
    assert flags == {"'colour'": False, "'jona'": True, "'car'": False} | {
        u: False for u, k in zip(q.unit_q, q.unit_kind, strict=True) if k == "pair"
    }
    assert q.params()["unit_name"] == [*q.unit_name, *([False] if q.phrase_q else [])]


def test_a_name_alone_is_no_evidence_that_the_question_is_answered(hub):
    """Coverage counts the query's terms beyond the names it mentions: a turn that only names the person
    asked about covers nothing of "What colour is Jonas's car?", and its confidence follows."""
    from ultron.memory.relevance import relevance_from

    # private memories keep names (shared ones lose them to redaction: docs/privacy.md)
    name_only = add(hub, "Jonas: Biscuit! I need photos immediately.", scope="private")
    answer = add(hub, "Jonas: my car is a red Volvo, the colour of a fire engine", scope="private")
    for i in range(6):
        add(hub, f"Maya: note {i} about the garden and the allotment soil", scope="private")
    refresh(hub)
    results = {r.record.id: r for r in search(hub, "What colour is Jonas's car?", explain=True, limit=20)}
    lone, full = results[name_only.id].explain, results[answer.id].explain
    assert lone is not None and full is not None
    assert lone.text_coverage > 0 and lone.content_coverage == 0
    assert full.content_coverage == pytest.approx(1.0)
    for r in results.values():
        e = r.explain
        assert e is not None
        expected = relevance_from(
            hub.settings.embedding_provider, e.dense_z, e.content_coverage, e.vector_similarity
        )
        assert r.similarity_score == e.calibrated_relevance == expected
    assert results[name_only.id].similarity_score < results[answer.id].similarity_score
    # a query made of names only is measured on all its terms
    only = {r.record.id: r.explain for r in search(hub, "Who is Jonas?", explain=True, limit=20)}
    assert only[name_only.id] is not None
    assert only[name_only.id].content_coverage == only[name_only.id].text_coverage > 0


def test_a_name_only_match_ranks_below_every_content_match(hub):
    """ "Tom: Night!" holds the name a question mentions and nothing else: short and rare, it would lead
    the lexical leg on any question naming Tom; it ranks below the memories that match the content."""
    night = add(hub, "Tom: Night!", scope="private")
    weather = [
        add(
            hub, f"Maya: the weather was {w} at the lake on Sunday with the kids and the dog", scope="private"
        )
        for w in ("lovely", "awful", "grey", "windy")
    ]
    refresh(hub)
    results = {
        r.record.id: r.explain for r in search(hub, "What did Tom say about the weather?", explain=True)
    }
    lone = results[night.id]
    assert lone is not None and lone.text_rank_position is not None
    content = [results[w.id] for w in weather if w.id in results]
    assert content and all(e is not None and e.text_rank_position is not None for e in content)
    # BM25 alone puts the name-only turn first; the lexical rank does not
    assert lone.text_rank > max(e.text_rank for e in content if e is not None)
    assert lone.text_rank_position > max(e.text_rank_position or 0 for e in content if e is not None)


CHAT = [
    "Sam: Hi Priya, how was your week?",
    "Priya: Busy! We are moving to Lisbon in March, the flat is already signed.",
    "Sam: Wow. Does Biscuit come too?",
    "Priya: Of course, the dog comes with us.",
    "Sam: I finally bought a new laptop for work.",
    "Priya: Nice. Anyway, I have to go.",
    "Priya: Night!",
]


def test_confident_results_come_before_the_low_ones(make_hub):
    """A new user's chat on the default local model: "Priya moving" scored two turns that only name Priya
    (low confidence) above the turn that answers (high); results go confident first, each group by score."""
    hub = make_hub(embedding_provider="local", dedup_similarity_threshold=0.999, dedup_soft_threshold=0.999)
    for i, turn in enumerate(CHAT):
        add(hub, turn, thread="chat-1", position=i, scope="private")
    refresh(hub)
    for query in ("Priya moving", "Does the dog come to Lisbon?", "Where is Priya moving?"):
        results = search(hub, query, limit=5)
        flags = [r.confidence for r in results]
        assert flags == sorted(flags, key=lambda f: f == "low"), (query, flags)
        for group in ("high", "low"):
            scores = [r.score for r in results if r.confidence == group]
            assert scores == sorted(scores, reverse=True), (query, group, scores)
    top = search(hub, "Priya moving", limit=5)[0]
    assert top.confidence == "high" and "Lisbon" in (top.record.summary_l0 or ""), top
