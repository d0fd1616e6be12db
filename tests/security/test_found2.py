"""Issue 33's "Found" list (the second adversarial round), one test per reproduction.

The isolation of ranking statistics (found 4) is in test_isolation_stats.py, the batch cost cap (found 7)
in test_batch_cap.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from ultron.api.app import create_app
from ultron.tenancy import create_agent

INT4_MAX = 2**31 - 1


@pytest.fixture()
def client(hub):  # type: ignore[no-untyped-def]
    with TestClient(create_app(hub, allow_open=True), raise_server_exceptions=False) as c:
        yield c


def agents(hub: Any, *names: str, tenant: str = "acme", admin: tuple[str, ...] = ()) -> list[dict[str, str]]:
    with hub.db.session() as s:
        keys = [create_agent(s, n, tenant, admin=n in admin)[1] for n in names]
    return [{"Authorization": f"Bearer {k}"} for k in keys]


# --- found 1 and 8: an int4 position ------------------------------------------------------------------


def test_a_position_past_int4_is_a_422_naming_the_field(client, hub):
    for position in (INT4_MAX + 1, 2**40, 2**62):
        r = client.post("/memories/upload", json={"content": "x", "thread": "t", "position": position})
        assert r.status_code == 422, r.text
        assert "position" in r.json()["detail"]
    with hub.db.session() as s:
        assert s.execute(text("SELECT count(*) FROM memories")).scalar_one() == 0


def test_a_batch_refuses_the_overflowing_item_with_its_index_and_stores_the_others(client, hub):
    items = [
        {"content": "the deploy needs the VPN", "thread": "t", "position": 1},
        {"content": "overflow", "thread": "t", "position": 2**40},
        {"content": "the cache is warmed at 6am", "thread": "t", "position": 2},
    ]
    r = client.post("/memories/upload-batch", json={"items": items})
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["created"], body["refused"]) == (2, 1)
    refused = body["results"][1]
    assert refused["index"] == 1 and refused["decision"] == "refused"
    assert "position" in refused["reason"]


def test_a_stored_position_at_the_int4_limit_does_not_break_search(client, hub):
    # The limit itself is accepted, and a store that already holds one (from before the cap) still searches.
    r = client.post("/memories/upload", json={"content": "edge turn", "thread": "t", "position": INT4_MAX})
    assert r.status_code == 201, r.text
    r = client.post(
        "/memories/upload", json={"content": "turn before", "thread": "t", "position": INT4_MAX - 1}
    )
    assert r.status_code == 201, r.text
    for query in ("edge turn", "anything at all"):
        r = client.post("/memories/search", json={"query": query, "explain": True})
        assert r.status_code == 200, r.text
    assert r.json()["count"] >= 1


# --- found 9: deployment settings and URL credentials on the dashboard ----------------------------------


def test_dashboard_settings_mask_url_credentials_and_show_deployment_to_admins_only(make_hub):
    hub = make_hub(
        llm_base_url="https://bob:hunter2@llm.internal:8443/v1",
        embedding_base_url="http://svc:pa55@embed.internal/v1",
    )
    agent, admin = agents(hub, "agent", "boss", admin=("boss",))
    with TestClient(create_app(hub, allow_open=True)) as c:
        seen = c.get("/api/dashboard/settings", headers=agent).json()
        shown = c.get("/api/dashboard/settings", headers=admin).json()
    for body in (seen, shown):
        assert "hunter2" not in str(body) and "pa55" not in str(body) and "bob:" not in str(body)
        assert body["embedding_provider"] == "hash"  # tuning stays visible
    for name in ("llm_base_url", "embedding_base_url", "data_dir", "host", "port"):
        assert name not in seen, name
    assert shown["llm_base_url"] == "https://********@llm.internal:8443/v1"
    assert shown["data_dir"]
