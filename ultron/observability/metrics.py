"""Prometheus metrics: the series, the helpers that feed them, and the `/metrics` exposition.

Metrics are per process by default: scrape every API process (each pod) on its own `/metrics`. Processes
that share a host and a directory can instead share one view: set `PROMETHEUS_MULTIPROC_DIR` to an empty
directory writable by all of them *before* they start, and any API process's `/metrics` then sums every
process's counters and histograms (the worker's included). See docs/operations.md.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy.orm import Session

log = logging.getLogger(__name__)

# Seconds. HTTP and provider calls span a 2 ms cache hit to a 60 s LLM timeout; worker steps run longer.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
STEP_BUCKETS = (0.01, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0)

HTTP_REQUESTS = Counter(
    "ultron_http_requests",
    "HTTP requests served, by route template and status",
    ["method", "route", "status"],
)
HTTP_LATENCY = Histogram(
    "ultron_http_request_duration_seconds",
    "HTTP request latency by route template",
    ["method", "route"],
    buckets=LATENCY_BUCKETS,
)
MEMORY_UPLOADS = Counter("ultron_memory_uploads", "Memory uploads stored, by decision", ["decision"])
MEMORY_MERGES = Counter(
    "ultron_memory_merges", "Uploads merged into an existing memory, by how it was decided", ["decision"]
)
MEMORY_SEARCHES = Counter("ultron_memory_searches", "Memory searches answered")
MEMORY_OPERATION_LATENCY = Histogram(
    "ultron_memory_operation_duration_seconds",
    "Time inside the memory service (embedding, locking and SQL included)",
    ["operation"],
    buckets=LATENCY_BUCKETS,
)
WORKER_STEP_LATENCY = Histogram(
    "ultron_worker_step_duration_seconds", "Worker step durations", ["step"], buckets=STEP_BUCKETS
)
WORKER_STEP_FAILURES = Counter("ultron_worker_step_failures", "Worker steps that raised", ["step"])
PROVIDER_LATENCY = Histogram(
    "ultron_provider_call_duration_seconds",
    "Embedding and chat provider calls (retries included)",
    ["provider", "operation"],
    buckets=LATENCY_BUCKETS,
)
PROVIDER_ERRORS = Counter(
    "ultron_provider_errors",
    "Provider calls that failed after their retries",
    ["provider", "operation", "kind"],
)
DB_READS = Counter(
    "ultron_db_reads",
    "Read-only requests by the server that answered: a replica, or the primary and why (no replica "
    "configured or up, the agent's own recent write not replayed yet, a replica that failed mid-read)",
    ["target", "reason"],
)

# The series `/metrics` must always expose (tests/ops check them); labelled series appear once used.
SERIES = (
    "ultron_http_requests_total",
    "ultron_http_request_duration_seconds",
    "ultron_memory_uploads_total",
    "ultron_memory_merges_total",
    "ultron_memory_searches_total",
    "ultron_memory_operation_duration_seconds",
    "ultron_worker_step_duration_seconds",
    "ultron_worker_step_failures_total",
    "ultron_queue_depth",
    "ultron_provider_call_duration_seconds",
    "ultron_provider_errors_total",
    "ultron_db_reads_total",
)

# A probe returns one depth (reported under its own name) or a depth per queue (one query, many queues).
QueueProbe = Callable[[Session], "int | Mapping[str, int]"]
_queue_probes: dict[str, QueueProbe] = {}


def register_queue_probe(name: str, probe: QueueProbe) -> None:
    """Report `probe(session)` as `ultron_queue_depth{queue=...}` at every scrape (e.g. pending jobs)."""
    _queue_probes[name] = probe


def queue_probes() -> dict[str, QueueProbe]:
    return dict(_queue_probes)


# --- feeding the series --------------------------------------------------------------------------


def record_upload(decision: str, seconds: float | None = None) -> None:
    """Count a stored upload; time it unless it was one item of a batch (seconds None)."""
    MEMORY_UPLOADS.labels(decision).inc()
    if decision != "created":
        MEMORY_MERGES.labels(decision).inc()
    if seconds is not None:
        MEMORY_OPERATION_LATENCY.labels("upload").observe(seconds)


def record_search(seconds: float) -> None:
    MEMORY_SEARCHES.inc()
    MEMORY_OPERATION_LATENCY.labels("search").observe(seconds)


F = TypeVar("F", bound=Callable[..., Any])


def counts_upload(fn: F) -> F:
    """Decorates MemoryService.upload: counts each stored upload by its decision, and times it."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        record_upload(str(result.decision), time.perf_counter() - start)
        return result

    return wrapper  # type: ignore[return-value]


def counts_search(fn: F) -> F:
    """Decorates MemoryService.search: counts and times each answered search."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        record_search(time.perf_counter() - start)
        return result

    return wrapper  # type: ignore[return-value]


def record_worker_step(step: str, seconds: float, *, failed: bool) -> None:
    """One worker step ran for `seconds`; `failed` when it (or an item inside it) failed."""
    WORKER_STEP_LATENCY.labels(step).observe(seconds)
    if failed:
        WORKER_STEP_FAILURES.labels(step).inc()


@contextmanager
def worker_step(step: str) -> Iterator[None]:
    """Time one worker step; a step that raises counts as a failure (and still re-raises)."""
    start = time.perf_counter()
    try:
        yield
    except BaseException:
        WORKER_STEP_FAILURES.labels(step).inc()
        raise
    finally:
        WORKER_STEP_LATENCY.labels(step).observe(time.perf_counter() - start)


# --- exposition ----------------------------------------------------------------------------------


class QueueDepthCollector(Collector):
    """`ultron_queue_depth{queue}`, read at scrape time: probes over the database plus in-process ones."""

    def __init__(self, session: Session | None, local: dict[str, int]):
        self.session = session
        self.local = local

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("ultron_queue_depth", "Items waiting to be processed", labels=["queue"])
        for queue, depth in self.local.items():
            family.add_metric([queue], depth)
        if self.session is not None:
            for name, probe in queue_probes().items():
                try:
                    with self.session.begin_nested():  # a failing probe must not spoil the next one
                        probed = probe(self.session)
                except Exception:  # a broken probe must not take the whole scrape down
                    log.exception("queue probe %s failed", name)
                    continue
                for queue, n in probed.items() if isinstance(probed, Mapping) else [(name, probed)]:
                    family.add_metric([queue], n)
        yield family


def _process_registry() -> CollectorRegistry:
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return REGISTRY

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return registry


def render(session: Session | None = None, local_queues: dict[str, int] | None = None) -> tuple[bytes, str]:
    """The exposition text for `/metrics` and its content type."""
    queues = CollectorRegistry()
    queues.register(QueueDepthCollector(session, local_queues or {}))
    return generate_latest(_process_registry()) + generate_latest(queues), CONTENT_TYPE_LATEST


def serve(port: int, host: str = "0.0.0.0") -> None:
    """A standalone `/metrics` listener for processes without an HTTP API (the worker)."""
    start_http_server(port, addr=host, registry=_process_registry())
