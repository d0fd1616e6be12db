"""The two provider protocols, the one error they raise, and vector helpers they share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

EmbedKind = Literal["document", "query"]
ErrorKind = Literal["timeout", "connection", "http", "bad_payload", "unavailable"]

# HTTP statuses worth another try: throttling and server-side failures. Other 4xx mean our request is
# wrong (bad key, bad model, too long) and will fail the same way again.
RETRYABLE_STATUS_MIN = 500
THROTTLED_STATUS = 429


class ProviderError(Exception):
    """An embedding or chat provider failed; says which one and how, never what was sent."""

    def __init__(
        self,
        provider: str,
        message: str,
        *,
        kind: ErrorKind,
        status_code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{provider}: {message}")
        self.provider = provider
        self.kind = kind
        self.status_code = status_code
        # Seconds the provider asked us to wait (a 429's Retry-After), when it said.
        self.retry_after = retry_after

    @property
    def is_timeout(self) -> bool:
        return self.kind == "timeout"

    @property
    def retryable(self) -> bool:
        """Whether the same call may succeed if tried again later."""
        if self.kind in ("timeout", "connection"):
            return True
        if self.kind == "http" and self.status_code is not None:
            return self.status_code == THROTTLED_STATUS or self.status_code >= RETRYABLE_STATUS_MIN
        return False


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalized vectors. Implementations are thread-safe."""

    @property
    def model_name(self) -> str:
        """Recorded in the database, e.g. "hash-v1:256" or "dashscope:text-embedding-v4"."""
        ...

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str], *, kind: EmbedKind = "document") -> list[list[float]]: ...


@runtime_checkable
class ChatModel(Protocol):
    """Answers a chat; raises ProviderError once its retries are spent. Thread-safe."""

    @property
    def model_name(self) -> str: ...

    def chat(self, messages: list[dict[str, str]], *, max_tokens: int | None = None) -> str: ...


def retry_after_seconds(value: str | None) -> float | None:
    """A Retry-After header given in seconds (the HTTP-date form is rare from APIs and ignored)."""
    try:
        seconds = float(value) if value else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds < 86400 else None


def normalize_rows(matrix: np.ndarray, provider: str) -> list[list[float]]:
    """L2-normalize each row; a zero row is a broken answer, not something to store."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if matrix.size and not np.all(norms > 0):
        raise ProviderError(provider, "returned a zero vector", kind="bad_payload")
    if not np.all(np.isfinite(matrix)):
        raise ProviderError(provider, "returned a non-finite vector", kind="bad_payload")
    return (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32).tolist()


def check_vectors(
    vectors: list[list[float]], expected_count: int, dimension: int | None, provider: str
) -> np.ndarray:
    """Validate a provider's raw vectors (count, equal lengths, expected dimension) as a float matrix."""
    if len(vectors) != expected_count:
        raise ProviderError(
            provider, f"returned {len(vectors)} vectors for {expected_count} texts", kind="bad_payload"
        )
    try:
        matrix = np.asarray(vectors, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ProviderError(provider, "returned vectors that are not numbers", kind="bad_payload") from exc
    if matrix.ndim != 2:
        raise ProviderError(provider, "returned vectors of unequal length", kind="bad_payload")
    if dimension is not None and expected_count and matrix.shape[1] != dimension:
        raise ProviderError(
            provider,
            f"returned dimension {matrix.shape[1]}, expected {dimension}",
            kind="bad_payload",
        )
    return matrix


class EmbedderWrapper:
    """An embedder around another one (bounded, cached, instrumented): its model and dimension are the
    inner embedder's; a subclass adds what it does around `embed`."""

    def __init__(self, inner: Any):
        self.inner = inner

    @property
    def model_name(self) -> str:
        return str(self.inner.model_name)

    @property
    def dimension(self) -> int:
        return int(self.inner.dimension)
