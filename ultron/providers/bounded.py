"""Time bounds around remote providers, so a provider that hangs costs a request seconds, not minutes.

* `deadline_s`: the most one call may take, retries included (default `provider_deadline_seconds`).
  The call runs on a small thread pool; the caller stops waiting at the deadline and gets a
  ProviderError(kind="timeout"). The abandoned attempt ends by itself at its own HTTP timeout.
* a circuit breaker: after a failure that may go on (timeout, connection, 429, 5xx) the provider is
  not asked again for `cooldown_s`; calls in that window fail at once (kind="unavailable"), so a chat
  model that hangs costs the first request its deadline and the next ones nothing (they fall back to
  the heuristic at once), and an embedder that hangs answers 503 at once instead of a queue of waits.

Only remote providers (openai, dashscope) are wrapped; the local and hash embedders cannot hang.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from ultron.providers.base import EmbedderWrapper, EmbedKind, ProviderError

log = logging.getLogger(__name__)

T = TypeVar("T")

# Threads waiting on remote providers; a call beyond this many waits for a free one (within its deadline).
POOL_THREADS = 32


class Breaker:
    """Open for `cooldown_s` after a lasting failure; thread-safe."""

    def __init__(self, cooldown_s: float):
        self.cooldown_s = cooldown_s
        self._open_until = 0.0
        self._lock = threading.Lock()

    def is_open(self) -> bool:
        return self.remaining() > 0

    def remaining(self) -> float:
        """Seconds until the provider is asked again (0 when closed)."""
        with self._lock:
            return max(0.0, self._open_until - time.monotonic())

    def trip(self, seconds: float | None = None) -> None:
        with self._lock:
            self._open_until = max(self._open_until, time.monotonic() + (seconds or self.cooldown_s))

    def reset(self) -> None:
        with self._lock:
            self._open_until = 0.0


class Bounded:
    """Runs calls to one provider with a deadline, behind a breaker."""

    def __init__(self, provider: str, deadline_s: float, cooldown_s: float):
        self.provider = provider
        self.deadline_s = deadline_s
        self.breaker = Breaker(cooldown_s)
        self._pool = ThreadPoolExecutor(POOL_THREADS, thread_name_prefix=f"ultron-{provider}")

    def run(self, call: Callable[[], T]) -> T:
        wait = self.breaker.remaining()
        if wait > 0:
            raise ProviderError(
                self.provider, "cooling down after a failure", kind="unavailable", retry_after=math.ceil(wait)
            )
        future = self._pool.submit(call)
        try:
            result = future.result(timeout=self.deadline_s)
        except FutureTimeout:
            future.cancel()
            self.breaker.trip()
            log.warning(
                "%s gave no answer within %.1fs; pausing it for %.0fs",
                self.provider,
                self.deadline_s,
                self.breaker.cooldown_s,
            )
            raise ProviderError(
                self.provider, f"no answer within {self.deadline_s:g}s", kind="timeout"
            ) from None
        except ProviderError as exc:
            if exc.retryable:
                self.breaker.trip(getattr(exc, "retry_after", None))
            raise
        self.breaker.reset()
        return result

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class BoundedEmbedder(EmbedderWrapper):
    """An Embedder whose calls are bounded by a deadline and a breaker."""

    def __init__(self, inner: Any, provider: str, deadline_s: float, cooldown_s: float):
        super().__init__(inner)
        self.bounded = Bounded(provider, deadline_s, cooldown_s)

    def embed(self, texts: Sequence[str], *, kind: EmbedKind = "document") -> list[list[float]]:
        return self.bounded.run(lambda: self.inner.embed(texts, kind=kind))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class BoundedChat:
    """A ChatModel whose calls are bounded by a deadline and a breaker."""

    def __init__(self, inner: Any, provider: str, deadline_s: float, cooldown_s: float):
        self.inner = inner
        self.bounded = Bounded(provider, deadline_s, cooldown_s)

    @property
    def model_name(self) -> str:
        return str(self.inner.model_name)

    def chat(self, messages: list[dict[str, str]], *, max_tokens: int | None = None) -> str:
        return self.bounded.run(lambda: self.inner.chat(messages, max_tokens=max_tokens))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
