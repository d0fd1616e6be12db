"""The dashboard's JSON API: pagination, filters, visibility, no hits from browsing, masking, assets."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from sqlalchemy import select

from tests.web.conftest import auth
from ultron.api.app import create_app
from ultron.bench.demo import DEMO_MEMORIES
from ultron.db.models import Memory
from ultron.memory.schemas import UploadRequest
from ultron.tenancy import authenticate, local_actor


def _hits(hub) -> dict:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return {m.id: m.hit_count for m in s.execute(select(Memory)).scalars()}


def test_keyset_pages_cover_every_memory_once(client, admin_key, demo):
    seen, cursor, pages = [], None, 0
    while True:
        params = {"limit": 4, **({"cursor": cursor} if cursor else {})}
        page = client.get("/api/dashboard/memories", params=params, headers=auth(admin_key)).json()
        assert page["total"] == len(DEMO_MEMORIES)
        seen += [m["id"] for m in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert len(seen) == len(set(seen)) == len(DEMO_MEMORIES)
    assert pages == -(-len(DEMO_MEMORIES) // 4)


def test_sort_by_hits_pages_in_order(client, admin_key, demo):
    first = client.get(
        "/api/dashboard/memories", params={"sort": "hits", "limit": 5}, headers=auth(admin_key)
    ).json()
    second = client.get(
        "/api/dashboard/memories",
        params={"sort": "hits", "limit": 5, "cursor": first["next_cursor"]},
        headers=auth(admin_key),
    ).json()
    hits = [m["hit_count"] for m in first["items"] + second["items"]]
    assert hits == sorted(hits, reverse=True) and hits[0] > 0


def test_filters_narrow_the_list(client, admin_key, demo):
    def get(**params):  # type: ignore[no-untyped-def]
        return client.get("/api/dashboard/memories", params=params, headers=auth(admin_key)).json()

    pinned = get(pinned="true")
    assert [m["id"] for m in pinned["items"]] == [str(demo.memory_ids[2])]
    assert all(m["tier"] == "hot" for m in get(tier="hot")["items"]) and get(tier="hot")["total"] == 2
    assert get(status="archived")["total"] == 1
    assert all(m["agent"] == "ops-bot" for m in get(agent="ops-bot")["items"])
    assert get(agent="nobody")["total"] == 0
    found = get(q="Debian venv")
    assert found["total"] == 1 and "Debian" in found["items"][0]["summary_l0"]
    for t in ("error", "security"):
        assert all(m["memory_type"] == t for m in get(type=t)["items"])


def test_bad_input_is_a_clear_4xx(client, admin_key, demo):
    r = client.get("/api/dashboard/memories", params={"cursor": "garbage"}, headers=auth(admin_key))
    assert r.status_code in (400, 422) and "cursor" in r.json()["detail"]
    r = client.get("/api/dashboard/memories", params={"tier": "lukewarm"}, headers=auth(admin_key))
    assert r.status_code == 422
    r = client.get("/api/dashboard/memories", params={"q": "the a"}, headers=auth(admin_key))
    assert r.status_code in (400, 422)


def test_browsing_counts_no_hits(hub, client, admin_key, demo):
    hub.hits.flush()
    before = _hits(hub)
    memory_id = demo.memory_ids[0]
    for path in (
        "/api/dashboard/memories",
        f"/memories/{memory_id}",
        f"/memories/{memory_id}/contributions",
        f"/api/dashboard/memories/{memory_id}/hits",
        "/api/dashboard/map",
        "/api/dashboard/overview",
    ):
        assert client.get(path, headers=auth(admin_key)).status_code == 200, path
    hub.hits.flush()
    assert _hits(hub) == before


def test_hit_history_shows_each_use(client, admin_key, demo):
    history = client.get(f"/api/dashboard/memories/{demo.memory_ids[1]}/hits", headers=auth(admin_key)).json()
    signals = {e["signal"] for e in history["recent"]}
    assert {"search", "details"} <= signals
    assert sum(d["events"] for d in history["days"]) == len(history["recent"])


def test_private_memories_of_others_stay_hidden(hub, client, demo):
    with hub.db.session() as s:
        owner = authenticate(s, demo.keys["ops-bot"])
    with hub.db.session() as s:
        private = hub.memory.upload(
            s, owner, UploadRequest(content="my private note about zebra crossings", scope="private")
        ).record.id
    other = demo.keys["cursor-agent"]
    listed = client.get("/api/dashboard/memories", params={"q": "zebra"}, headers=auth(other)).json()
    assert listed["total"] == 0
    assert client.get(f"/api/dashboard/memories/{private}/hits", headers=auth(other)).status_code == 404
    own = client.get("/api/dashboard/memories", params={"q": "zebra"}, headers=auth(demo.keys["ops-bot"]))
    assert own.json()["total"] == 1


def test_map_samples_per_tier_and_keeps_the_totals(client, admin_key, demo):
    full = client.get("/api/dashboard/map", headers=auth(admin_key)).json()
    active = len(DEMO_MEMORIES) - 1
    assert sum(c["memories"] for c in full["totals"]) == active
    assert len(full["nodes"]) == active and not full["sampled"]
    sample = client.get("/api/dashboard/map", params={"per_tier": 1}, headers=auth(admin_key)).json()
    assert sample["sampled"] and len(sample["nodes"]) == 3
    hot = [n for n in sample["nodes"] if n["tier"] == "hot"][0]
    assert hot["pinned"]  # pinned memories come first in their tier


def test_overview_counts_and_activity(client, admin_key, demo):
    o = client.get("/api/dashboard/overview", params={"days": 7}, headers=auth(admin_key)).json()
    assert o["stats"]["total"] == len(DEMO_MEMORIES)
    assert o["stats"]["by_status"] == {"active": len(DEMO_MEMORIES) - 1, "archived": 1}
    assert o["pinned"] == 1 and o["agents"] == 3 and len(o["days"]) == 7
    kinds = {a["kind"]: a["events"] for a in o["activity"]}
    assert kinds["upload"] == len(DEMO_MEMORIES) and kinds["merge"] == 1 and kinds["search"] > 0


def test_settings_are_masked(make_hub, db_url):
    hub = make_hub(llm_api_key="sk-very-secret-value")
    with TestClient(create_app(hub, allow_open=True)) as c:
        body = c.get("/api/dashboard/settings").json()
    assert body["llm_api_key"] == "********"
    assert "sk-very-secret" not in str(body) and db_url.split("@")[-1] not in str(body)
    assert body["embedding_provider"] == "hash"


def test_keys_are_required_once_agents_exist(hub, demo):
    with TestClient(create_app(hub, allow_open=True)) as c:
        assert c.get("/api/dashboard/whoami").status_code == 401
        assert c.get("/api/dashboard/whoami", headers=auth("ult_wrong")).status_code == 401
        me = c.get("/api/dashboard/whoami", headers=auth(demo.keys["claude-code"])).json()
        assert me == {**me, "agent": "claude-code", "is_admin": True, "signed_in": True}
        assert c.get("/dashboard").status_code == 200  # the page itself holds no data


def test_an_open_loopback_hub_needs_no_key(hub):
    with hub.db.session() as s:
        hub.memory.upload(s, local_actor(s), UploadRequest(content="open hub memory about caching"))
    with TestClient(create_app(hub, allow_open=True)) as c:
        me = c.get("/api/dashboard/whoami").json()
        assert me["agent"] == "local" and not me["signed_in"]
        assert c.get("/api/dashboard/memories").json()["total"] == 1


def test_assets_ship_in_the_package_and_load_nothing_from_the_network(client):
    page = client.get("/dashboard")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "default-src 'self'" in page.headers["content-security-policy"]
    refs = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert refs and all(r.startswith("/dashboard/assets/") or r.startswith("#") for r in refs)
    for ref in refs:
        if ref.startswith("/dashboard/assets/"):
            asset = client.get(ref)
            assert asset.status_code == 200, ref
            external = re.findall(r"https?://[^\s\"'`)]+", asset.text)
            assert all("www.w3.org" in u for u in external), external
    for bad in ("..%2Fsdk%2F__init__.py", "router.py", ".hidden.js", "nope.js"):
        assert client.get(f"/dashboard/assets/{bad}").status_code == 404


def test_features_say_what_is_installed(client, admin_key):
    features = client.get("/api/dashboard/features", headers=auth(admin_key)).json()
    assert set(features) == {"skills", "trajectories", "imports", "worker"}
    paths = set(client.get("/openapi.json").json()["paths"])
    assert features["imports"] == ("/imports" in paths)
    assert features["worker"] == any(p.startswith("/worker") for p in paths)


def test_overview_shows_worker_runs_once_the_worker_exists(hub, client, admin_key):
    from sqlalchemy import text

    with hub.db.session() as s:
        if s.execute(text("SELECT to_regclass('worker_runs')")).scalar() is None:
            assert client.get("/api/dashboard/overview", headers=auth(admin_key)).json()["worker"] is None
            return
        s.execute(
            text(
                "INSERT INTO worker_runs (cycle_id, worker_id, step, status, finished_at, counts, errors) "
                "VALUES (gen_random_uuid(), 'w1', 'segment', 'ok', now(), '{\"sessions\": 3}', '[]'), "
                "(gen_random_uuid(), 'w1', 'rebalance', 'failed', now(), '{}', '[\"boom\"]')"
            )
        )
    worker = client.get("/api/dashboard/overview", headers=auth(admin_key)).json()["worker"]
    outcomes = {(o["step"], o["status"]): o["runs"] for o in worker["outcomes"]}
    assert outcomes == {("rebalance", "failed"): 1, ("segment", "ok"): 1}
    failed = [r for r in worker["recent"] if r["status"] == "failed"][0]
    assert failed["errors"] == 1


def test_broad_filters_count_up_to_a_cap(client, admin_key, demo, monkeypatch):
    from ultron.memory import browse

    monkeypatch.setattr(browse, "COUNT_CAP", 5)
    page = client.get("/api/dashboard/memories", params={"limit": 3}, headers=auth(admin_key)).json()
    assert (page["total"], page["total_capped"], len(page["items"])) == (5, True, 3)
    narrow = client.get("/api/dashboard/memories", params={"tier": "hot"}, headers=auth(admin_key)).json()
    assert (narrow["total"], narrow["total_capped"]) == (2, False)


def test_the_map_is_reused_for_a_while_unless_asked_fresh(client, admin_key, demo):
    target = str(demo.memory_ids[6])

    def pinned(**params):  # type: ignore[no-untyped-def]
        nodes = client.get("/api/dashboard/map", params=params, headers=auth(admin_key)).json()["nodes"]
        return next(n["pinned"] for n in nodes if n["id"] == target)

    assert pinned() is False
    assert client.patch(f"/memories/{target}", json={"pinned": True}, headers=auth(admin_key)).is_success
    assert pinned() is False  # the 30-second answer
    assert pinned(fresh="true") is True
