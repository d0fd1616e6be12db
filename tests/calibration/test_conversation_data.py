"""The conversation suite for `ultron eval --suite conversations`: its size, its shape, and that the
committed JSONL is what the generator builds from the scripts."""

from __future__ import annotations

import json
from collections import Counter

from ultron.bench.evaluation import convgen
from ultron.bench.evaluation.conversations import BM25, Scores, load_set


def test_committed_jsonl_is_what_the_scripts_build():
    committed = [json.loads(line) for line in convgen.OUT.read_text(encoding="utf-8").splitlines()]
    assert committed == convgen.build(), "run `python -m ultron.bench.evaluation.convgen`"


def test_suite_size_and_shape():
    turns, questions = load_set()
    assert len({t.conv for t in turns}) >= 3 and len(turns) >= 300
    assert {t.lang for t in turns} == {"en", "zh"}
    categories = Counter(q.category for q in questions)
    assert categories["no-answer"] >= 50
    assert sum(n for c, n in categories.items() if c != "no-answer") >= 150
    assert all(categories[c] >= 15 for c in ("single-hop", "multi-hop", "temporal")), categories
    ids = {t.id for t in turns}
    assert len(ids) == len(turns)
    for q in questions:
        if q.category == "no-answer":
            assert not q.evidence
        else:
            assert q.evidence and set(q.evidence) <= ids, q.id
            assert all(e.startswith(q.conv + "-") for e in q.evidence), q.id
        if q.category == "multi-hop":
            assert len(q.evidence) >= 2, q.id
    sessions = {(t.conv, t.session) for t in turns}
    assert len(sessions) >= 20


def test_bm25_baseline_and_scores():
    bm25 = BM25(["the cat sat on the mat", "a dog barked at the mailman", "the cat and the dog"])
    assert bm25.rank("mailman", 3) == [1]
    assert bm25.rank("cat", 3)[0] in (0, 2) and 1 not in bm25.rank("cat", 3)
    s = Scores()
    s.add([{"a"}, {"b", "c"}], ["c", "x"])
    assert (s.r(1), s.r(5), s.mrr) == (0.0, 0.5, 0.5)
