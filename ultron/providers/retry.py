"""Retries with exponential backoff for calls to remote providers."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from ultron.providers.base import ProviderError

logger = logging.getLogger(__name__)

T = TypeVar("T")

# No single wait longer than this, however many retries are configured: past it a caller is better
# served by the error than by a request thread parked for minutes.
MAX_BACKOFF_S = 30.0
# A provider that asks for a longer pause than this (Retry-After) is not retried in the call: the
# error (and its Retry-After) goes back to the caller.
MAX_RETRY_AFTER_S = 5.0


@dataclass(frozen=True)
class RetryPolicy:
    """`max_retries` extra attempts after the first, sleeping `base_delay * 2**attempt` s (capped) between."""

    max_retries: int = 2
    base_delay: float = 0.5

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.base_delay < 0:
            raise ValueError("max_retries and retry_base_delay must not be negative")

    def run(self, call: Callable[[], T]) -> T:
        """Run `call`, retrying only errors that may go away (timeouts, connection, 429, 5xx)."""
        for attempt in range(self.max_retries + 1):
            try:
                return call()
            except ProviderError as exc:
                if not exc.retryable or attempt == self.max_retries:
                    raise
                if exc.retry_after is not None and exc.retry_after > MAX_RETRY_AFTER_S:
                    raise
                delay = min(max(self.base_delay * 2**attempt, exc.retry_after or 0.0), MAX_BACKOFF_S)
                logger.warning(
                    "%s failed (%s, status %s); retry %d/%d in %.2fs",
                    exc.provider,
                    exc.kind,
                    exc.status_code,
                    attempt + 1,
                    self.max_retries,
                    delay,
                )
                time.sleep(delay)
        raise AssertionError("unreachable: the loop returns or raises")
