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
from ultron.db.models import MemoryContribution
from ultron.hub import build_worker
from ultron.memory import repair
from ultron.memory.schemas import UploadRequest
from ultron.tenancy import authenticate, create_agent, local_actor

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


# --- found 2, 3, 5, 6 and 10 (split of an archived memory): merges never change the owner's memory -------

X = {
    "content": "the staging deploy fails when the vpn is down",
    "resolution": "reconnect the vpn then rerun it",
}


def upload(c: TestClient, who: dict[str, str], **fields: Any) -> dict[str, Any]:
    r = c.post("/memories/upload", json={**X, **fields}, headers=who)
    assert r.status_code in (200, 201), r.text
    return r.json()


def merged_contribution(c: TestClient, who: dict[str, str], memory_id: str) -> int:
    rows = c.get(f"/memories/{memory_id}/contributions", headers=who).json()
    return next(row["id"] for row in rows if row["decision"] != "created")


def test_a_contributors_split_keeps_the_owners_resolution_and_tags(hub):
    a1, a2 = agents(hub, "a1", "a2")
    with TestClient(create_app(hub)) as c:
        memory_id = upload(c, a1)["record"]["id"]
        assert c.patch(f"/memories/{memory_id}", json={"tags": ["vpn"]}, headers=a1).status_code == 200
        second = upload(c, a2, tags=["vpn", "theirs"])
        assert second["decision"] == "merged" and second["record"]["id"] == memory_id
        assert sorted(second["record"]["tags"]) == ["theirs", "vpn"]
        cid = merged_contribution(c, a2, memory_id)
        r = c.post(f"/memories/{memory_id}/split", json={"contribution_id": cid}, headers=a2)
        assert r.status_code == 200, r.text
        after = c.get(f"/memories/{memory_id}", headers=a1).json()
    assert after["resolution"] == X["resolution"]  # was blanked
    assert after["tags"] == ["vpn"]  # the owner's tag stays, the contributor's own goes


def test_a_merged_upload_of_another_agent_sets_none_of_the_owners_fields(hub):
    a1, a3 = agents(hub, "a1", "a3")
    with TestClient(create_app(hub)) as c:
        memory_id = upload(c, a1, importance=8)["record"]["id"]
        assert c.patch(f"/memories/{memory_id}", json={"importance": 1}, headers=a3).status_code == 403
        r = upload(c, a3, importance=1, valence=-0.8, arousal=0.9)
        assert r["decision"] == "merged"
        assert (r["record"]["importance"], r["record"]["valence"], r["record"]["arousal"]) == (8, None, None)
        stored = c.get(f"/memories/{memory_id}", headers=a1).json()
        assert (stored["importance"], stored["valence"], stored["arousal"]) == (8, None, None)
        # pinned: not even its owner's merged upload changes a field or a tag
        assert c.patch(f"/memories/{memory_id}", json={"pinned": True}, headers=a1).status_code == 200
        upload(c, a3, importance=2, tags=["t3"])
        upload(c, a1, importance=3, valence=0.5, tags=["t1"])
        stored = c.get(f"/memories/{memory_id}", headers=a1).json()
    assert (stored["importance"], stored["valence"], stored["tags"]) == (8, None, [])
    assert stored["contributions"] == 4  # they are kept as contributions
    # the owner's own merged upload into an unpinned memory still sets them (unchanged behaviour)


def test_the_owners_own_merged_upload_still_sets_its_importance(hub):
    (a1,) = agents(hub, "a1")
    with TestClient(create_app(hub)) as c:
        memory_id = upload(c, a1, importance=8)["record"]["id"]
        assert upload(c, a1, importance=2)["record"]["importance"] == 2
        assert c.get(f"/memories/{memory_id}", headers=a1).json()["importance"] == 2


def _text_hit(c: TestClient, who: dict[str, str], query: str, memory_id: str) -> bool:
    r = c.post("/memories/search", json={"query": query, "explain": True, "limit": 50}, headers=who)
    assert r.status_code == 200, r.text
    return any(x["record"]["id"] == memory_id and x["explain"]["from_text"] for x in r.json()["results"])


