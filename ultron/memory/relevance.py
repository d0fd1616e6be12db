"""Relevance on a calibrated scale per embedding model, and the floor below which a result is unrelated.

A raw cosine means different things per model: the local e5-small puts almost any two texts at 0.75-0.85,
the hash embedder spreads them over 0..1. `calibrated_relevance` puts a result's evidence on one 0..1
scale, the same for every model:

    evidence   = 0.3 x dense_z + 2 x text_coverage + gain x (cosine - center)
    calibrated = clip(evidence / 3, 0, 1)

dense_z: how far the cosine stands above the dense leg's 50 candidates (in standard deviations; a
relevant memory stands out of the crowd, an unrelated one is its head); text_coverage: the share of the
query's term IDF the memory holds; center / gain: the model's cosine scale. The weights and the local
model's floor were fitted on the development sets (docs/ranking.md: then 92 % of the conversation suite's
no-answer questions came back all low-confidence; 82 % since stop 13's merge). A search flags results
under the floor `low`.
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


def dense_z(row: Any) -> float:
    """How far the memory's cosine stands above the dense leg's candidates, in standard deviations."""
    mean, std = row.pool_cos_mean, row.pool_cos_std
    if mean is None or not std:
        return 0.0
    return round((float(row.vector_similarity) - float(mean)) / float(std), 4)


def calibrated_relevance(provider: str, row: Any) -> float:
    center, gain = DENSE_SCALE.get(provider, DENSE_SCALE["openai"])
    evidence = 0.3 * dense_z(row) + 2.0 * float(row.coverage or 0.0)
    evidence += gain * (float(row.vector_similarity) - center)
    return round(max(0.0, min(1.0, evidence / 3.0)), 4)
