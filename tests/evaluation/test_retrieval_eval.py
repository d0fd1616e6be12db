"""`ultron eval`: the shipped set's shape, the metrics, and a real run on Postgres with the hash embedder."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from ultron.cli import main
from ultron.evaluation.retrieval import DEFAULT_SET, Query, load_set, rank_of, score


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
    args = ["eval", "--embedding-provider", "hash", "--database-url", pg_server_url, "--set", str(path)]
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