def test_text_the_owner_edited_out_stops_finding_the_memory_and_can_be_purged(hub):
    a1, a2, a3 = agents(hub, "a1", "a2", "a3")
    with TestClient(create_app(hub)) as c:
        memory_id = upload(c, a1, context="zanzibar gateway")["record"]["id"]
        assert _text_hit(c, a2, "zanzibar", memory_id)
        r = c.patch(f"/memories/{memory_id}", json={"context": "the gateway"}, headers=a1)
        assert r.status_code == 200
        assert not _text_hit(c, a2, "zanzibar", memory_id)  # was still found through the text leg
        base = c.get(f"/memories/{memory_id}/contributions", headers=a1).json()[0]
        assert base["decision"] == "created" and base["context"] == "the gateway"
        # another agent's merged upload holds a word the owner wants out: the owner purges it from the
        # memory; the upload is not destroyed, it becomes a memory of its own agent
        assert upload(c, a2, context="the gateway quokka")["record"]["id"] == memory_id
        cid = merged_contribution(c, a2, memory_id)
        assert c.delete(f"/memories/{memory_id}/contributions/{cid}", headers=a3).status_code == 403
        assert c.delete(f"/memories/{memory_id}/contributions/{base['id']}", headers=a1).status_code == 422
        assert c.delete(f"/memories/{memory_id}/contributions/{cid}", headers=a1).status_code == 204
        assert not _text_hit(c, a1, "quokka", memory_id)
        moved = c.get(f"/memories/{memory_id}/contributions", headers=a1).json()
        assert [row["decision"] for row in moved] == ["created"]
        # its contributor purges its own upload: gone for good
        assert upload(c, a2, context="the gateway wombat")["record"]["id"] == memory_id
        cid = merged_contribution(c, a2, memory_id)
        assert c.delete(f"/memories/{memory_id}/contributions/{cid}", headers=a2).status_code == 204
    with hub.db.session() as s:
        kept = s.execute(text("SELECT context FROM memory_contributions ORDER BY id")).scalars().all()
        holders = s.execute(text("SELECT count(*) FROM memories WHERE context LIKE '%quokka%'")).scalar_one()
    assert holders == 1  # the owner's purge moved a2's upload to a memory of a2's own
    assert not any("wombat" in k for k in kept)


def test_deleting_a_memory_keeps_other_agents_uploads_as_their_own_memories(hub):
    a1, a2 = agents(hub, "a1", "a2")
    with TestClient(create_app(hub)) as c:
        memory_id = upload(c, a1)["record"]["id"]
        assert upload(c, a2, context="seen on the berlin office network")["record"]["id"] == memory_id
        assert c.delete(f"/memories/{memory_id}", headers=a1).status_code == 204
        assert c.get(f"/memories/{memory_id}", headers=a1).status_code == 404
        with hub.db.session() as s:
            rows = s.execute(text("SELECT decision, memory_id FROM memory_contributions")).all()
        assert [d for d, _ in rows] == ["split"]  # the owner's upload went; a2's was kept
        kept = c.get(f"/memories/{rows[0][1]}", headers=a2).json()
        hits = c.post("/memories/search", json={"query": "berlin office network"}, headers=a2).json()
    assert kept["agent"] == "a2" and kept["status"] == "active" and "berlin" in kept["context"]
    assert kept["id"] in [x["record"]["id"] for x in hits["results"]]


def test_a_contributor_cannot_split_its_upload_out_of_an_archived_memory(hub):
    a1, a2 = agents(hub, "a1", "a2")
    with TestClient(create_app(hub)) as c:
        memory_id = upload(c, a1)["record"]["id"]
        assert upload(c, a2, context="also on wifi")["record"]["id"] == memory_id
        cid = merged_contribution(c, a2, memory_id)
        assert c.patch(f"/memories/{memory_id}", json={"status": "archived"}, headers=a1).status_code == 200
        r = c.post(f"/memories/{memory_id}/split", json={"contribution_id": cid}, headers=a2)
        assert r.status_code == 409, r.text
    with hub.db.session() as s:
        assert s.execute(text("SELECT count(*) FROM memories WHERE status = 'active'")).scalar_one() == 0


