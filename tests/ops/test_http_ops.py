"""/ready tracks the migrations, /metrics exposes the named series, every response carries a request id."""

from __future__ import annotations

import json
import logging

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from ultron.api.app import create_app
from ultron.db.migrate import current_revision, downgrade, head_revision, upgrade_to_head
from ultron.observability import metrics
from ultron.observability.logs import JsonFormatter, RequestIdFilter, logging_config
from ultron.providers.base import ProviderError
from ultron.providers.instrumented import InstrumentedChat


@pytest.fixture()
def client(hub):  # type: ignore[no-untyped-def]
    with TestClient(create_app(hub, allow_open=True)) as c:
        yield c


def samples(client: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(data: dict, name: str, **labels: str) -> float:  # type: ignore[type-arg]
    return data.get((name, tuple(sorted(labels.items()))), 0.0)


def test_ready_is_503_while_migrations_are_behind_and_200_at_head(hub, client):
    assert client.get("/health").status_code == 200
    r = client.get("/ready")
    assert r.status_code == 200 and r.json()["revision"] == head_revision()

    downgrade(hub.db.engine, "-1")
    behind = current_revision(hub.db.engine)
    assert behind != head_revision()
    r = client.get("/ready")
    assert r.status_code == 503
    assert r.json()["error"] == "not_ready" and str(behind) in r.json()["detail"]
    # Alive is not ready: the process still answers its liveness probe.
    assert client.get("/health").status_code == 200

    upgrade_to_head(hub.db.engine)
    assert client.get("/ready").status_code == 200


def test_ready_is_503_when_the_database_is_gone(hub, client, pg_server_url):
    import psycopg

    from tests.conftest import _libpq

    name = hub.db.engine.url.database
    hub.db.engine.dispose()
    with psycopg.connect(_libpq(pg_server_url), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")
    r = client.get("/ready")
    assert r.status_code == 503 and r.json()["detail"] == "the database is unreachable"
    # /metrics keeps answering without its database-backed queue depths.
    assert client.get("/metrics").status_code == 200


def test_metrics_expose_every_named_series_and_count_what_happens(client, monkeypatch):
    before = samples(client)
    up = {"content": "pytest: fixture 'db' not found", "resolution": "add conftest.py with the fixture"}
    assert client.post("/memories/upload", json=up).json()["decision"] == "created"
    assert client.post("/memories/upload", json=up).json()["decision"] == "merged"
    assert client.post("/memories/search", json={"query": "fixture not found"}).status_code == 200
    assert client.post("/memories/search", json={"query": ""}).status_code == 422
    with metrics.worker_step("rebalance"):
        pass
    with pytest.raises(RuntimeError), metrics.worker_step("segment"):
        raise RuntimeError("boom")
    # Registered for this test only (monkeypatch restores the registry).
    monkeypatch.setitem(metrics._queue_probes, "broken", lambda s: s.execute(text("SELECT 1/0")).scalar())
    monkeypatch.setitem(metrics._queue_probes, "test_queue", lambda s: 7)

    after = samples(client)
    names = {name for name, _ in after} | {
        f.name for f in text_string_to_metric_families(client.get("/metrics").text)
    }
    for series in metrics.SERIES:
        assert any(
            n == series or n.startswith(series + "_") or n == series.removesuffix("_total") for n in names
        ), series

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("ultron_memory_uploads_total", decision="created") == 1
    assert delta("ultron_memory_uploads_total", decision="merged") == 1
    assert delta("ultron_memory_merges_total", decision="merged") == 1
    assert delta("ultron_memory_searches_total") == 1
    route = {"method": "POST", "route": "/memories/search"}
    assert delta("ultron_http_requests_total", status="200", **route) == 1
    assert delta("ultron_http_requests_total", status="422", **route) == 1
    assert delta("ultron_http_request_duration_seconds_count", **route) == 2
    assert delta("ultron_worker_step_duration_seconds_count", step="segment") == 1
    assert delta("ultron_worker_step_failures_total", step="segment") == 1
    assert delta("ultron_worker_step_failures_total", step="rebalance") == 0
    assert value(after, "ultron_queue_depth", queue="test_queue") == 7
    assert ("ultron_queue_depth", (("queue", "search_hits"),)) in after
    assert "worker" in metrics.queue_probes()  # the worker's queues, read with its queue_depths SQL
    # Hash embeddings are computed in-process, yet still timed as provider calls; the repeated upload's
    # vector comes from the embedding cache (ultron/providers/cache.py), which calls no provider.
    assert delta("ultron_provider_call_duration_seconds_count", provider="hash", operation="embed") >= 2


def test_unmatched_paths_share_one_label(client):
    client.get("/no/such/path/1")
    client.get("/no/such/path/2")
    routes = {
        dict(labels).get("route")
        for (name, labels) in samples(client)
        if name == "ultron_http_requests_total"
    }
    assert "unmatched" in routes and not any(r and r.startswith("/no/such") for r in routes)


def test_provider_errors_are_counted_by_kind():
    class Down:
        model_name = "fake:down"

        def chat(self, messages, *, max_tokens=None):  # type: ignore[no-untyped-def]
            raise ProviderError("fake", "connection refused", kind="connection")

    chat = InstrumentedChat(Down(), "fake")
    counter = metrics.PROVIDER_ERRORS.labels("fake", "chat", "connection")
    before = counter._value.get()
    with pytest.raises(ProviderError):
        chat.chat([{"role": "user", "content": "hi"}])
    assert counter._value.get() == before + 1
    assert chat.model_name == "fake:down"


def test_request_id_is_echoed_or_minted(client):
    r = client.get("/health", headers={"X-Request-ID": "abc-123"})
    assert r.headers["x-request-id"] == "abc-123"
    minted = client.get("/health").headers["x-request-id"]
    assert len(minted) == 32 and minted != client.get("/health").headers["x-request-id"]
    # A header that could forge log lines is replaced, not echoed.
    for forged in ('x" level="ERROR', "a" * 200):
        r = client.get("/health", headers={"X-Request-ID": forged})
        assert r.headers["x-request-id"] != forged and len(r.headers["x-request-id"]) == 32


def test_access_log_is_json_with_the_request_id(client, caplog):
    caplog.set_level(logging.INFO, logger="ultron.access")
    client.get("/health", headers={"X-Request-ID": "trace-42"})
    record = next(r for r in caplog.records if r.name == "ultron.access")
    line = json.loads(JsonFormatter().format(record))
    assert line["request_id"] == "trace-42" and line["route"] == "/health" and line["status"] == 200
    assert line["level"] == "INFO" and line["ts"].endswith("+00:00") and "duration_ms" in line


def test_logging_config_is_valid_for_both_formats():
    import logging.config

    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        for json_logs in (True, False):
            logging.config.dictConfig(logging_config("DEBUG", json_logs))
            assert logging.getLogger("uvicorn.access").propagate is False
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])


