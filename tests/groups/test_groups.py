"""Groups end to end: admins manage them (API, SDK in-process and over HTTP, CLI); group memories are
visible to members only through search, details, the brief, the vault export and MCP."""

from __future__ import annotations

import json

import anyio
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from tests.mcp.test_mcp import call, call_error, http_session, serve
from tests.test_cli import ultron
from ultron.api.app import create_app
from ultron.db.engine import Database
from ultron.db.migrate import downgrade, upgrade_to_head
from ultron.errors import Conflict, Forbidden, NotFound, ValidationFailed
from ultron.sdk import Ultron, UltronClient
from ultron.tenancy import authenticate, create_agent
from ultron.vault.markdown import Vault

RUNBOOK = "ops runbook: the payments database fails over with patronictl switchover, never by hand"


@pytest.fixture()
def keys(hub):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        out = {n: create_agent(s, n, "acme", admin=n == "boss")[1] for n in ("boss", "ann", "ben")}
        out["eve"] = create_agent(s, "eve", "globex", admin=True)[1]
    return out


@pytest.fixture()
def api(hub):  # type: ignore[no-untyped-def]
    with TestClient(create_app(hub)) as c:
        yield c


def h(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_admin_manages_groups_over_http(api, keys):
    boss, ann, ben, eve = (h(keys[n]) for n in ("boss", "ann", "ben", "eve"))
    assert api.post("/groups", json={"name": "ops"}, headers=ann).status_code == 403
    r = api.post("/groups", json={"name": "ops"}, headers=boss)
    assert r.status_code == 201 and r.json()["members"] == [] and r.json()["memories"] == 0
    assert api.post("/groups", json={"name": "ops"}, headers=boss).status_code == 409
    assert api.post("/groups", json={"name": "no spaces"}, headers=boss).status_code == 422
    assert api.put("/groups/ops/members/ann", headers=ann).status_code == 403
    assert api.put("/groups/ops/members/ann", headers=boss).json()["members"] == ["ann"]
    assert api.put("/groups/ops/members/ann", headers=boss).json()["members"] == ["ann"]  # idempotent
    assert api.put("/groups/ops/members/nobody", headers=boss).status_code == 404
    assert api.put("/groups/nogroup/members/ann", headers=boss).status_code == 404
    # another tenant's admin sees neither the group nor the agent
    assert api.put("/groups/ops/members/ann", headers=eve).status_code == 404
    assert api.get("/groups", headers=eve).json() == []
    assert api.get("/agents/me/groups", headers=ann).json() == ["ops"]
    assert api.get("/agents/ann/groups", headers=boss).json() == ["ops"]
    assert api.get("/agents/ann/groups", headers=ben).status_code == 403
    assert [g["name"] for g in api.get("/groups", headers=ben).json()] == []  # not a member of any
    assert [g["name"] for g in api.get("/groups", headers=ann).json()] == ["ops"]
    assert api.delete("/groups/ops/members/ben", headers=boss).status_code == 404
    assert api.delete("/groups/ops/members/ann", headers=boss).json()["members"] == []
    assert api.delete("/groups/ops", headers=ann).status_code == 403
    assert api.delete("/groups/ops", headers=boss).status_code == 204
    assert api.delete("/groups/ops", headers=boss).status_code == 404


def test_group_memories_are_seen_by_members_only(hub, api, keys):
    boss, ann, ben = (h(keys[n]) for n in ("boss", "ann", "ben"))
    body = {"content": RUNBOOK, "scope": "group", "group": "ops"}
    assert api.post("/memories/upload", json=body, headers=ann).status_code == 422  # no such group yet
    api.post("/groups", json={"name": "ops"}, headers=boss)
    api.put("/groups/ops/members/ann", headers=boss)
    r = api.post("/memories/upload", json=body, headers=ann)
    assert r.status_code == 201, r.text
    mid = r.json()["record"]["id"]
    assert r.json()["record"]["scope"] == "group" and r.json()["record"]["group"] == "ops"
    r = api.post("/memories/upload", json=body, headers=ben)
    assert r.status_code == 422 and "not in group" in r.json()["detail"]

    def search(who):  # type: ignore[no-untyped-def]
        found = api.post("/memories/search", json={"query": "payments database failover"}, headers=who)
        return [x["record"]["id"] for x in found.json()["results"]]

    def details(who) -> int:  # type: ignore[no-untyped-def]
        return api.post("/memories/details", json={"ids": [mid]}, headers=who).status_code

    def brief(who):  # type: ignore[no-untyped-def]
        items = api.get("/brief", params={"task": "payments database failover"}, headers=who).json()["items"]
        return [i.get("id") for i in items]

    assert api.post(f"/memories/{mid}/pin", headers=ann).status_code == 200  # pinned: leads a brief
    assert mid in search(ann) and details(ann) == 200 and mid in brief(ann)
    assert mid not in search(ben) and details(ben) == 404 and mid not in brief(ben)
    assert api.get(f"/memories/{mid}", headers=ben).status_code == 404
    # an admin outside the group does not see it either: visibility is membership
    assert mid not in search(boss)

    def exported(key: str, tmp) -> list[str]:  # type: ignore[no-untyped-def]
        with hub.db.session() as s:
            Vault(hub.memory).export(s, authenticate(s, key), tmp)
        return [p.read_text() for p in tmp.rglob("*.md")]

    assert any("patronictl" in page for page in exported(keys["ann"], hub.settings.data_dir / "ann"))
    assert not any("patronictl" in page for page in exported(keys["ben"], hub.settings.data_dir / "ben"))

    # joining shows it at once; a group holding memories cannot be deleted
    api.put("/groups/ops/members/ben", headers=boss)
    assert mid in search(ben) and details(ben) == 200
    assert api.get("/groups", headers=boss).json()[0]["memories"] == 1
    r = api.delete("/groups/ops", headers=boss)
    assert r.status_code == 409 and "holds 1 memories" in r.json()["detail"]
    api.delete("/groups/ops/members/ann", headers=boss)
    assert mid not in search(ann) and details(ann) == 404


def test_a_batch_stores_group_memories_for_members_only(api, keys):
    # Stop 28: a batch's new memories are written by one statement over arrays (create_memories); the group
    # column goes in one of them. A member's batch item is stored in its group, a non-member's is refused.
    boss, ann, ben = (h(keys[n]) for n in ("boss", "ann", "ben"))
    api.post("/groups", json={"name": "ops"}, headers=boss)
    api.put("/groups/ops/members/ann", headers=boss)
    items = [
        {"content": RUNBOOK, "scope": "group", "group": "ops"},
        {"content": "the on-call rota lives in the shared calendar"},
    ]
    r = api.post("/memories/upload-batch", json={"items": items}, headers=ann)
    assert r.status_code == 200, r.text
    assert [x["decision"] for x in r.json()["results"]] == ["created", "created"]
    mid = r.json()["results"][0]["memory_id"]
    record = api.get(f"/memories/{mid}", headers=ann).json()
    assert record["scope"] == "group" and record["group"] == "ops"
    assert api.get(f"/memories/{mid}", headers=ben).status_code == 404
    r = api.post("/memories/upload-batch", json={"items": items[:1]}, headers=ben)
    assert (
        r.status_code == 200
        and r.json()["refused"] == 1
        and "not in group" in r.json()["results"][0]["reason"]
    )


def test_group_scope_through_mcp(hub, keys):
    with TestClient(create_app(hub)) as api:
        api.post("/groups", json={"name": "ops"}, headers=h(keys["boss"]))
        api.put("/groups/ops/members/ann", headers=h(keys["boss"]))

    async def main(url: str) -> None:
        async with http_session(url, keys["ann"]) as session:
            stored = await call(session, "upload_memory", content=RUNBOOK, scope="group", group="ops")
            mid = stored["record"]["id"]
            found = await call(session, "search_memories", query="payments database failover")
            assert mid in [r["record"]["id"] for r in found["results"]]
        async with http_session(url, keys["ben"]) as session:
            found = await call(session, "search_memories", query="payments database failover")
            assert mid not in [r["record"]["id"] for r in found["results"]]
            assert "not found" in await call_error(session, "get_memory_details", ids=[mid])
            assert "not in group" in await call_error(
                session, "upload_memory", content=RUNBOOK, scope="group", group="ops"
            )

    with serve(create_app(hub)) as url:
        anyio.run(main, url)


def test_sdk_in_process_and_over_http(hub, keys):
    local = Ultron(hub=hub)  # the local agent is an admin of the default tenant
    ann = Ultron(hub=hub, agent="ann")
    assert local.create_group("ops").name == "ops"
    with pytest.raises(Conflict):
        local.create_group("ops")
    with pytest.raises(ValidationFailed):
        local.create_group("bad name")
    with pytest.raises(Forbidden):
        ann.create_group("devs")
    assert local.add_to_group("ops", "ann").members == ["ann"]
    assert ann.agent_groups() == ["ops"]  # the live client sees its new membership
    rec = ann.upload_memory(RUNBOOK, scope="group", group="ops")
    assert rec.group == "ops"
    with pytest.raises(Conflict):
        local.delete_group("ops")
    ann.delete_memory(rec.id)  # an admin outside the group does not see it
    local.delete_group("ops")
    assert ann.agent_groups() == []

    with TestClient(create_app(hub)) as tc:
        boss = UltronClient("http://testserver", keys["boss"], transport=tc._transport)
        ben = UltronClient("http://testserver", keys["ben"], transport=tc._transport)
        assert boss.create_group("sre").members == []
        assert boss.add_to_group("sre", "ben").members == ["ben"]
        assert ben.agent_groups() == ["sre"] and boss.agent_groups("ben") == ["sre"]
        assert [g.name for g in ben.list_groups()] == ["sre"]
        with pytest.raises(Forbidden):
            ben.agent_groups("ann")
        with pytest.raises(NotFound):
            boss.remove_from_group("sre", "ann")
        assert boss.remove_from_group("sre", "ben").members == []
        boss.delete_group("sre")
        assert boss.list_groups() == []


def test_cli(settings):
    ultron(settings, "agents", "create", "ann")
    assert "ops" in ultron(settings, "groups", "create", "ops").stdout
    assert "members: ann" in ultron(settings, "groups", "add", "ops", "ann").stdout
    assert ultron(settings, "groups", "of", "ann").stdout.split() == ["ops"]
    listed = json.loads(ultron(settings, "groups", "list", "--json").stdout)
    assert [(g["name"], g["members"]) for g in listed] == [("ops", ["ann"])]
    proc = ultron(settings, "groups", "create", "ops", check=False)
    assert proc.returncode == 1 and "already exists" in proc.stderr
    proc = ultron(settings, "groups", "create", "ops", "--agent", "ann", check=False)
    assert proc.returncode == 1 and "admin" in proc.stderr
    ultron(settings, "groups", "remove", "ops", "ann")
    assert "deleted" in ultron(settings, "groups", "delete", "ops").stdout


def test_migration_carries_agents_groups(db_url):
    """Agents' `groups` arrays from 0008 become groups and memberships; memories' group names become
    groups; downgrade writes the memberships back."""
    db = Database(db_url)
    try:
        downgrade(db.engine, "0008_skill_front_matter")
        with db.engine.begin() as conn:
            t1 = conn.execute(text("INSERT INTO tenants (name) VALUES ('t1') RETURNING id")).scalar_one()
            t2 = conn.execute(text("INSERT INTO tenants (name) VALUES ('t2') RETURNING id")).scalar_one()
            conn.execute(
                text(
                    "INSERT INTO agents (tenant_id, name, groups) VALUES "
                    "(:t1, 'a', '{ops,dev}'), (:t1, 'b', '{ops}'), (:t1, 'c', '{}'), (:t2, 'd', '{ops}')"
                ),
                {"t1": t1, "t2": t2},
            )
            conn.execute(
                text(
                    "INSERT INTO memories (tenant_id, memory_type, content, content_hash, search_tsv, scope, "
                    "group_name) VALUES (:t1, 'pattern', 'x', 'h', ''::tsvector, 'group', 'legacy')"
                ),
                {"t1": t1},
            )
        upgrade_to_head(db.engine)
        with db.engine.begin() as conn:
            rows = conn.execute(
                text(
                    "SELECT t.name, g.name, coalesce(string_agg(a.name, ',' ORDER BY a.name), '') "
                    "FROM agent_groups g JOIN tenants t ON t.id = g.tenant_id "
                    "LEFT JOIN group_members m ON m.group_id = g.id LEFT JOIN agents a ON a.id = m.agent_id "
                    "WHERE t.name IN ('t1', 't2') GROUP BY t.name, g.name ORDER BY 1, 2"
                )
            ).all()
        assert [tuple(r) for r in rows] == [
            ("t1", "dev", "a"),
            ("t1", "legacy", ""),
            ("t1", "ops", "a,b"),
            ("t2", "ops", "d"),
        ]
        with db.engine.begin() as conn:
            # memories from 0008 get the neutral importance and are unresolved
            carried = conn.execute(
                text("SELECT importance, resolved_at, content FROM memories WHERE group_name = 'legacy'")
            ).one()
        assert tuple(carried) == (5, None, "x")
        downgrade(db.engine, "0008_skill_front_matter")
        with db.engine.begin() as conn:
            back = conn.execute(
                text("SELECT name, groups FROM agents WHERE name IN ('a','b','c','d') ORDER BY name")
            ).all()
        assert [tuple(r) for r in back] == [("a", ["dev", "ops"]), ("b", ["ops"]), ("c", []), ("d", ["ops"])]
        upgrade_to_head(db.engine)
    finally:
        db.dispose()
