"""Which provider errors are retried, and how long the backoff waits."""

from __future__ import annotations

import pytest

from ultron.providers import retry
from ultron.providers.base import ProviderError
from ultron.providers.retry import MAX_BACKOFF_S, RetryPolicy


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        (ProviderError("p", "m", kind="timeout"), True),
        (ProviderError("p", "m", kind="connection"), True),
        (ProviderError("p", "m", kind="http", status_code=429), True),
        (ProviderError("p", "m", kind="http", status_code=503), True),
        (ProviderError("p", "m", kind="http", status_code=401), False),
        (ProviderError("p", "m", kind="http", status_code=400), False),
        (ProviderError("p", "m", kind="bad_payload"), False),
        (ProviderError("p", "m", kind="unavailable"), False),
    ],
)
def test_retryable_errors(error: ProviderError, retryable: bool) -> None:
    assert error.retryable is retryable


class _Flaky:
    """Fails with `error` for the first `failures` calls, then answers."""

    def __init__(self, error: ProviderError, failures: int) -> None:
        self.error, self.failures, self.calls = error, failures, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "answer"


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record backoff sleeps instead of waiting them out."""
    recorded: list[float] = []
    monkeypatch.setattr(retry.time, "sleep", recorded.append)
    return recorded


def test_backoff_doubles_then_succeeds(sleeps: list[float]) -> None:
    flaky = _Flaky(ProviderError("p", "m", kind="timeout"), failures=3)
    assert RetryPolicy(max_retries=3, base_delay=0.5).run(flaky) == "answer"
    assert sleeps == [0.5, 1.0, 2.0]


def test_backoff_is_capped(sleeps: list[float]) -> None:
    flaky = _Flaky(ProviderError("p", "m", kind="connection"), failures=99)
    with pytest.raises(ProviderError):
        RetryPolicy(max_retries=8, base_delay=1.0).run(flaky)
    assert flaky.calls == 9
    assert max(sleeps) == MAX_BACKOFF_S


def test_client_errors_are_not_retried(sleeps: list[float]) -> None:
    flaky = _Flaky(ProviderError("p", "m", kind="http", status_code=401), failures=1)
    with pytest.raises(ProviderError):
        RetryPolicy(max_retries=3, base_delay=0.5).run(flaky)
    assert flaky.calls == 1 and sleeps == []


def test_negative_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(max_retries=-1)