def test_log_records_inside_a_request_carry_its_id(hub):
    app = create_app(hub, allow_open=True)
    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(JsonFormatter().format(record))

    @app.get("/_probe")
    def probe() -> dict[str, str]:
        logging.getLogger("ultron.test").warning("inside the handler")
        return {}

    handler = Collect()
    handler.addFilter(RequestIdFilter())
    logger = logging.getLogger("ultron.test")
    logger.addHandler(handler)
    try:
        with TestClient(app) as c:
            c.get("/_probe", headers={"X-Request-ID": "req-7"})
    finally:
        logger.removeHandler(handler)
    line = json.loads(seen[0])
    assert line["message"] == "inside the handler" and line["request_id"] == "req-7"


def test_multiprocess_mode_sums_every_process(tmp_path):
    """With PROMETHEUS_MULTIPROC_DIR, one process's /metrics shows the others' counters too."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    bump = "from ultron.observability import metrics; metrics.record_upload('created', 0.01)"
    for _ in range(2):
        subprocess.run([sys.executable, "-c", bump], env=env, check=True, timeout=60)
    show = "from ultron.observability import metrics; print(metrics.render()[0].decode())"
    out = subprocess.run(
        [sys.executable, "-c", show], env=env, check=True, timeout=60, capture_output=True, text=True
    ).stdout
    totals = {
        s.name: s.value
        for f in text_string_to_metric_families(out)
        for s in f.samples
        if s.labels.get("decision") == "created"
    }
    assert totals["ultron_memory_uploads_total"] == 2


def test_worker_steps_and_the_standalone_listener():
    """What the worker records is visible on its own metrics port (it has no HTTP API)."""
    import socket

    import httpx

    metrics.record_worker_step("extract", 0.5, failed=True)
    metrics.record_worker_step("extract", 0.1, failed=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    metrics.serve(port, "127.0.0.1")
    text_ = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    found = {
        (s.name, s.labels.get("step")): s.value
        for f in text_string_to_metric_families(text_)
        for s in f.samples
        if s.labels.get("step") == "extract"
    }
    assert found[("ultron_worker_step_duration_seconds_count", "extract")] >= 2
    assert found[("ultron_worker_step_failures_total", "extract")] >= 1
