"""An LRU of recent embeddings in front of any embedder: a re-sent text (a retry, a re-upload, the query an
agent repeats) is not embedded again. Embedders are deterministic per model, so a hit is the same vector."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ultron.lru import Lru
from ultron.providers.base import EmbedderWrapper, EmbedKind

# Vectors kept (float32: 1.5 KB each at 384 dimensions, 4 KB at 1024) and the longest text kept.
CACHE_SIZE = 4096
CACHE_MAX_CHARS = 8000


class CachedEmbedder(EmbedderWrapper):
    """Delegates to `inner`, embedding only the texts it has not seen recently (one call for all misses)."""

    def __init__(self, inner: Any, size: int = CACHE_SIZE):
        super().__init__(inner)
        self.size = size
        self._cache: Lru[tuple[str, str], np.ndarray] = Lru(size)
        self.hits = 0

    def embed(self, texts: Sequence[str], *, kind: EmbedKind = "document") -> list[list[float]]:
        texts = list(texts)
        found: dict[str, np.ndarray] = {}
        for text in dict.fromkeys(texts):
            vector = self._cache.get((kind, text))
            if vector is not None:
                found[text] = vector
        self.hits += sum(1 for text in texts if text in found)
        missing = [text for text in dict.fromkeys(texts) if text not in found]
        if missing:
            fresh = self.inner.embed(missing, kind=kind)
            for text, vector in zip(missing, fresh, strict=True):
                found[text] = row = np.asarray(vector, dtype=np.float32)
                if len(text) <= CACHE_MAX_CHARS:
                    self._cache.put((kind, text), row)
        return [found[text].tolist() for text in texts]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
