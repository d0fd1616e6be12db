"""A deterministic feature-hashing embedder: no model, no network; for tests, benchmarks and as a floor."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from ultron.providers.base import EmbedKind
from ultron.providers.tokens import CJK_CLASS

MODEL_VERSION = "hash-v1"
DEFAULT_DIMENSION = 256
# A CJK run contributes its character bigrams (the unit of meaning in most Chinese words) at full weight
# and its single characters at a lower one, so one-character overlaps count for something but less.
CJK_BIGRAM_WEIGHT = 1.0
CJK_UNIGRAM_WEIGHT = 0.5
# Without these, any two English sentences share "the", "is", "to" and look alike.
_STOPWORDS_TEXT = """
a an the and or but if of to in on at by for with from as is are was were be been being it its this
that these those i you he she we they me my our your their them do does did not no so than then there
here can could will would should may might must have has had
"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())
CJK_STOP_CHARS = frozenset("的了是在和有我你他她它们这那就也都而及与或之")
# Empty text still gets a unit vector (a zero vector has no cosine) that matches nothing real.
EMPTY_FEATURE = "\x00empty"

_WORD = re.compile(f"[{CJK_CLASS}]+|[^\\W{CJK_CLASS}]+")
_CJK_RUN = re.compile(f"[{CJK_CLASS}]+")


@lru_cache(maxsize=65536)
def _slot(feature: str, dimension: int) -> tuple[int, float]:
    """Index and sign of a feature; blake2b because Python's hash() is salted per process."""
    digest = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "big")
    return digest % dimension, (1.0 if digest >> 63 else -1.0)


def _features(text: str) -> list[tuple[str, float]]:
    """Weighted features: lowercase words (minus stopwords), and CJK bigrams and characters."""
    features: list[tuple[str, float]] = []
    for run in _WORD.findall(text.lower()):
        if not _CJK_RUN.fullmatch(run):
            if run not in STOPWORDS:
                features.append(("w:" + run, 1.0))
            continue
        features.extend(("c:" + ch, CJK_UNIGRAM_WEIGHT) for ch in run if ch not in CJK_STOP_CHARS)
        features.extend(("b:" + run[i : i + 2], CJK_BIGRAM_WEIGHT) for i in range(len(run) - 1))
    return features or [(EMPTY_FEATURE, 1.0)]


class HashEmbedder:
    """Signed feature hashing of words and CJK n-grams, L2-normalized. Stateless, so thread-safe."""

    def __init__(self, dimension: int = DEFAULT_DIMENSION) -> None:
        if dimension < 2:
            raise ValueError("HashEmbedder dimension must be at least 2")
        self.dimension = dimension
        self.model_name = f"{MODEL_VERSION}:{dimension}"

    def _vector(self, text: str) -> np.ndarray:
        row = np.zeros(self.dimension, dtype=np.float64)
        for feature, weight in _features(text):
            index, sign = _slot(feature, self.dimension)
            row[index] += sign * weight
        norm = np.linalg.norm(row)
        if norm == 0:  # every feature cancelled out; fall back to the empty-text vector
            return self._vector("")
        return row / norm

    def embed(self, texts: Sequence[str], *, kind: EmbedKind = "document") -> list[list[float]]:
        """Queries and documents embed alike: hashing has no notion of either."""
        return [self._vector(text).astype(np.float32).tolist() for text in texts]
