"""The sweep's relevance stage: weights and floor chosen by its rule, from the results' signals."""

from __future__ import annotations

from ultron.bench.evaluation.sweep import FLOORS, RELEVANCE_GRID, fit_relevance
from ultron.memory.relevance import relevance_from


def test_fit_relevance_picks_the_floor_that_separates_answers_from_no_answers():
    # hash scale: center 0.35, gain 2.5. No-answer questions: their best result has a name-only match
    # (coverage 0) that stands out densely; answers cover the question's content.
    no_answer = [[(2.0, 0.0, 0.40, False), (0.5, 0.0, 0.30, False)] for _ in range(10)]
    answerable = {
        "conv": [[(1.0, 0.8, 0.45, True), (2.0, 0.0, 0.40, False)] for _ in range(10)],
        "dev": [[(1.5, 1.0, 0.50, True)] for _ in range(10)],
    }
    rows = fit_relevance("hash", no_answer, answerable)
    assert len(rows) == len(RELEVANCE_GRID) * len(FLOORS)
    best = rows[0]
    assert best["no_answer_quiet"] == 1.0 and best["conv_confident"] == 1.0 and best["dev_confident"] == 1.0
    assert best["objective"] == 2.0
    loud = relevance_from("hash", 2.0, 0.0, 0.40, best["w_dense_z"], best["w_coverage"])
    answer = relevance_from("hash", 1.0, 0.8, 0.45, best["w_dense_z"], best["w_coverage"])
    assert loud < best["floor"] <= answer
    # a floor that lets the name-only match through scores worse
    assert any(r["no_answer_quiet"] == 0.0 for r in rows)
    assert all(r["objective"] <= best["objective"] for r in rows)
