"""Runtime settings: an admin changes a tunable through the API; it applies without a restart, is
validated (nothing stored on error), audited, read-only for other agents, and reaches other processes
within the cache's TTL."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from ultron.api.app import create_app
from ultron.db.models import ActivityEvent, RuntimeSetting
from ultron.settings_store import EDITABLE, RuntimeSettings
from ultron.tenancy import create_agent, ensure_tenant

URL = "/api/dashboard/settings/runtime"


@pytest.fixture()
def keys(hub):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        _, admin = create_agent(s, "boss", admin=True)
        _, agent = create_agent(s, "helper")
    return {"admin": {"Authorization": f"Bearer {admin}"}, "agent": {"Authorization": f"Bearer {agent}"}}


@pytest.fixture()
def client(hub):  # type: ignore[no-untyped-def]
    with TestClient(create_app(hub)) as c:
        yield c


def _values(client, headers):  # type: ignore[no-untyped-def]
    body = client.get(URL, headers=headers).json()
    return body, {s["name"]: s for s in body["settings"]}


def _stored(hub) -> dict[str, object]:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return {r.name: r.value for r in s.execute(select(RuntimeSetting)).scalars()}


def test_a_changed_tier_boost_reorders_search_without_a_restart(hub, client, keys):
    admin = keys["admin"]
    ids = []
    for text in (
        "docker build cache is invalidated when COPY comes before pip install",
        "docker build cache misses when the requirements file changes on every commit",
    ):
        r = client.post("/memories/upload", json={"content": text}, headers=admin)
        assert r.status_code == 201, r.text
        ids.append(r.json()["record"]["id"])
    hot, cold = ids
    for memory_id, tier in ((hot, "hot"), (cold, "cold")):
        assert client.patch(f"/memories/{memory_id}", json={"tier": tier}, headers=admin).status_code == 200

    def order() -> list[tuple[str, float]]:
        body = {"query": "docker build cache", "explain": True, "serendipity": False}
        results = client.post("/memories/search", json=body, headers=admin).json()["results"]
        return [(r["record"]["id"], r["explain"]["tier_boost"]) for r in results if r["record"]["id"] in ids]

    assert order() == [(hot, 1.2), (cold, 0.8)]
    r = client.patch(URL, json={"values": {"tier_boost_cold": 10, "tier_boost_hot": 0.1}}, headers=admin)
    assert r.status_code == 200, r.text
    changed = {s["name"]: s for s in r.json()["settings"] if s["changed"]}
    assert changed["tier_boost_cold"]["value"] == 10 and changed["tier_boost_cold"]["default"] == 0.8
    assert changed["tier_boost_cold"]["updated_by"] == "boss"
    assert order() == [(cold, 10.0), (hot, 0.1)]  # the same process, the same hub: applied at once
    # Reset: the configuration applies again.
    assert (
        client.patch(URL, json={"reset": ["tier_boost_cold", "tier_boost_hot"]}, headers=admin).status_code
        == 200
    )
    assert order() == [(hot, 1.2), (cold, 0.8)] and _stored(hub) == {}


def test_bad_values_are_refused_and_nothing_is_stored(hub, client, keys):
    admin = keys["admin"]
    bad = [
        ({"fulltext_weight": 1.5}, "fulltext_weight"),  # out of range
        ({"tier_boost_hot": 0}, "tier_boost_hot"),  # must be > 0
        ({"decay_alpha": "0.1"}, "decay_alpha"),  # a string is not a number
        ({"serendipity_enabled": 1}, "serendipity_enabled"),  # nor 1 a boolean
        ({"cold_ttl_days": 2.5}, "cold_ttl_days"),  # days are whole
        ({"database_url": "postgresql://x"}, "cannot be changed at run time"),
        ({"db_pool_size": 50}, "cannot be changed at run time"),
        ({"no_such_thing": 1}, "unknown setting"),
        ({"hot_percentile": 70, "warm_percentile": 40}, "<= 100"),  # each fine, together not
        ({"time_decay_weight": 0.3, "resolved_factor": -1}, "resolved_factor"),  # one good, one bad
    ]
    for values, reason in bad:
        r = client.patch(URL, json={"values": values}, headers=admin)
        assert r.status_code == 422, (values, r.text)
        assert reason in r.json()["detail"], (values, r.json())
    assert client.patch(URL, json={}, headers=admin).status_code == 422
    assert client.patch(URL, json={"tier_boost_hot": 2}, headers=admin).status_code == 422  # not under values
    assert (
        client.patch(
            URL, json={"values": {"urgency_weight": 0.1}, "reset": ["urgency_weight"]}, headers=admin
        ).status_code
        == 422
    )
    assert _stored(hub) == {}
    _, values = _values(client, admin)
    assert values["time_decay_weight"]["value"] == hub.settings.time_decay_weight
    assert not any(s["changed"] for s in values.values())
    # A nullable setting takes null (calibrated per model) and a number in its range.
    r = client.patch(URL, json={"values": {"serendipity_relevance": 0.72}}, headers=admin)
    assert r.status_code == 200 and _stored(hub) == {"serendipity_relevance": 0.72}
    assert (
        client.patch(URL, json={"values": {"serendipity_relevance": None}}, headers=admin).status_code == 200
    )
    assert _stored(hub) == {"serendipity_relevance": None}


def test_other_agents_see_the_values_read_only(client, keys):
    body, values = _values(client, keys["agent"])
    assert body["editable"] is False and set(values) == set(EDITABLE)
    r = client.patch(URL, json={"values": {"urgency_weight": 0.5}}, headers=keys["agent"])
    assert r.status_code == 403 and "admin" in r.json()["detail"]
    body, values = _values(client, keys["admin"])
    assert body["editable"] is True
    hot = values["hot_percentile"]
    assert (hot["kind"], hot["minimum"], hot["maximum"], hot["nullable"]) == ("number", 0, 100, False)
    assert values["serendipity_relevance"]["nullable"] is True
    assert values["serendipity_enabled"]["kind"] == "boolean"


def test_a_change_is_audited(hub, client, keys):
    r = client.patch(URL, json={"values": {"urgency_weight": 0.5}}, headers=keys["admin"])
    assert r.status_code == 200
    client.patch(URL, json={"reset": ["urgency_weight"]}, headers=keys["admin"])
    with hub.db.session() as s:
        events = (
            s.execute(
                select(ActivityEvent).where(ActivityEvent.kind == "settings").order_by(ActivityEvent.id)
            )
            .scalars()
            .all()
        )
        details = [e.detail for e in events]
        agents = {e.agent_id for e in events}
    assert details == [
        {"changed": {"urgency_weight": {"from": 0.2, "to": 0.5}}, "reset": {}},
        {"changed": {}, "reset": {"urgency_weight": {"from": 0.5, "to": 0.2}}},
    ]
    assert len(agents) == 1 and None not in agents


def test_another_process_sees_a_change_within_the_ttl(hub, client, keys):
    """The worker or a second API process: its own cache, read again after `ttl` seconds."""
    # The other process's clock, moved by the test: a slow box must not expire the cache early.
    now = [1000.0]
    other = RuntimeSettings(hub.settings, ttl=5, clock=lambda: now[0])
    with hub.db.session() as s:
        tenant_id = ensure_tenant(s, "default")
        assert other.for_tenant(s, tenant_id).cold_ttl_days == 30
    assert client.patch(URL, json={"values": {"cold_ttl_days": 90}}, headers=keys["admin"]).status_code == 200
    with hub.db.session() as s:
        assert other.for_tenant(s, tenant_id).cold_ttl_days == 30  # still cached
    now[0] += 4.9
    with hub.db.session() as s:
        assert other.for_tenant(s, tenant_id).cold_ttl_days == 30  # still within the ttl
    now[0] += 0.2
    with hub.db.session() as s:
        assert other.for_tenant(s, tenant_id).cold_ttl_days == 90
        assert hub.runtime.for_tenant(s, ensure_tenant(s, "elsewhere")).cold_ttl_days == 30  # per tenant
