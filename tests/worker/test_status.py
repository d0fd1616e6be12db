"""`ultron worker --once`, `ultron worker status` and `GET /worker/status`."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.worker.conftest import add_memories, ingest_sessions
from ultron.api.app import create_app
from ultron.cli import main


def _cli_args(settings) -> list[str]:  # type: ignore[no-untyped-def]
    return ["--database-url", settings.database_url.get_secret_value(), "--embedding-provider", "hash"]


def test_worker_once_runs_a_full_cycle_and_status_shows_it(worker_hub, settings, capsys, monkeypatch):
    monkeypatch.setenv("ULTRON_REDACTION_ENABLED", "false")
    monkeypatch.setenv("ULTRON_INGEST_SEGMENT_INLINE", "false")
    hub = worker_hub()
    ingest_sessions(hub, 2)
    add_memories(hub, [{"hit_count": i, "last_hit_days": 1} for i in range(10)])
    assert main(["worker", *_cli_args(settings), "--once"]) == 0
    out = capsys.readouterr().out
    for step in ("segment", "score", "extract", "rebalance", "evolution", "consolidate"):
        assert step in out
    assert main(["worker", "status", *_cli_args(settings)]) == 0
    status = capsys.readouterr().out
    assert "recent runs:" in status and "rebalance" in status and "parked items:" in status


def test_http_worker_status_is_read_only_and_tenant_scoped(worker_hub):
    hub = worker_hub()
    ingest_sessions(hub, 1)
    with TestClient(create_app(hub, allow_open=True)) as client:
        body = client.get("/worker/status").json()
        assert [(q["queue"], q["ready"]) for q in body["queues"]] == [("segment", 1)]
        assert body["runs"] == [] and body["parked"] == []
        assert client.post("/worker/status").status_code == 405
        assert client.get("/worker/status?runs=0").status_code == 422


def test_bench_rebalance_prints_its_figures(pg_server_url, capsys):
    argv = ["bench", "rebalance", "--database-url", pg_server_url, "--sizes", "2000", "--repeat", "1"]
    assert main([*argv, "--dimension", "16"]) == 0
    out = capsys.readouterr().out
    assert "memories" in out and "cycle" in out
    assert out.strip().splitlines()[-1].split()[0] == "2000"
