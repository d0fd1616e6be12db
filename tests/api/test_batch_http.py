"""POST /memories/upload-batch over HTTP: per-item results, the batch limit, tenant scoping, the SDK and
the CLI's JSON Lines upload."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from ultron.api.app import create_app
from ultron.db.models import Memory
from ultron.errors import ValidationFailed
from ultron.memory.schemas import MAX_BATCH_ITEMS
from ultron.sdk import UltronClient
from ultron.tenancy import create_agent

ITEM = {"content": "Redis connection refused after restart", "resolution": "wait for the healthcheck"}


@pytest.fixture()
def keys(hub):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return {name: create_agent(s, name, tenant)[1] for name, tenant in (("a1", "acme"), ("b1", "globex"))}


@pytest.fixture()
def client(hub):  # type: ignore[no-untyped-def]
    with TestClient(create_app(hub, allow_open=False)) as c:
        yield c


def _count(hub) -> int:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return s.execute(select(func.count()).select_from(Memory)).scalar_one()


def test_batch_results_in_order_with_refusals(client, keys, hub):
    items = [ITEM, {"content": ""}, ITEM, {"content": "call +1 415 555 0100 about the invoice"}, "text"]
    r = client.post(
        "/memories/upload-batch", json={"items": items}, headers={"Authorization": f"Bearer {keys['a1']}"}
    )
    assert r.status_code == 422  # an item that is not an object fails the request's own schema
    r = client.post(
        "/memories/upload-batch", json={"items": items[:4]}, headers={"Authorization": f"Bearer {keys['a1']}"}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert [x["decision"] for x in body["results"]] == ["created", "refused", "merged", "created"]
    assert (body["created"], body["merged"], body["refused"]) == (2, 1, 1)
    assert body["results"][2]["memory_id"] == body["results"][0]["memory_id"]
    assert "content" in body["results"][1]["reason"]
    stored = client.get(
        f"/memories/{body['results'][3]['memory_id']}", headers={"Authorization": f"Bearer {keys['a1']}"}
    ).json()
    assert "555" not in stored["content"] and stored["redacted_entities"] == {"PHONE_NUMBER": 1}
    # Another tenant's batch never merges into acme's memories.
    other = client.post(
        "/memories/upload-batch", json={"items": [ITEM]}, headers={"Authorization": f"Bearer {keys['b1']}"}
    ).json()
    assert other["results"][0]["decision"] == "created"


def test_batch_limits_are_4xx_and_store_nothing(client, keys, hub):
    headers = {"Authorization": f"Bearer {keys['a1']}"}
    too_many = {"items": [ITEM] * (MAX_BATCH_ITEMS + 1)}
    assert client.post("/memories/upload-batch", json=too_many, headers=headers).status_code == 422
    assert client.post("/memories/upload-batch", json={"items": []}, headers=headers).status_code == 422
    assert client.post("/memories/upload-batch", json={"items": [ITEM]}).status_code == 401
    assert _count(hub) == 0


def test_sdk_over_http_and_cli_jsonl(client, keys, hub, tmp_path, monkeypatch, capsys):
    sdk = UltronClient(base_url="http://testserver", api_key=keys["a1"])
    # The HTTP backend on the app in-process (the shared venv's TestClient transport does not mix with
    # a plain httpx.Client: tests/api/test_http.py's SDK test fails the same way).
    client.headers["Authorization"] = f"Bearer {keys['a1']}"
    sdk._backend._http = client
    result = sdk.upload_batch([ITEM, {"content": "pip install fails behind the proxy"}])
    assert [r.decision for r in result.results] == ["created", "created"]
    with pytest.raises(ValidationFailed):
        sdk.upload_batch([])

    from ultron.cli import main

    lines = [json.dumps(ITEM), "", "not json", json.dumps({"content": "  "}), json.dumps(["a list"])]
    lines += [json.dumps({"content": f"flaky test number {i} in the billing suite"}) for i in range(3)]
    path = tmp_path / "memories.jsonl"
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr("ultron.cli.memory.BATCH_ITEMS", 2)  # several requests for one file
    monkeypatch.setattr("ultron.cli._sdk", lambda args: sdk)
    code = main(["memory", "upload-batch", str(path)])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert (out["created"], out["merged"], out["refused"]) == (3, 1, 3)
    assert [r["line"] for r in out["refusals"]] == [3, 4, 5]
