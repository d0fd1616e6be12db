"""Relevance on a calibrated scale per embedding model, and the floor below which a result is unrelated.

A raw cosine means different things per model: the local e5-small puts almost any two texts at 0.75-0.85,
the hash embedder spreads them over 0..1. `calibrated_relevance` maps a result's evidence onto one 0..1
scale, the same for every model: the dense cosine rescaled between the model's "unrelated" and "clearly
related" cosines (measured on the dev sets, docs/ranking.md), or the share of the query's term IDF the
memory matches, whichever is stronger. A search flags results below the floor as low-confidence.
"""

from __future__ import annotations

from typing import Any

# provider -> (cosine of unrelated texts, cosine of clearly related texts): the dense scale's 0 and 1.
DENSE_SCALE: dict[str, tuple[float, float]] = {
    "local": (0.80, 0.90),
    "hash": (0.10, 0.60),
    "dashscope": (0.30, 0.70),
    "openai": (0.20, 0.60),
}
# provider -> the default relevance floor on the calibrated scale.
DEFAULT_FLOOR: dict[str, float] = {"local": 0.5, "hash": 0.5, "dashscope": 0.5, "openai": 0.5}


def dense_scale(provider: str) -> tuple[float, float]:
    return DENSE_SCALE.get(provider, DENSE_SCALE["openai"])


def dense_z(row: Any) -> float:
    """How far the memory's cosine stands above the dense leg's candidates, in standard deviations."""
    mean, std = row.pool_cos_mean, row.pool_cos_std
    if mean is None or not std:
        return 0.0
    return round((float(row.vector_similarity) - float(mean)) / float(std), 4)


def calibrated_relevance(provider: str, row: Any) -> float:
    lo, hi = dense_scale(provider)
    dense = (float(row.vector_similarity) - lo) / (hi - lo)
    lexical = float(row.coverage or 0.0)
    return round(max(0.0, min(1.0, max(dense, lexical))), 4)
