"""`ultron eval`: the shipped set's shape, the metrics, and a real run on Postgres with the hash embedder."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from ultron.bench.evaluation.retrieval import DEFAULT_SET, Query, load_set, rank_of, score
from ultron.cli import main


def test_the_shipped_set_is_bilingual_with_paraphrases_and_distractors():
    data = load_set()
    ids = {m["id"] for m in data.memories}
    assert len(data.memories) == 160 and len(data.queries) >= 100
    assert Counter(q.lang for q in data.queries).keys() == {"en", "zh"}
    assert {"paraphrase", "distractor-heavy", "cross-lingual", "keyword"} <= {q.kind for q in data.queries}
    assert all(set(q.expected) <= ids for q in data.queries)


def test_rank_and_metrics():
    assert rank_of(["m2", "m1"], ["m1"]) == 2 and rank_of(["m2"], ["m1"]) is None
    queries = [Query("q1", "en", "keyword", "a", ("m1",)), Query("q2", "zh", "paraphrase", "b", ("m2",))]
    groups = score(queries, {"q1": 1, "q2": 4})
    overall = groups["overall"]
    assert (overall.recall(1), overall.recall(3), overall.recall(10)) == (0.5, 0.5, 1.0)
    assert overall.mrr == pytest.approx((1 + 1 / 4) / 2)
    assert groups["lang=zh"].recall(10) == 1.0 and groups["kind=keyword"].mrr == 1.0


def test_eval_prints_its_metrics(pg_server_url, template_db, tmp_path, capsys):
    # A slice of the set keeps the test short: 30 memories and every query that expects one of them.
    lines = DEFAULT_SET.read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    keep = {r["id"] for r in rows if r["kind"] == "memory"}
    keep = set(sorted(keep)[:30])
    subset = [r for r in rows if r["id"] in keep or (r["kind"] == "query" and set(r["expected"]) <= keep)]
    path = tmp_path / "slice.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in subset), encoding="utf-8")
    args = [
        "eval",
        "retrieval",
        "--embedding-provider",
        "hash",
        "--database-url",
        pg_server_url,
        "--set",
        str(path),
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "30 memories" in out and "R@1" in out and "MRR" in out
    overall = next(line for line in out.splitlines() if line.startswith("overall")).split()
    r1, r3, r10, mrr = map(float, overall[2:])
    assert 0 < r1 <= r3 <= r10 <= 1 and r1 <= mrr <= r10
    assert r10 >= 0.6  # the hash embedder with full text finds most of a small slice
    assert any(line.startswith("lang=zh") for line in out.splitlines())

    assert main([*args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["groups"]["overall"]["recall@10"] == pytest.approx(r10, abs=1e-3)


def test_conversation_suite_prints_the_hub_beside_bm25_and_dense(
    pg_server_url, template_db, tmp_path, capsys
):
    """A slice of one chat (its first 40 turns and the questions they answer, plus no-answer ones),
    through the real upload and search path with the hash embedder; the dump holds every explain."""
    from ultron.bench.evaluation.conversations import DEFAULT_SET as CONVERSATIONS

    rows = [json.loads(line) for line in CONVERSATIONS.read_text(encoding="utf-8").splitlines()]
    turns = [r for r in rows if r["kind"] == "turn" and r["conv"] == "c1"][:40]
    kept = {t["id"] for t in turns}
    questions = [
        r
        for r in rows
        if r["kind"] == "question" and r["conv"] == "c1" and (set(r["evidence"]) <= kept) and r["evidence"]
    ]
    questions += [r for r in rows if r["kind"] == "question" and r["category"] == "no-answer"][:5]
    path = tmp_path / "slice.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in turns + questions), encoding="utf-8")
    dump = tmp_path / "dump.json"
    args = [
        "eval",
        "retrieval",
        "--suite",
        "conversations",
        "--embedding-provider",
        "hash",
        "--database-url",
        pg_server_url,
    ]
    assert main([*args, "--set", str(path), "--dump", str(dump)]) == 0
    out = capsys.readouterr().out
    rows_out = {
        tuple(line.split()[:2]): line.split() for line in out.splitlines() if line.startswith("overall")
    }
    for system in ("hub", "bm25", "dense"):
        r1, r5, r10, mrr = map(float, rows_out[("overall", system)][3:])
        assert 0 <= r1 <= r5 <= r10 <= 1 and 0 <= mrr <= 1
    assert float(rows_out[("overall", "hub")][5]) > 0.3
    assert "no-answer questions" in out
    assert re.search(r"evidence above every question-only turn: \d+/\d+", out)
    current = re.search(r"superseded facts: the current fact ranks first for (\d+)/(\d+)", out)
    assert current is not None and int(current.group(2)) >= 50
    assert int(current.group(1)) >= 0.8 * int(current.group(2))  # the hash embedder; e5: docs/evaluation.md
    explained = json.loads(dump.read_text(encoding="utf-8"))
    first = next(v for v in explained.values() if v["results"])
    assert {"vector_rank", "text_rank_position", "fused", "neighbour_credit", "confidence"} <= set(
        first["results"][0]
    )


def test_answer_first_compares_the_evidence_with_the_question_only_turns():
    from ultron.bench.evaluation.conversations import answer_first

    askers = frozenset({"q1", "q2"})
    assert answer_first([{"e1"}, {"q1"}], ["e1"], askers) is True
    assert answer_first([{"q1"}, {"e1"}], ["e1"], askers) is False
    assert (
        answer_first([{"x"}, {"q1", "x"}, {"e1"}], ["e1"], askers) is True
    )  # a merged memory that also tells
    assert answer_first([{"x"}, {"y"}], ["e1"], askers) is None
    assert answer_first([{"q2"}], ["e1"], askers) is False  # the evidence missing, a question found


def test_the_held_out_split_is_by_rule_and_covers_every_conversation():
    from ultron.bench.evaluation.conversations import load_set, split_of

    turns, questions = load_set()
    sessions = {t.id: t.session for t in turns}
    splits = {q.id: split_of(q, sessions) for q in questions}
    assert splits == {q.id: split_of(q, sessions) for q in questions}  # deterministic
    for q in questions:
        if q.evidence:  # by the session of the first evidence turn
            assert (splits[q.id] == "held-out") == (sessions[q.evidence[0]] % 3 == 0)
    answerable = [q for q in questions if q.evidence]
    held = [q for q in answerable if splits[q.id] == "held-out"]
    assert 0.2 < len(held) / len(answerable) < 0.35
    assert {q.conv for q in held} == {q.conv for q in answerable}
    assert {"dev", "held-out"} == {splits[q.id] for q in questions if not q.evidence}
