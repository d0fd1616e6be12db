"""The hard-negative dedup set (issue 31): built by rule, split by template, and scored by the upload
path's decision, which never merges a different fact even where cosine says every pair is the same."""

from __future__ import annotations

import json
from collections import Counter

from ultron.bench import dedup_hard
from ultron.bench.data import make_hard_pairs


def test_the_committed_set_is_what_the_generator_builds():
    assert make_hard_pairs.build() == dedup_hard.load()


def test_at_least_a_thousand_pairs_of_every_kind_in_both_languages():
    pairs = dedup_hard.load()
    assert len(pairs) >= 1000
    kinds = Counter((p["lang"], p["kind"]) for p in pairs)
    for lang in ("en", "zh"):
        for kind in make_hard_pairs.KINDS:
            assert kinds[(lang, kind)] > 0, (lang, kind)
    labels = Counter(p["label"] for p in pairs)
    assert labels["duplicate"] > 300 and labels["distinct"] > 300
    assert all((p["label"] == "duplicate") == (p["kind"] in dedup_hard.DUPLICATE_KINDS) for p in pairs)
    assert all(p["a"]["content"] != p["b"]["content"] for p in pairs)


def test_no_sentence_or_template_lies_in_both_splits():
    pairs = dedup_hard.load()
    for key in ("base", "template"):
        splits: dict[str, set[str]] = {}
        for p in pairs:
            splits.setdefault(p[key], set()).add(p["split"])
        assert all(len(s) == 1 for s in splits.values()), key
    held = [p for p in pairs if p["split"] == "heldout"]
    assert 0.3 < len(held) / len(pairs) < 0.7
    assert {p["lang"] for p in held} == {"en", "zh"}


def test_where_cosine_merges_everything_no_different_fact_is_merged():
    pairs = [p for p in dedup_hard.load() if p["split"] == "heldout"]
    report = dedup_hard.evaluate(pairs, [0.999] * len(pairs), hard=0.99, soft=0.95, split="heldout")
    assert report.failures() == []
    wrong = {r.name: r.auto[1] + r.judged[1] for r in report.rows}
    assert wrong["all"] == 0
    overall = next(r for r in report.rows if r.name == "all")
    assert overall.recall is not None and overall.recall >= 0.5
    assert "verdict: ok" in report.format()


def test_a_threshold_that_merges_different_facts_is_refused():
    same_words = {"content": "The nightly backup failed because the disk was full."}
    pairs = [
        {"lang": "en", "kind": "paraphrase", "label": "duplicate", "a": same_words, "b": dict(same_words)},
        # labelled distinct but textually one fact: the decision merges it, which counts as wrong
        {"lang": "en", "kind": "negate", "label": "distinct", "a": same_words, "b": dict(same_words)},
    ]
    report = dedup_hard.evaluate(pairs, [0.999, 0.999], hard=0.99, soft=0.95)
    assert report.failures() and "REFUSED" in report.format()
    assert json.dumps(report.rows[0].auto) == "[1, 1]"
