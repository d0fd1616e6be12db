"""Provider wrappers that time every call into the provider series of ultron.observability.metrics."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ultron.observability.metrics import PROVIDER_ERRORS, PROVIDER_LATENCY
from ultron.providers.base import EmbedderWrapper, EmbedKind, ProviderError


@contextmanager
def provider_call(provider: str, operation: str) -> Iterator[None]:
    """Time one provider call; failures are counted by ProviderError kind."""
    start = time.perf_counter()
    try:
        yield
    except ProviderError as exc:
        PROVIDER_ERRORS.labels(provider, operation, exc.kind).inc()
        raise
    except Exception:
        PROVIDER_ERRORS.labels(provider, operation, "unexpected").inc()
        raise
    finally:
        PROVIDER_LATENCY.labels(provider, operation).observe(time.perf_counter() - start)


class InstrumentedEmbedder(EmbedderWrapper):
    """An Embedder that times every call; delegates everything to the one it wraps."""

    def __init__(self, inner: Any, provider: str):
        super().__init__(inner)
        self.provider = provider

    def embed(self, texts: Sequence[str], *, kind: EmbedKind = "document") -> list[list[float]]:
        with provider_call(self.provider, "embed"):
            return self.inner.embed(texts, kind=kind)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class InstrumentedChat:
    """A ChatModel that times every call; delegates everything to the one it wraps."""

    def __init__(self, inner: Any, provider: str):
        self.inner = inner
        self.provider = provider

    @property
    def model_name(self) -> str:
        return str(self.inner.model_name)

    def chat(self, messages: list[dict[str, str]], *, max_tokens: int | None = None) -> str:
        with provider_call(self.provider, "chat"):
            return self.inner.chat(messages, max_tokens=max_tokens)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
