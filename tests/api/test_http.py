"""The HTTP API: auth, tenant isolation on every endpoint, typed errors, and the SDK over HTTP."""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from ultron.api.app import create_app
from ultron.db.models import Memory, MemoryContribution
from ultron.errors import Forbidden, NotFound, Unauthorized, ValidationFailed
from ultron.sdk import UltronClient
from ultron.tenancy import create_agent, revoke_agent

PANDAS = {
    "content": "ModuleNotFoundError: No module named 'pandas'",
    "context": "Docker container",
    "resolution": "pip install pandas",
    "tags": ["python"],
}


@pytest.fixture()
def keys(hub):  # type: ignore[no-untyped-def]
    out = {}
    with hub.db.session() as s:
        for name, tenant, admin in (
            ("a1", "acme", False),
            ("a2", "acme", False),
            ("admin", "acme", True),
            ("b1", "globex", False),
        ):
            out[name] = create_agent(s, name, tenant, admin=admin)[1]
    return out


@pytest.fixture()
def client(hub):  # type: ignore[no-untyped-def]
    with TestClient(create_app(hub, allow_open=False)) as c:
        yield c


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def stored(hub) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return (
            s.execute(select(func.count()).select_from(Memory)).scalar_one(),
            s.execute(select(func.count()).select_from(MemoryContribution)).scalar_one(),
        )


def test_health(client):
    r = client.get("/health")
    assert r.status_code == 200 and r.json()["database"] == "ok"


def test_missing_bad_and_revoked_keys_are_401(hub, client, keys):
    assert client.post("/memories/search", json={"query": "x"}).status_code == 401
    r = client.post("/memories/search", json={"query": "x"}, headers=auth("ult_wrong"))
    assert r.status_code == 401 and r.json()["error"] == "unauthorized"
    assert client.get("/memories/stats", headers={"Authorization": "Basic abc"}).status_code == 401
    with hub.db.session() as s:
        revoke_agent(s, "a2", "acme")
    r = client.post("/memories/search", json={"query": "x"}, headers=auth(keys["a2"]))
    assert r.status_code == 401 and "revoked" in r.json()["detail"]


def test_only_the_contributor_or_an_admin_may_change_a_memory(client, keys):
    created = client.post("/memories/upload", json=PANDAS, headers=auth(keys["a1"]))
    assert created.status_code == 201
    mid = created.json()["record"]["id"]
    r = client.patch(f"/memories/{mid}", json={"pinned": True}, headers=auth(keys["a2"]))
    assert r.status_code == 403 and r.json()["error"] == "forbidden"
    assert client.delete(f"/memories/{mid}", headers=auth(keys["a2"])).status_code == 403
    assert client.patch(f"/memories/{mid}", json={"pinned": True}, headers=auth(keys["admin"])).json()[
        "pinned"
    ]
    assert client.delete(f"/memories/{mid}", headers=auth(keys["a1"])).status_code == 204
    assert client.get(f"/memories/{mid}", headers=auth(keys["a1"])).status_code == 404


def test_tenant_b_never_sees_tenant_a(client, keys):
    a = auth(keys["a1"])
    b = auth(keys["b1"])
    mid = client.post("/memories/upload", json=PANDAS, headers=a).json()["record"]["id"]
    # Same text in tenant B is a separate memory, not a merge into A's.
    b_upload = client.post("/memories/upload", json=PANDAS, headers=b).json()
    assert b_upload["decision"] == "created" and b_upload["record"]["id"] != mid

    results = client.post("/memories/search", json={"query": "pandas module"}, headers=b).json()["results"]
    assert [r["record"]["id"] for r in results] == [b_upload["record"]["id"]]
    assert client.post("/memories/details", json={"ids": [mid]}, headers=b).status_code == 404
    assert client.get(f"/memories/{mid}", headers=b).status_code == 404
    assert client.get(f"/memories/{mid}/contributions", headers=b).status_code == 404
    assert client.get(f"/memories/{mid}/thread", headers=b).status_code == 404
    assert client.patch(f"/memories/{mid}", json={"tags": ["x"]}, headers=b).status_code == 404
    assert client.delete(f"/memories/{mid}", headers=b).status_code == 404
    stats_b = client.get("/memories/stats", headers=b).json()
    assert stats_b["total"] == 1 and stats_b["contributions"] == 1
    # A's memory is untouched by all of that.
    rec = client.get(f"/memories/{mid}", headers=a).json()
    assert rec["tags"] == ["python"] and rec["hit_count"] == 0


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/memories/upload", {"content": ""}, 422),
        ("/memories/upload", {"content": "   "}, 422),
        ("/memories/upload", {"context": "no content"}, 422),
        ("/memories/upload", {"content": "x", "memory_type": "error"}, 422),  # callers cannot set the type
        ("/memories/upload", {"content": "x" * 20_001}, 422),
        ("/memories/upload", {"content": "x", "tags": ["t" * 65]}, 422),
        ("/memories/upload", {"content": "x", "occurred_at": "2026-01-01T00:00:00"}, 422),  # no timezone
        ("/memories/upload", {"content": "x", "position": -1}, 422),
        ("/memories/search", {"query": "x", "min_relevance": 2}, 422),
        ("/memories/search", {"query": ""}, 422),
        ("/memories/search", {"query": "x", "detail_level": "full"}, 422),
        ("/memories/search", {"query": "x", "limit": 0}, 422),
        ("/memories/details", {"ids": []}, 422),
        ("/memories/details", {"ids": ["not-a-uuid"]}, 422),
        ("/memories/details", {"ids": [str(uuid.uuid4())]}, 404),
    ],
)
def test_bad_input_is_4xx_with_a_typed_body_and_stores_nothing(hub, client, keys, path, body, status):
    r = client.post(path, json=body, headers=auth(keys["a1"]))
    assert r.status_code == status, r.text
    assert set(r.json()) == {"error", "detail"} and r.json()["detail"]
    assert stored(hub) == (0, 0)


