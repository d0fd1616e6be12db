"""The ingestion HTTP API: multipart and JSON ingest, 413s, text, sessions/segments, imports, tenancy."""

from __future__ import annotations

import base64
import time

import pytest
from fastapi.testclient import TestClient

from tests.ingestion.conftest import SESSIONS
from ultron.api.app import create_app
from ultron.tenancy import create_agent


@pytest.fixture()
def keys(hub):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return {name: create_agent(s, name, tenant)[1] for name, tenant in (("a1", "acme"), ("b1", "globex"))}


@pytest.fixture()
def client(hub):  # type: ignore[no-untyped-def]
    with TestClient(create_app(hub, allow_open=False)) as c:
        yield c


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_multipart_ingest_then_sessions_and_segments_with_metrics(client, keys):
    files = [
        ("files", ("multi_task.jsonl", (SESSIONS / "multi_task.jsonl").read_bytes(), "application/jsonl")),
        (
            "files",
            ("codex_rollout.jsonl", (SESSIONS / "codex_rollout.jsonl").read_bytes(), "application/jsonl"),
        ),
    ]
    r = client.post("/ingest", files=files, headers=auth(keys["a1"]))
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["total_files"], body["successful"], body["new_segments"]) == (2, 2, 4)

    processed = client.post("/trajectory/process", json={"limit": 50}, headers=auth(keys["a1"])).json()
    assert processed["scored"] == 4 and processed["failed"] == 0

    sessions = client.get("/sessions", headers=auth(keys["a1"])).json()
    assert {s["source"] for s in sessions} == {"multi_task.jsonl", "codex_rollout.jsonl"}
    multi = next(s for s in sessions if s["source"] == "multi_task.jsonl")
    detail = client.get(f"/sessions/{multi['id']}", headers=auth(keys["a1"])).json()
    assert len(detail["segments"]) == 3 and detail["session"]["memories"] >= 1
    first = detail["segments"][0]
    assert first["metrics"]["completion"]["value"] == 1.0 and first["memory_ids"]
    assert client.get(f"/segments/{first['id']}", headers=auth(keys["a1"])).json()["score"] == first["score"]
    messages = client.get(f"/sessions/{multi['id']}/messages?limit=2", headers=auth(keys["a1"])).json()
    assert [m["seq"] for m in messages] == [0, 1]

    again = client.post(f"/segments/{first['id']}/reprocess", headers=auth(keys["a1"])).json()
    assert again["stage"] == "score"
    assert client.post(f"/sessions/{multi['id']}/reprocess", headers=auth(keys["a1"])).json()[
        "needs_segmentation"
    ]

    # Another tenant sees none of it.
    assert client.get("/sessions", headers=auth(keys["b1"])).json() == []
    assert client.get(f"/sessions/{multi['id']}", headers=auth(keys["b1"])).status_code == 404
    assert client.get(f"/segments/{first['id']}", headers=auth(keys["b1"])).status_code == 404


def test_json_ingest_with_text_and_base64_contents(client, keys):
    data = (SESSIONS / "anthropic_blocks.jsonl").read_bytes()
    payload = {
        "files": [
            {"name": "a.jsonl", "content": data.decode()},
            {"name": "b.jsonl", "content_base64": base64.b64encode(data).decode()},
        ]
    }
    body = client.post("/ingest", json=payload, headers=auth(keys["a1"])).json()
    assert [f["status"] for f in body["results"]] == ["created", "created"]
    bad = client.post(
        "/ingest", json={"files": [{"name": "x", "content_base64": "%%%"}]}, headers=auth(keys["a1"])
    )
    assert bad.status_code == 422 and bad.json()["error"] == "validation_error"
    broken = client.post(
        "/ingest", content=b"{nope", headers={**auth(keys["a1"]), "content-type": "application/json"}
    )
    assert broken.status_code == 422


def test_oversized_ingest_is_a_413_not_a_crash(make_hub, keys):
    hub = make_hub(ingest_max_file_bytes=4096, max_request_bytes=64 * 1024)
    with TestClient(create_app(hub, allow_open=False)) as client:
        big = {"files": [{"name": "big.jsonl", "content": "x" * 8000}]}
        r = client.post("/ingest", json=big, headers=auth(keys["a1"]))
        assert r.status_code == 413 and r.json()["error"] == "payload_too_large"
        huge = {"files": [{"name": "huge.jsonl", "content": "x" * 100_000}]}
        assert client.post("/ingest", json=huge, headers=auth(keys["a1"])).status_code == 413
        assert client.get("/sessions", headers=auth(keys["a1"])).json() == []


def test_ingest_text_extracts_and_uploads(client, keys):
    text = (
        "Docker troubleshooting:\n"
        "1. pip install inside the container failed: Could not find a version that satisfies numpy\n"
        "2. Cause: the build container had no network access\n"
        "3. Fix: configure the proxy build args or build with --network host\n"
    )
    r = client.post("/ingest/text", json={"text": text}, headers=auth(keys["a1"]))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["memories_extracted"] >= 1 and body["memories_uploaded"] == len(body["memories"])
    assert client.post("/ingest/text", json={"text": ""}, headers=auth(keys["a1"])).status_code == 422


def _wait_done(client, key, job_id):  # type: ignore[no-untyped-def]
    for _ in range(200):
        status = client.get(f"/imports/{job_id}", headers=auth(key)).json()
        if status["status"] != "running":
            return status
        time.sleep(0.05)
    raise AssertionError("import did not finish")


def test_import_start_status_review_over_http(client, keys):
    files = {"file": ("conversations.json", (SESSIONS / "chatgpt_conversations.json").read_bytes())}
    r = client.post("/imports", data={"kind": "chatgpt"}, files=files, headers=auth(keys["a1"]))
    assert r.status_code == 202, r.text
    job = r.json()
    assert job["total"] == 2
    status = _wait_done(client, keys["a1"], job["id"])
    assert (status["status"], status["done"], status["progress"]) == ("done", 2, 1.0)
    assert [j["id"] for j in client.get("/imports", headers=auth(keys["a1"])).json()] == [job["id"]]
    items = client.get(f"/imports/{job['id']}/review", headers=auth(keys["a1"])).json()
    assert len(items) == 2
    outcome = client.post(
        f"/imports/{job['id']}/review", json={"approve": [items[0]["item_id"]]}, headers=auth(keys["a1"])
    ).json()
    assert outcome["approved"] == 1
    assert client.post(f"/imports/{job['id']}/pause", headers=auth(keys["a1"])).status_code == 409
    assert client.get(f"/imports/{job['id']}", headers=auth(keys["b1"])).status_code == 404

    text_job = client.post(
        "/imports",
        json={"kind": "text", "name": "chat.txt", "content": (SESSIONS / "chat.txt").read_text()},
        headers=auth(keys["a1"]),
    )
    assert text_job.status_code == 202
    assert _wait_done(client, keys["a1"], text_job.json()["id"])["done"] == 2
    unknown = client.post("/imports", json={"kind": "icq", "content": "x"}, headers=auth(keys["a1"]))
    assert unknown.status_code == 422
