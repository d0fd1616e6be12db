"""Issue 16's "Found" list, one test (or parametrized set) per reproduction, each as the issue specifies.

Provider faults and the hanging embedder (found 1 and 2) are in test_provider_faults.py; the MCP ones
(found 8 and 9) in test_mcp_guard.py.
"""

from __future__ import annotations

import json
import logging
import threading
import time

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, text

from tests.ingestion.conftest import SESSIONS
from ultron.api.app import create_app
from ultron.db.models import Memory
from ultron.hub import build_worker
from ultron.tenancy import create_agent, revoke_agent
from ultron.web.serve import LiveServer

# --- found 3: a YAML alias bomb in an uploaded SKILL.md ----------------------------------------------


def alias_bomb(levels: int) -> str:
    """The issue's front matter: each level a list of ten aliases of the one before (10**levels leaves)."""
    lines = ['name: "bomb"', 'description: "x"', 'l0: &l0 ["lol"]']
    for i in range(1, levels + 1):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]")
    return "\n".join(lines)


def skill_md(front: str, body: str = "# Bomb\n\n1. step") -> str:
    return f"---\n{front}\n---\n\n{body}\n"


@pytest.fixture()
def client(hub):  # type: ignore[no-untyped-def]
    with TestClient(create_app(hub, allow_open=True), raise_server_exceptions=False) as c:
        yield c


@pytest.mark.parametrize("levels", [7, 8])
def test_yaml_alias_bomb_is_refused_with_422_at_once(client, hub, levels):
    front = alias_bomb(levels)
    assert len(front) < 700  # a few hundred bytes, as in the issue
    start = time.monotonic()
    r = client.post("/skills", json={"files": {"SKILL.md": skill_md(front)}})
    elapsed = time.monotonic() - start
    assert r.status_code == 422, r.text
    assert "alias" in r.json()["detail"] or "expands" in r.json()["detail"]
    assert elapsed < 5  # it took 45.6 s (7 levels) and 468 s (8) before; refused in milliseconds now
    with hub.db.session() as s:
        assert s.execute(text("SELECT count(*) FROM skills")).scalar_one() == 0
    assert client.get("/skills/bomb/SKILL.md").status_code == 404


def test_a_few_aliases_still_work(client):
    front = 'name: "anchors"\ndescription: "x"\nbase: &b {retries: 3}\nprod: *b\nstaging: *b'
    r = client.post("/skills", json={"files": {"SKILL.md": skill_md(front, "# Anchors\n\n1. use them")}})
    assert r.status_code == 201, r.text