# --- found 10: bidi controls in ingest file names and import names -------------------------------------


@pytest.mark.parametrize("name", ["session\u202elmth.jsonl", "a\u2066b.jsonl", "tab\there.jsonl"])
def test_ingest_and_import_names_with_bidi_or_control_characters_are_refused(client, hub, name):
    line = '{"role": "user", "content": "hello"}\n'
    r = client.post("/ingest", json={"files": [{"name": name, "content": line}]})
    assert r.status_code == 422, r.text
    assert "control" in r.json()["detail"]
    r = client.post("/imports", json={"kind": "text", "name": name, "content": "a note"})
    assert r.status_code == 422, r.text
    r = client.post("/imports", data={"kind": "text", "name": name}, files={"file": ("n.txt", b"a note")})
    assert r.status_code == 422, r.text
    with hub.db.session() as s:
        for table in ("sessions", "import_jobs", "memories"):
            assert s.execute(text(f"SELECT count(*) FROM {table}")).scalar_one() == 0, table


# --- found 10: worker-run rows written at the end -----------------------------------------------------


def test_worker_run_rows_never_finish_before_they_start(hub):
    with hub.db.session() as s:
        actor = local_actor(s)
        for i in range(3):
            hub.memory.upload(
                s, actor, UploadRequest(content=f"retry the flaky deploy step {i} with backoff")
            )
    worker = build_worker(hub, worker_id="clock:1")
    worker.run_cycle(quiet=True)  # a quiet cycle writes a row only for a step that did something, at its end
    worker.run_cycle()  # a full one writes each row at the start and finishes it
    with hub.db.session() as s:
        rows = s.execute(text("SELECT step, started_at, finished_at FROM worker_runs")).all()
    assert rows and all(r.finished_at is not None for r in rows)
    backwards = [r.step for r in rows if r.finished_at < r.started_at]
    assert not backwards, backwards


# --- found 10: repair-merges covers every tenant and private and group merges -------------------------


def test_repair_merges_covers_every_tenant_and_private_and_group_memories(hub):
    (a1,) = agents(hub, "a1", tenant="acme")
    b1, boss = agents(hub, "b1", "boss", tenant="beta", admin=("boss",))
    with TestClient(create_app(hub)) as c:
        assert c.post("/groups", json={"name": "ops"}, headers=boss).status_code in (200, 201)
        assert c.put("/groups/ops/members/b1", headers=boss).status_code == 200
        body = {
            "content": "No module named pandas",
            "context": "the analysis",
            "resolution": "pip install pandas",
        }
        private = c.post("/memories/upload", json=body | {"scope": "private"}, headers=a1).json()["record"]
        group = c.post("/memories/upload", json=body | {"scope": "group", "group": "ops"}, headers=b1).json()
    targets = [(private["id"], a1), (group["record"]["id"], b1)]
    with hub.db.session() as s:
        for memory_id, who in targets:
            actor = authenticate(s, who["Authorization"].split()[1])
            s.add(
                MemoryContribution(
                    tenant_id=actor.tenant_id,
                    memory_id=memory_id,
                    agent_id=actor.agent_id,
                    decision="merged_judge",  # as the pre-issue-14 judge merged them
                    similarity=0.95,
                    content="No module named numpy",
                    context="the analysis",
                    resolution="pip install numpy",
                    tags=[],
                )
            )
    lines: list[str] = []
    assert repair.repair(hub.db, hub.memory, out=lines.append) == (2, 0)  # was (0, 0): default tenant only
    assert repair.repair(hub.db, hub.memory, apply=True, out=lines.append) == (2, 2), lines
    with hub.db.session() as s:
        rows = s.execute(text("SELECT scope, count(*) FROM memories GROUP BY scope ORDER BY scope")).all()
    assert [tuple(r) for r in rows] == [("group", 2), ("private", 2)]
