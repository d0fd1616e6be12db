"""Relevance on a calibrated scale per embedding model, and the floor below which a result is unrelated.

A raw cosine means different things per model: the local e5-small puts almost any two texts at 0.75-0.85,
the hash embedder spreads them over 0..1. `calibrated_relevance` puts a result's evidence on one 0..1
scale, the same for every model:

    evidence   = W_DENSE_Z x dense_z + W_COVERAGE x content_coverage + gain x (cosine - center)
    calibrated = clip(evidence / 3, 0, 1)

dense_z: how far the cosine stands above the dense leg's 50 candidates (in standard deviations; a
relevant memory stands out of the crowd, an unrelated one is its head); content_coverage: the share of the
IDF of the query's terms beyond the names it mentions that the memory holds (a name selects the memories
about someone, it is no evidence that the question about them is answered; a query of names only uses all
its terms); center / gain: the model's cosine scale. The two weights and the local model's floor are
fitted by `ultron eval retrieval --suite sweep` on both development sets (docs/ranking.md). A search flags
results under the floor `low`.
"""

from __future__ import annotations

from typing import Any

# provider -> (center, gain) of its cosine scale. local: measured on the conversation suite (answerable
# questions' best cosine 0.877 on average, no-answer 0.855); hash: from its dedup calibration (unrelated
# texts ~0.1-0.3); dashscope / openai: not measurable offline, set from their published cosine ranges.
DENSE_SCALE: dict[str, tuple[float, float]] = {
    "local": (0.85, 10.0),
    "hash": (0.35, 2.5),
    "dashscope": (0.55, 4.0),
    "openai": (0.45, 4.0),
}
# Fitted by the sweep's relevance stage (ultron/bench/evaluation/sweep.py, docs/ranking.md).
W_DENSE_Z = 0.2
W_COVERAGE = 2.0


def dense_z(row: Any) -> float:
    """How far the memory's cosine stands above the dense leg's candidates, in standard deviations."""
    mean, std = row.pool_cos_mean, row.pool_cos_std
    if mean is None or not std:
        return 0.0
    return round((float(row.vector_similarity) - float(mean)) / float(std), 4)


def content_coverage(row: Any) -> float:
    """The share of the IDF of the query's terms beyond the names it mentions that the memory holds."""
    value = getattr(row, "content_coverage", None)
    return float(row.coverage or 0.0) if value is None else float(value)


def relevance_from(
    provider: str,
    z: float,
    coverage: float,
    cosine: float,
    w_dense_z: float = W_DENSE_Z,
    w_coverage: float = W_COVERAGE,
) -> float:
    """The calibrated relevance of a result's three signals (the sweep refits the weights with this)."""
    center, gain = DENSE_SCALE.get(provider, DENSE_SCALE["openai"])
    evidence = w_dense_z * z + w_coverage * coverage + gain * (cosine - center)
    return round(max(0.0, min(1.0, evidence / 3.0)), 4)


def calibrated_relevance(provider: str, row: Any) -> float:
    return relevance_from(provider, dense_z(row), content_coverage(row), float(row.vector_similarity))