def test_front_matter_over_64_kb_and_skill_over_1_mb_are_refused(client):
    big_front = 'name: "big"\ndescription: "' + "x" * (65 * 1024) + '"'
    r = client.post("/skills", json={"files": {"SKILL.md": skill_md(big_front)}})
    assert r.status_code == 422, r.text
    assert "the limit is 65536" in r.json()["detail"]
    big_body = "# Big\n\n" + "step\n" * (1024 * 1024 // 5 + 10)
    r = client.post("/skills", json={"files": {"SKILL.md": skill_md('name: "big"', big_body)}})
    assert r.status_code == 422, r.text


def test_skill_file_path_with_a_bidi_control_is_refused(client):
    files = {"SKILL.md": skill_md('name: "bidi"\ndescription: "x"'), "scripts/run\u202etxt.sh": "echo hi"}
    r = client.post("/skills", json={"files": files})
    assert r.status_code == 422, r.text
    assert "bidirectional" in r.json()["detail"]


# --- found 4: a non-admin archives another agent's memory through import review ---------------------


def test_import_review_by_another_agent_is_forbidden_and_archives_nothing(hub):
    with hub.db.session() as s:
        owner = create_agent(s, "owner", "acme")[1]
        other = create_agent(s, "other", "acme")[1]
        admin = create_agent(s, "boss", "acme", admin=True)[1]
    data = (SESSIONS / "chatgpt_conversations.json").read_bytes()
    with TestClient(create_app(hub, allow_open=False)) as c:
        as_owner = {"Authorization": f"Bearer {owner}"}
        as_other = {"Authorization": f"Bearer {other}"}
        as_admin = {"Authorization": f"Bearer {admin}"}
        files = {"file": ("conversations.json", data)}
        job = c.post("/imports", data={"kind": "chatgpt"}, files=files, headers=as_owner).json()
        for _ in range(200):
            if c.get(f"/imports/{job['id']}", headers=as_owner).json()["status"] == "done":
                break
            time.sleep(0.05)
        build_worker(hub).process_due()
        items = c.get(f"/imports/{job['id']}/review", headers=as_owner).json()
        produced = next(i for i in items if i["memory_ids"])
        discard = {"discard": [produced["item_id"]]}

        # The matrix: every path that changes the import's memories, by the other agent: 403.
        for path, body in (
            (f"/imports/{job['id']}/review", discard),
            (f"/imports/{job['id']}/pause", None),
            (f"/imports/{job['id']}/resume", None),
            (f"/sessions/{produced['session_id']}/reprocess", None),
        ):
            r = c.post(path, json=body, headers=as_other)
            assert r.status_code == 403, (path, r.status_code, r.text)
        segment = c.get(f"/segments?session_id={produced['session_id']}", headers=as_owner).json()[0]
        assert c.post(f"/segments/{segment['id']}/reprocess", headers=as_other).status_code == 403
        for memory_id in produced["memory_ids"]:
            assert (
                c.patch(f"/memories/{memory_id}", json={"pinned": True}, headers=as_other).status_code == 403
            )
            assert c.delete(f"/memories/{memory_id}", headers=as_other).status_code == 403
        with hub.db.session() as s:
            statuses = s.execute(select(Memory.status).where(Memory.id.in_(produced["memory_ids"])))
            assert {row.status for row in statuses} == {"active"}

        # The owner and an admin may.
        assert c.post(f"/segments/{segment['id']}/reprocess", headers=as_admin).status_code == 200
        r = c.post(f"/imports/{job['id']}/review", json=discard, headers=as_owner)
        assert r.status_code == 200 and r.json()["memories_archived"] >= 1


# --- found 5: revoking the last key reopens the hub -------------------------------------------------


def test_revoking_the_last_key_never_reopens_the_hub(hub, caplog):
    app = create_app(hub, allow_open=True)  # a loopback hub, as `ultron serve` builds it
    with hub.db.session() as s:
        key = create_agent(s, "only", "default")[1]
    with TestClient(app) as c:
        assert (
            c.post(
                "/memories/upload",
                json={"content": "secret ops note"},
                headers={"Authorization": f"Bearer {key}"},
            ).status_code
            == 201
        )
        with hub.db.session() as s:
            revoke_agent(s, "only", "default")
        app.state.auth._checked_at = 0.0  # do not wait for the 5 s cache: ask the database now
        r = c.post("/memories/search", json={"query": "secret ops note"})
        assert r.status_code == 401, r.text
        assert c.get("/memories/stats").status_code == 401
        assert (
            c.post(
                "/memories/upload", json={"content": "x"}, headers={"Authorization": f"Bearer {key}"}
            ).status_code
            == 401
        )


def test_open_mode_is_logged_loudly_and_closes_for_good(hub, caplog):
    app = create_app(hub, allow_open=True)
    with caplog.at_level(logging.WARNING, logger="ultron.routing.auth"), TestClient(app) as c:
        assert c.get("/memories/stats").status_code == 200
        assert any("SERVING OPEN" in rec.getMessage() for rec in caplog.records)
        with hub.db.session() as s:
            create_agent(s, "first", "default")
        app.state.auth._checked_at = 0.0
        assert c.get("/memories/stats").status_code == 401
        assert any("open mode is off" in rec.getMessage() for rec in caplog.records)


def test_a_hub_not_on_loopback_never_runs_open(hub):
    with TestClient(create_app(hub, allow_open=False)) as c:
        assert c.get("/memories/stats").status_code == 401


# --- found 6: unvalidated input answers 500 ---------------------------------------------------------

BAD_REQUESTS = [
    ("POST", "/memories/upload", {"content": "a\u0000b"}),
    ("POST", "/memories/upload", {"content": "\ud800"}),
    ("POST", "/memories/upload", {"content": "ok", "tags": ["a\u0000"]}),
    ("POST", "/memories/search", {"query": "a\u0000b"}),
    ("POST", "/ingest/text", {"text": "a\u0000b"}),
    ("POST", "/ingest", {"files": [{"name": "a\u0000.jsonl", "content": "{}"}]}),
    ("GET", "/api/dashboard/memories?agent=%00", None),
    ("GET", "/skills/%00", None),
    ("GET", "/skills?offset=99999999999999999999", None),
    ("GET", "/clusters?offset=9223372036854775808", None),
    ("GET", "/skills/x?version=99999999999999999999.0.0", None),
]


@pytest.mark.parametrize(
    ("method", "path", "body"), BAD_REQUESTS, ids=[f"{m} {p}" for m, p, _ in BAD_REQUESTS]
)
def test_bad_input_answers_4xx_json(client, hub, method, path, body):
    with hub.db.session() as s:
        before = s.execute(text("SELECT count(*) FROM memories")).scalar_one()
    # json.dumps escapes as the clients did: "\u0000", and a lone "\ud800" httpx would refuse.
    content = None if body is None else json.dumps(body)
    r = client.request(method, path, content=content, headers={"Content-Type": "application/json"})
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/json")
    assert set(r.json()) == {"error", "detail"}
    with hub.db.session() as s:
        assert s.execute(text("SELECT count(*) FROM memories")).scalar_one() == before


def test_multipart_file_name_with_nul_answers_422(client):
    # Written by hand: httpx would percent-encode the NUL, the client sent it raw.
    body = (
        b"--XyZ\r\n"
        b'Content-Disposition: form-data; name="files"; filename="a\x00b.jsonl"\r\n'
        b"Content-Type: application/jsonl\r\n\r\n"
        b'{"role": "user", "content": "hi"}\r\n'
        b"--XyZ--\r\n"
    )
    r = client.post("/ingest", content=body, headers={"Content-Type": "multipart/form-data; boundary=XyZ"})
    assert r.status_code == 422, r.text


@pytest.mark.parametrize("path", ["/ingest", "/mcp", "/memories/upload", "/skills"])
def test_json_nested_50000_deep_answers_400_everywhere(client, path):
    body = "[" * 50_000 + "]" * 50_000
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    r = client.post(path, content=body, headers=headers)
    assert r.status_code == 400, (r.status_code, r.text[:200])
    assert "nested deeper" in r.json()["detail"]


# --- found 7: after a 500 the connection is reset without `Connection: close` -----------------------


def test_an_unhandled_error_answers_json_500_with_connection_close(hub, caplog):
    app = create_app(hub, allow_open=True)

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("SELECT secret FROM t WHERE x = 'param-value'")

    with LiveServer(app) as url, httpx.Client(base_url=url) as http:
        r = http.get("/boom", headers={"X-Request-ID": "req-boom-1"})
        assert r.status_code == 500
        assert r.headers["connection"] == "close"
        assert r.json() == {
            "error": "internal_error",
            "detail": "an internal error occurred (request id req-boom-1)",
        }
        assert "SELECT" not in r.text and "param-value" not in r.text
        # The same client goes on working: it was told to close, and opens a new connection.
        assert http.get("/health").status_code == 200


# --- found 10: jsonb size limit, not "database unavailable" -----------------------------------------


def test_a_program_limit_error_is_not_reported_as_database_unavailable(hub):
    app = create_app(hub, allow_open=True)

    @app.get("/too-big")
    def too_big() -> None:
        with hub.db.session() as s:  # a real 54000 from Postgres, cheaply: an array past its limit
            s.execute(text("SELECT array_fill(0, ARRAY[200000000])"))

    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.get("/too-big")
    assert r.status_code == 413, r.text
    assert r.json()["error"] == "payload_too_large"
    assert "unavailable" not in r.text


def test_pool_exhaustion_answers_503_not_500(make_hub):
    hub = make_hub(db_pool_size=1, db_pool_timeout=0.3)
    held = [hub.db.engine.connect(), hub.db.engine.connect()]  # pool 1 + overflow 1: all of them
    try:
        with TestClient(create_app(hub, allow_open=True), raise_server_exceptions=False) as c:
            r = c.get("/health")
        assert r.status_code == 503, r.text
        assert r.json()["error"] == "database_busy" and r.headers["retry-after"]
    finally:
        for conn in held:
            conn.close()


# --- found 2 (the lock): last_seen_at is not written in the request's transaction ---------------------


def test_requests_do_not_wait_on_the_agents_row_and_last_seen_is_recorded(hub):
    with hub.db.session() as s:
        info, key = create_agent(s, "busy", "default")
    headers = {"Authorization": f"Bearer {key}"}
    with TestClient(create_app(hub, allow_open=False)) as c:
        with hub.db.engine.connect() as locker:
            # Another transaction holds the agent's row lock (as a concurrent request's UPDATE did).
            locker.execute(text("SELECT 1 FROM agents WHERE id = :id FOR UPDATE"), {"id": info.id})
            answers: list[int] = []
            worker = threading.Thread(
                target=lambda: answers.append(c.get("/memories/stats", headers=headers).status_code)
            )
            worker.start()
            worker.join(timeout=15)
            finished = not worker.is_alive()
            locker.rollback()
        worker.join(timeout=30)
        assert finished and answers == [200]  # before: blocked on the row lock until it was released
    with TestClient(create_app(hub, allow_open=False)) as c:
        assert c.get("/memories/stats", headers=headers).status_code == 200
    with hub.db.session() as s:
        seen = s.execute(text("SELECT last_seen_at FROM agents WHERE id = :id"), {"id": info.id}).scalar_one()
    assert seen is not None