def test_malformed_json_and_oversized_body(hub, client, keys):
    headers = {**auth(keys["a1"]), "Content-Type": "application/json"}
    r = client.post("/memories/upload", content=b'{"content": "x",', headers=headers)
    assert r.status_code == 400 and r.json()["error"] == "malformed_json"
    big = b'{"content": "' + b"x" * (hub.settings.max_request_bytes + 1) + b'"}'
    r = client.post("/memories/upload", content=big, headers=headers)
    assert r.status_code == 413 and r.json()["error"] == "payload_too_large"
    assert client.get("/memories/not-a-uuid", headers=auth(keys["a1"])).status_code == 422
    assert stored(hub) == (0, 0)


def test_open_mode_on_loopback_until_a_key_exists(hub):
    with TestClient(create_app(hub, allow_open=True)) as c:
        r = c.post("/memories/upload", json=PANDAS)
        assert r.status_code == 201 and r.json()["record"]["agent"] == "local"
        with hub.db.session() as s:
            create_agent(s, "first", "default")
        c.app.state.auth._checked_at = 0.0  # skip the cache so the test does not wait for it
        assert c.post("/memories/search", json={"query": "pandas"}).status_code == 401


def test_sdk_over_http_has_the_same_results_and_errors(hub, keys):
    app = create_app(hub)
    with TestClient(app) as tc:
        client = UltronClient("http://testserver", keys["a1"], transport=tc._transport)
        rec = client.upload_memory(**PANDAS)
        assert rec.memory_type == "error" and rec.tier == "warm" and rec.status == "active"
        results = client.search_memories("pandas module", detail_level="l1")
        assert results[0].record.id == rec.id and results[0].similarity_score > 0
        assert results[0].record.content == ""
        hub.hits.flush()
        assert client.get_memory_details([rec.id])[0].hit_count == 3
        assert client.get_memory_stats().total == 1
        with pytest.raises(NotFound):
            client.get_memory(uuid.uuid4())
        with pytest.raises(ValidationFailed):
            client.search_memories("x", detail_level="full")
        other = UltronClient("http://testserver", keys["a2"], transport=tc._transport)
        with pytest.raises(Forbidden):
            other.delete_memory(rec.id)
        with pytest.raises(Unauthorized):
            UltronClient("http://testserver", "ult_nope", transport=tc._transport).get_memory_stats()


def test_sdk_familiar_names_add_search_get_update_delete(hub, keys):
    """`add`/`search`/`get`/`update`/`delete` work end to end, in-process and over HTTP alike."""
    from ultron.sdk import Ultron

    with TestClient(create_app(hub)) as tc:
        remote = UltronClient("http://testserver", keys["a1"], transport=tc._transport)
        local = Ultron(hub=hub, agent="a2", tenant="acme")
        for client, text in ((remote, "pandas"), (local, "numpy")):
            rec = client.add(
                f"ModuleNotFoundError: No module named '{text}'", resolution=f"pip install {text}"
            )
            assert client.search(f"{text} module")[0].record.id == rec.id
            assert client.get(rec.id).resolution == f"pip install {text}"
            assert client.update(rec.id, resolution=f"uv pip install {text}").resolution == (
                f"uv pip install {text}"
            )
            client.delete(rec.id)
            with pytest.raises(NotFound):
                client.get(rec.id)
