"""Emotion that raises and lowers, urgency, slower decay for high arousal, a freshness bonus,
importance 1-10 and resolve (issue 19): through search explain, the brief, HTTP and MCP."""

from __future__ import annotations

import anyio
import pytest
from fastapi.testclient import TestClient

from tests.companion.conftest import age, agent
from tests.mcp.test_mcp import call, http_session, serve
from ultron.api.app import create_app
from ultron.tenancy import create_agent

RUNBOOK = "payments database failover runbook: patronictl switchover, then check replication lag"
DRILL = "failover drill for the billing cluster: promote the standby by hand and repoint pgbouncer"


def _one(client, query: str, **kw):  # type: ignore[no-untyped-def]
    results = client.search_memories(query, explain=True, limit=1, serendipity=False, **kw)
    return results[0]


def test_resonance_raises_a_matching_mood_and_lowers_an_opposite_one(hub):
    alice = agent(hub, "alice")
    alice.upload_memory(RUNBOOK, valence=-0.8, arousal=0.9)
    plain = _one(alice, "database failover runbook").score
    matching = _one(alice, "database failover runbook", valence=-0.8, arousal=0.9)
    opposite = _one(alice, "database failover runbook", valence=0.9, arousal=0.0)
    assert matching.explain.resonance == 1.0 and matching.score > plain
    assert opposite.score < plain


def test_arousal_adds_urgency_and_slows_decay(hub):
    alice = agent(hub, "alice")
    calm = alice.upload_memory(RUNBOOK, arousal=0.0)
    tense = alice.upload_memory(DRILL, arousal=1.0)
    assert calm.id != tense.id
    for m in (calm, tense):
        age(hub, m.id, 30)
    results = {
        r.record.id: r for r in alice.search_memories("failover runbook", explain=True, serendipity=False)
    }
    assert results[tense.id].explain.urgency == pytest.approx(1.2)
    assert results[calm.id].explain.urgency is None
    assert results[tense.id].explain.hotness > results[calm.id].explain.hotness  # decays at half the rate


def test_new_memories_get_a_freshness_bonus_for_their_first_hours(hub):
    alice = agent(hub, "alice")
    old = alice.upload_memory(RUNBOOK)
    age(hub, old.id, 1)
    new = alice.upload_memory(DRILL)
    assert old.id != new.id
    results = {
        r.record.id: r for r in alice.search_memories("failover runbook", explain=True, serendipity=False)
    }
    assert results[new.id].explain.freshness == pytest.approx(1.2, abs=0.01)
    assert results[old.id].explain.freshness is None


def test_importance_and_resolve_over_http_in_search_and_brief(hub):
    with hub.db.session() as s:
        key = create_agent(s, "ops")[1]
    auth = {"Authorization": f"Bearer {key}"}
    with TestClient(create_app(hub)) as api:
        up = api.post("/memories/upload", json={"content": RUNBOOK, "importance": 9}, headers=auth).json()
        mid = up["record"]["id"]
        assert up["record"]["importance"] == 9
        body = {"query": "payments failover runbook", "explain": True, "serendipity": False}
        first = api.post("/memories/search", json=body, headers=auth).json()["results"][0]
        assert first["explain"]["importance"] == pytest.approx(1.4)
        patched = api.patch(
            f"/memories/{mid}", json={"importance": 2, "valence": 0.5, "arousal": 0.1}, headers=auth
        )
        assert patched.status_code == 200 and patched.json()["importance"] == 2
        assert (patched.json()["valence"], patched.json()["arousal"]) == (0.5, 0.1)
        assert api.patch(f"/memories/{mid}", json={"importance": 11}, headers=auth).status_code == 422
        assert api.patch(f"/memories/{mid}", json={"valence": 2}, headers=auth).status_code == 422
        api.patch(f"/memories/{mid}", json={"importance": 5, "tier": "hot"}, headers=auth)
        before = api.post("/memories/search", json=body, headers=auth).json()["results"][0]
        brief = api.get("/brief", params={"task": "payments failover"}, headers=auth).json()
        assert mid in [i.get("id") for i in brief["items"]]

        resolved = api.post(f"/memories/{mid}/resolve", headers=auth).json()
        assert resolved["resolved_at"] is not None
        after = api.post("/memories/search", json=body, headers=auth).json()["results"][0]
        assert after["record"]["id"] == mid  # kept and still found ...
        assert after["explain"]["resolved"] == 0.3
        assert after["score"] == pytest.approx(before["score"] * 0.3, rel=1e-3)
        brief = api.get("/brief", params={"task": "payments failover"}, headers=auth).json()
        assert mid not in [i.get("id") for i in brief["items"]]  # ... but out of the brief
        assert api.post(f"/memories/{mid}/unresolve", headers=auth).json()["resolved_at"] is None


def test_sdk_and_mcp_resolve_and_edit(hub):
    alice = agent(hub, "alice")
    rec = alice.upload_memory(RUNBOOK, importance=7)
    assert rec.importance == 7 and alice.resolve_memory(rec.id).resolved_at is not None
    assert alice.resolve_memory(rec.id, resolved=False).resolved_at is None
    assert alice.edit_memory(rec.id, arousal=0.7).arousal == 0.7
    with pytest.raises(ValueError, match="importance"):  # checked before it leaves the client
        alice.upload_memory("x", importance=0)
    with hub.db.session() as s:
        key = create_agent(s, "mcp-agent")[1]

    async def main(url: str) -> None:
        async with http_session(url, key) as session:
            stored = await call(session, "upload_memory", content=DRILL)
            mid = stored["record"]["id"]
            edited = await call(session, "edit", memory_id=mid, importance=8, valence=-0.5, arousal=0.6)
            assert (edited["importance"], edited["valence"], edited["arousal"]) == (8, -0.5, 0.6)
            assert (await call(session, "resolve", memory_id=mid))["resolved_at"] is not None

    with serve(create_app(hub)) as url:
        anyio.run(main, url)
