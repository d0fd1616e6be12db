"""Read replicas against a real streaming replica (tests/db/replica_cluster.py): reads are served by the
standby, an agent reads its own writes while the standby lags, the dedup probe runs on the primary, and a
standby that goes down costs no request an error."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY
from sqlalchemy import text

from tests.db.replica_cluster import PRIMARY_PORT, REPLICA_PORT, ReplicaCluster
from ultron.api.app import create_app
from ultron.config import Settings
from ultron.hub import Hub
from ultron.memory.schemas import UploadRequest
from ultron.sdk._http import HttpBackend
from ultron.sdk._local import LocalBackend
from ultron.tenancy import create_agent


@pytest.fixture(scope="module")
def cluster() -> Iterator[ReplicaCluster]:
    c = ReplicaCluster()
    try:
        c.start()
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def hub(cluster: ReplicaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    settings = Settings(
        database_url=cluster.url(PRIMARY_PORT),
        database_replica_urls=f" {cluster.url(REPLICA_PORT)} ,",
        database_replica_cooldown_seconds=60,
        data_dir=Path(tmp_path_factory.mktemp("replicas")),
        embedding_provider="hash",
        llm_provider="heuristic",
        serendipity_enabled=False,
        # Routing is what is tested here; loading the redaction models alone would take ~14 s of the run.
        redaction_enabled=False,
    )
    hub = Hub.open(settings)  # migrates the primary; the standby follows
    try:
        yield hub
    finally:
        hub.close()


@pytest.fixture(scope="module")
def keys(hub: Hub) -> dict[str, str]:
    with hub.db.session() as s:
        return {name: create_agent(s, name, "acme")[1] for name in ("writer", "reader", "twin")}


@pytest.fixture(scope="module")
def client(hub: Hub) -> Iterator[TestClient]:
    with TestClient(create_app(hub, allow_open=False)) as c:
        yield c


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def primary_reads_for(reason: str) -> float:
    return REGISTRY.get_sample_value("ultron_db_reads_total", {"target": "primary", "reason": reason}) or 0.0


def served(hub: Hub) -> tuple[int, int]:
    """(reads the replica served, reads the primary served) so far."""
    return hub.db.replicas[0].reads, hub.db.primary_reads


def upload(client: TestClient, key: str, content: str, **extra: object) -> dict:
    r = client.post("/memories/upload", json={"content": content, **extra}, headers=auth(key))
    assert r.status_code in (200, 201), r.text
    return r.json()


def found(client: TestClient, key: str, query: str, memory_id: str) -> bool:
    r = client.post("/memories/search", json={"query": query, "limit": 20}, headers=auth(key))
    assert r.status_code == 200, r.text
    return memory_id in [hit["record"]["id"] for hit in r.json()["results"]]


def test_reads_are_served_by_the_standby(hub, client, keys, cluster):  # type: ignore[no-untyped-def]
    assert hub.db.read(lambda s: s.execute(text("SELECT pg_is_in_recovery()")).scalar()) is True
    with hub.db.session() as s:
        assert s.execute(text("SELECT pg_is_in_recovery()")).scalar() is False

    memory = upload(client, keys["writer"], "Kafka consumer lag grows when the partition count is too low")
    cluster.wait_replayed()
    replica_before, primary_before = served(hub)
    assert found(client, keys["reader"], "kafka consumer lag partitions", memory["record"]["id"])
    mid = memory["record"]["id"]
    reader = auth(keys["reader"])
    # Every endpoint routed to replicas: a write in any of them would fail on the read-only standby.
    for method, path, body in (
        ("GET", "/memories/stats", None),
        ("GET", f"/memories/{mid}", None),
        ("GET", f"/memories/{mid}/contributions", None),
        ("GET", f"/memories/{mid}/thread", None),
        ("GET", "/brief", None),
        ("GET", "/brief?task=kafka%20lag", None),
        ("GET", "/skills", None),
        ("POST", "/skills/search", {"query": "kafka"}),
        ("GET", "/skills/no-such-skill", None),
        ("GET", "/skills/no-such-skill/history", None),
        ("GET", "/skills/no-such-skill/SKILL.md", None),
        ("GET", "/skills/no-such-skill/archive.zip", None),
        ("GET", "/clusters", None),
        ("GET", "/clusters/00000000-0000-0000-0000-000000000000", None),
        ("GET", "/groups", None),
    ):
        r = client.request(method, path, json=body, headers=reader)
        assert r.status_code in (200, 404), (path, r.status_code, r.text)
    replica_after, primary_after = served(hub)
    assert replica_after - replica_before == 16  # the search and the fifteen reads above
    assert primary_after == primary_before
    # A read that writes is refused by the standby (what the routed endpoints above were checked against).
    with pytest.raises(Exception, match="read-only transaction"):
        hub.db.read(lambda s: s.execute(text("CREATE TEMP TABLE t (x int)")))


def test_an_agent_reads_its_own_writes_while_the_standby_lags(hub, client, keys, cluster):  # type: ignore[no-untyped-def]
    cluster.set_apply_delay("3s")
    own_before = primary_reads_for("own_write")
    try:
        for i in range(5):
            content = f"Release train {i}: the canary stage needs manual approval from team walrus{i}"
            replica_before, primary_before = served(hub)
            memory = upload(client, keys["writer"], content)
            assert memory["decision"] == "created"
            # The writer finds it at once (its read went to the primary: the standby has not replayed it)...
            assert found(client, keys["writer"], f"canary approval walrus{i}", memory["record"]["id"])
            assert served(hub)[1] == primary_before + 1
            # ...while an agent that wrote nothing reads the lagging standby, which does not have it yet.
            assert not found(client, keys["reader"], f"canary approval walrus{i}", memory["record"]["id"])
            assert served(hub)[0] == replica_before + 1
            # The dedup probe runs on the primary: a twin sent right after merges, the standby still lagging.
            twin = upload(client, keys["twin"], content + ".")
            assert twin["decision"].startswith("merged"), twin
            assert twin["record"]["id"] == memory["record"]["id"]
        assert primary_reads_for("own_write") == own_before + 5  # in /metrics
    finally:
        cluster.set_apply_delay(None)
    cluster.wait_replayed()
    # Once the standby has replayed the writer's last write, the writer's reads go back to it.
    replica_before, primary_before = served(hub)
    assert found(client, keys["writer"], "canary approval walrus4", memory["record"]["id"])
    assert served(hub) == (replica_before + 1, primary_before)


def test_the_in_process_sdk_and_mcp_route_reads_too(hub, cluster):  # type: ignore[no-untyped-def]
    """LocalBackend (the in-process SDK, and /mcp's backend): reads on the standby, its own writes seen."""
    writer = LocalBackend(hub, agent="sdk-writer", tenant="acme", owns_hub=False)
    reader = LocalBackend(hub, agent="sdk-reader", tenant="acme", owns_hub=False)
    cluster.wait_replayed()
    cluster.set_apply_delay("3s")
    try:
        replica_before, primary_before = served(hub)
        assert reader.stats().total >= 1
        assert served(hub) == (replica_before + 1, primary_before)
        result = writer.upload(
            UploadRequest(content="Nginx returns 413 until client_max_body_size is raised")
        )
        hits = writer.search("nginx 413 client_max_body_size", limit=10)
        assert result.record.id in [h.record.id for h in hits]
        assert served(hub) == (replica_before + 1, primary_before + 1)
    finally:
        cluster.set_apply_delay(None)


class Alternating(httpx.BaseTransport):
    """Sends each request to the next of several in-process apps: API processes behind a load balancer."""

    def __init__(self, *clients: TestClient):
        self.clients = clients
        self.sent = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        client = self.clients[self.sent % len(self.clients)]
        self.sent += 1
        r = client.request(request.method, request.url.path, content=request.read(), headers=request.headers)
        return httpx.Response(r.status_code, headers=r.headers, content=r.content)


def test_read_your_writes_across_api_processes(hub, client, keys, cluster):  # type: ignore[no-untyped-def]
    """Another API process knows nothing of this process's writers: the write's response names its WAL
    position, and a read that sends it back is served only by a replica that has replayed it."""
    other = Hub.open(hub.settings)
    try:
        with TestClient(create_app(other, allow_open=False)) as second:
            cluster.set_apply_delay("3s")
            try:
                r = client.post(
                    "/memories/upload",
                    json={"content": "Redis evicts keys at maxmemory"},
                    headers=auth(keys["writer"]),
                )
                written = r.headers["X-Ultron-Written-LSN"]
                mid = r.json()["record"]["id"]
                query = {"query": "redis evicts maxmemory", "limit": 20}
                plain = second.post("/memories/search", json=query, headers=auth(keys["writer"]))
                assert mid not in [h["record"]["id"] for h in plain.json()["results"]]  # the lagging standby
                carried = second.post(
                    "/memories/search",
                    json=query,
                    headers={**auth(keys["writer"]), "X-Ultron-Read-After": written},
                )
                assert mid in [h["record"]["id"] for h in carried.json()["results"]]
                bad = second.post(
                    "/memories/search",
                    json=query,
                    headers={**auth(keys["writer"]), "X-Ultron-Read-After": "x; drop"},
                )
                assert 400 <= bad.status_code < 500 and "X-Ultron-Read-After" in bad.text
                # The SDK's HTTP client carries the position by itself, whichever process answers.
                sdk = HttpBackend("http://hub", keys["writer"], transport=Alternating(client, second))
                for i in range(4):
                    made = sdk.upload(
                        UploadRequest(content=f"Celery worker {i} loses tasks on SIGKILL otter{i}")
                    )
                    hits = sdk.search(f"celery sigkill otter{i}", limit=10)
                    assert made.record.id in [h.record.id for h in hits]
            finally:
                cluster.set_apply_delay(None)
    finally:
        other.close()


def test_a_standby_that_goes_down_falls_back_to_the_primary(hub, client, keys, cluster, caplog):  # type: ignore[no-untyped-def]
    memory = upload(client, keys["writer"], "Terraform state lock stays held after a crashed apply run")
    cluster.wait_replayed()
    cluster.stop_server(cluster.replica)
    caplog.set_level(logging.WARNING, logger="ultron.db.engine")
    replica_before, primary_before = served(hub)
    failed_before = primary_reads_for("replica_failed")
    for _ in range(3):  # the first finds it down (and is re-run on the primary); the next skip it
        assert found(client, keys["reader"], "terraform state lock crashed apply", memory["record"]["id"])
        r = client.get("/memories/stats", headers=auth(keys["reader"]))
        assert r.status_code == 200
    assert served(hub) == (replica_before, primary_before + 6)
    assert hub.db.replicas[0].failures == 1
    assert primary_reads_for("replica_failed") == failed_before + 1  # then it rests: "no_replica"
    assert any("reads go to the primary" in rec.getMessage() for rec in caplog.records)
    # Back up and past its cooldown (shortened here), it serves reads again.
    cluster.start_server(cluster.replica, REPLICA_PORT)
    hub.db.replicas[0].down_until = 0.0
    assert found(client, keys["reader"], "terraform state lock crashed apply", memory["record"]["id"])
    assert served(hub) == (replica_before + 1, primary_before + 6)
