"""The MCP server, driven by the official MCP SDK client: every tool over stdio and over streamable HTTP,
against a hub with published skills (three topics in the default tenant, one in tenant "acme")."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
import httpx
import pytest
import uvicorn
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client

from tests.skill_data import OTHER_TENANT, slugs_of, stock_skills
from ultron.api.app import create_app
from ultron.mcp.server import TOOL_NAMES
from ultron.sdk._local import LocalBackend
from ultron.tenancy import create_agent, local_actor

HAS_INGEST = hasattr(LocalBackend, "ingest_text")
EXPECTED_TOOLS = {name for name in TOOL_NAMES if HAS_INGEST or name != "ingest_text"}
SECRET = "my private note: I am nervous about the database failover drill on Thursday"
DOCKER_TASK = "my docker image build reinstalls every pip package each time"
SKILL_FIELDS = {"slug", "name", "description", "version", "similarity", "categories"}


@pytest.fixture()
def hub(make_hub):  # type: ignore[no-untyped-def]
    """A hub whose skills are published (tests/skill_data.py): the skill tools have something to find."""
    hub = make_hub(dedup_similarity_threshold=0.99, dedup_soft_threshold=0.99)
    stock_skills(hub)
    return hub


@pytest.fixture()
def slugs(hub) -> dict[str, str]:  # type: ignore[no-untyped-def]
    found = {**slugs_of(hub), **slugs_of(hub, OTHER_TENANT)}
    assert set(found) == {"docker", "postgres", "pytest", "kubernetes"}
    return found


async def call(session: ClientSession, tool: str, **arguments: Any) -> Any:
    result = await session.call_tool(tool, arguments)
    assert not result.isError, result.content
    return json.loads(result.content[0].text)


async def call_error(session: ClientSession, tool: str, **arguments: Any) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.isError
    return result.content[0].text


async def exercise_every_tool(session: ClientSession, slugs: dict[str, str]) -> dict[str, Any]:
    """List the tools, then call each one as an agent would in a session; returns what it stored."""
    tools = (await session.list_tools()).tools
    assert {t.name for t in tools} == EXPECTED_TOOLS
    search = next(t for t in tools if t.name == "search_memories")
    assert "before non-trivial work" in search.description.lower()
    upload = next(t for t in tools if t.name == "upload_memory")
    assert "never include secrets" in upload.description.lower()
    find = next(t for t in tools if t.name == "search_skills")
    assert "before a non-trivial task" in find.description.lower() and "get_skill" in find.description
    assert "follow" in next(t for t in tools if t.name == "get_skill").description.lower()

    brief = await call(session, "brief", task="a python cron job")
    assert brief["skills_available"] and brief["tokens"] <= brief["max_tokens"]
    assert brief["items"] and {i["kind"] for i in brief["items"]} == {"skill"}  # no memories of mine yet
    assert "kubernetes" not in {i["slug"] for i in brief["items"]}
    await use_skills(session, slugs)
    stored = await call(
        session,
        "upload_memory",
        content="ModuleNotFoundError: No module named 'pandas' when the nightly cron job runs",
        context="cron uses /usr/bin/python3, not the project venv",
        resolution="put the venv interpreter's absolute path in the crontab line",
        tags=["python", "cron"],
    )
    memory_id = stored["record"]["id"]
    assert stored["decision"] == "created"
    private = await call(session, "upload_memory", content=SECRET, scope="private", valence=-0.4, arousal=0.7)
    found = await call(session, "search_memories", query="pandas cron ModuleNotFoundError", explain=True)
    assert found["results"][0]["record"]["id"] == memory_id
    assert found["results"][0]["explain"]["relevance"] > 0
    details = await call(session, "get_memory_details", ids=[memory_id])
    assert details["records"][0]["resolution"].startswith("put the venv")
    edited = await call(session, "edit", memory_id=memory_id, tags=["python", "cron", "venv"])
    assert edited["tags"] == ["python", "cron", "venv"]
    assert (await call(session, "pin", memory_id=memory_id))["pinned"] is True
    brief = await call(session, "brief", task="cron job cannot import pandas", max_tokens=400)
    assert brief["items"][0]["id"] == memory_id and brief["items"][0]["section"] == "pinned"
    dream = await call(session, "dream", limit=5)
    # newest first: this session's two memories, then the older ones the skills were built from
    assert [i["record"]["id"] for i in dream["items"][:2]] == [private["record"]["id"], memory_id]
    lesson = await call(
        session,
        "reflect",
        content="Cron jobs never see the venv: always use absolute paths",
        source_ids=[memory_id],
    )
    assert lesson["record"]["memory_type"] == "reflection" and lesson["marked"] == [memory_id]
    if HAS_INGEST:
        ingested = await call(
            session,
            "ingest_text",
            text="Lesson learned: the staging Redis evicts keys at 2 GB; raise maxmemory before load tests.",
        )
        assert isinstance(ingested, dict)
    # An id that differs from the stored one in its last digit (replacing it with "0" was the same id
    # whenever the id ended in 0: a 1-in-16 flake).
    other = lesson["record"]["id"][:-1] + ("1" if lesson["record"]["id"].endswith("0") else "0")
    assert "not found" in await call_error(session, "get_memory_details", ids=[other])
    assert (await call(session, "forget", memory_id=lesson["record"]["id"]))["deleted"] == lesson["record"][
        "id"
    ]
    assert "not found" in await call_error(session, "get_memory_details", ids=[lesson["record"]["id"]])
    return {"memory_id": memory_id, "private_id": private["record"]["id"]}


async def use_skills(session: ClientSession, slugs: dict[str, str]) -> None:
    """search_skills then get_skill, as the tool descriptions ask; bad input is a tool error."""
    found = await call(session, "search_skills", query=DOCKER_TASK, limit=3)
    assert found["count"] == 3 and set(found["results"][0]) == SKILL_FIELDS
    assert [r["slug"] for r in found["results"]][0] == slugs["docker"]
    assert slugs["kubernetes"] not in {r["slug"] for r in found["results"]}  # another tenant's
    sims = [r["similarity"] for r in found["results"]]
    assert sims == sorted(sims, reverse=True) and found["results"][0]["version"] == "1.0.0"
    skill = await call(session, "get_skill", slug=slugs["docker"])
    assert (
        skill["skill_md"].startswith(f"---\nname: {skill['name']}\n")
        and "## Symptoms and fixes" in skill["skill_md"]
    )
    assert (skill["version"], skill["versions"], skill["status"]) == ("1.0.0", ["1.0.0"], "active")
    assert (await call(session, "get_skill", slug=slugs["docker"], version="1.0.0")) == skill
    assert "not found" in await call_error(session, "get_skill", slug=slugs["docker"], version="9.9.9")
    assert "MAJOR.MINOR.PATCH" in await call_error(session, "get_skill", slug=slugs["docker"], version="v1")
    assert "not found" in await call_error(session, "get_skill", slug="no-such-skill")
    assert "not found" in await call_error(session, "get_skill", slug=slugs["kubernetes"])
    assert "must not be empty" in await call_error(session, "search_skills", query="  ")
    assert "limit must be between" in await call_error(session, "search_skills", query="docker", limit=0)


# --- stdio ----------------------------------------------------------------------------------------


def _stdio_params(settings, agent: str) -> StdioServerParameters:  # type: ignore[no-untyped-def]
    env = {
        **os.environ,
        "ULTRON_DATABASE_URL": settings.database_url.get_secret_value(),
        "ULTRON_DATA_DIR": str(settings.data_dir),
        "ULTRON_EMBEDDING_PROVIDER": "hash",
        "ULTRON_LLM_PROVIDER": "heuristic",
        "ULTRON_REDACTION_ENABLED": "false",
        "ULTRON_HIT_FLUSH_SECONDS": "0",
    }
    return StdioServerParameters(
        command=sys.executable, args=["-m", "ultron.cli", "mcp", "--agent", agent], env=env
    )


@asynccontextmanager
async def stdio_session(settings, agent: str) -> AsyncIterator[ClientSession]:  # type: ignore[no-untyped-def]
    """`ultron mcp --agent AGENT` as a subprocess, talked to by the SDK's stdio client."""
    async with (
        stdio_client(_stdio_params(settings, agent)) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def other_agent_sees_nothing_private(session: ClientSession, stored: dict[str, Any]) -> None:
    found = await call(session, "search_memories", query="nervous database failover drill", limit=50)
    assert stored["private_id"] not in {r["record"]["id"] for r in found["results"]}
    assert "not found" in await call_error(session, "get_memory_details", ids=[stored["private_id"]])
    brief = await call(session, "brief")
    assert stored["private_id"] not in {i["id"] for i in brief["items"]}
    dream = await call(session, "dream", limit=50)
    assert stored["private_id"] not in {i["record"]["id"] for i in dream["items"]}


def test_every_tool_over_stdio(hub, settings, slugs):
    with hub.db.session() as s:  # `ultron mcp --agent NAME` acts as an existing agent, never creates one
        for name in ("alice", "bob"):
            create_agent(s, name)

    async def main() -> None:
        async with stdio_session(settings, "alice") as session:
            stored = await exercise_every_tool(session, slugs)
        async with stdio_session(settings, "bob") as session:
            await other_agent_sees_nothing_private(session, stored)

    anyio.run(main)


# --- streamable HTTP ------------------------------------------------------------------------------


@contextmanager
def serve(app) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """The hub app on 127.0.0.1 in a thread, with its lifespan (the MCP session manager) running."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the hub did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture()
def keys(hub) -> dict[str, str]:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        keys = {name: create_agent(s, name)[1] for name in ("alice", "bob")}
        keys["frank"] = create_agent(s, "frank", OTHER_TENANT)[1]
        return keys


@asynccontextmanager
async def http_session(url: str, key: str) -> AsyncIterator[ClientSession]:
    """The SDK's streamable HTTP client against the hub's /mcp, with an agent's Bearer key."""
    transport = streamablehttp_client(f"{url}/mcp", headers={"Authorization": f"Bearer {key}"})
    async with transport as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def test_every_tool_over_streamable_http(hub, keys, slugs):
    async def main(url: str) -> None:
        async with http_session(url, keys["alice"]) as session:
            stored = await exercise_every_tool(session, slugs)
        async with http_session(url, keys["bob"]) as session:
            await other_agent_sees_nothing_private(session, stored)
            # bob may read alice's shared memory but not change it.
            assert "did not contribute" in await call_error(session, "forget", memory_id=stored["memory_id"])
            supersede_docker(hub, slugs["docker"])
            found = await call(session, "search_skills", query=DOCKER_TASK, limit=10)
            assert [r["slug"] for r in found["results"]][0] == "container-image-caching"
            assert slugs["docker"] not in {r["slug"] for r in found["results"]}
            old = await call(session, "get_skill", slug=slugs["docker"])
            assert (old["status"], old["superseded_by"]) == ("superseded", "container-image-caching")
        async with http_session(url, keys["frank"]) as session:  # tenant acme: its own skill only
            found = await call(session, "search_skills", query=DOCKER_TASK, limit=10)
            assert [r["slug"] for r in found["results"]] == [slugs["kubernetes"]]
            assert (await call(session, "get_skill", slug=slugs["kubernetes"]))["status"] == "active"
            assert "not found" in await call_error(session, "get_skill", slug=slugs["postgres"])
            brief = await call(session, "brief", task=DOCKER_TASK)
            assert [i["slug"] for i in brief["items"]] == [slugs["kubernetes"]]

    with serve(create_app(hub, allow_open=False)) as url:
        anyio.run(main, url)


def supersede_docker(hub, slug: str) -> None:  # type: ignore[no-untyped-def]
    """A renamed skill, as a recrystallization publishes it: the old slug superseded, its cluster moved on."""
    from ultron.db.models import KnowledgeCluster
    from ultron.skills.format import FIRST, SkillDoc

    with hub.db.session() as s:
        tenant = local_actor(s).tenant_id
        old = hub.skills.latest(s, tenant, slug)
        cluster = s.get(KnowledgeCluster, (old.source_cluster_id, tenant))
        doc = SkillDoc("Container Image Caching", old.description, old.body, {})
        hub.skills.supersede(s, tenant, slug)
        cluster.superseded_slugs = [*cluster.superseded_slugs, slug]
        hub.skills.save(s, tenant, "container-image-caching", FIRST, doc, 0.9, cluster.id, cluster)


def test_http_mcp_needs_a_valid_key(hub, keys):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream"}
    with serve(create_app(hub, allow_open=False)) as url:
        missing = httpx.post(f"{url}/mcp", json=body, headers=headers)
        wrong = httpx.post(f"{url}/mcp", json=body, headers={**headers, "Authorization": "Bearer ult_nope"})
    assert missing.status_code == 401 and missing.json()["error"] == "unauthorized"
    assert wrong.status_code == 401 and "unknown API key" in wrong.json()["detail"]


def test_skill_tools_against_a_remote_hub_match_the_in_process_ones(hub, keys, slugs):
    """`ultron mcp --url`: the skill tools go through the SDK's HTTP backend and answer like the hub."""
    from ultron.errors import NotFound, ValidationFailed
    from ultron.mcp.skills import HubSkills, RemoteSkills, skills_of
    from ultron.sdk import Ultron

    with serve(create_app(hub, allow_open=False)) as url:
        client = Ultron(url, api_key=keys["alice"])
        try:
            remote = skills_of(client._backend)
            assert isinstance(remote, RemoteSkills)
            with hub.db.session() as s:
                local = HubSkills(hub, local_actor(s))
            found = remote.search_skills(DOCKER_TASK, 3)
            assert found == local.search_skills(DOCKER_TASK, 3) and found[0]["slug"] == slugs["docker"]
            got = remote.get_skill(slugs["docker"], None)
            want = local.get_skill(slugs["docker"], None)
            assert got == want and got["skill_md"].startswith("---\nname:")
            with pytest.raises(NotFound):
                remote.get_skill("no-such-skill", None)
            with pytest.raises(ValidationFailed):
                remote.get_skill(slugs["docker"], "1.x")
            with pytest.raises(ValidationFailed):
                remote.search_skills("   ", 3)
        finally:
            client.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_mcp_against_a_dead_hub_says_no_hub_in_one_line(tmp_path):
    """`ultron mcp --url` with nothing listening: each call a clear tool error, one log line, no traceback."""
    url = f"http://127.0.0.1:{_free_port()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTRON_")}
    env["ULTRON_DATA_DIR"] = str(tmp_path / "data")
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ultron.cli", "mcp", "--url", url, "--api-key", "ult_x"], env=env
    )
    errlog = (tmp_path / "stderr.txt").open("w+")

    async def run() -> list[str]:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return [
                await call_error(session, "search_memories", query="docker"),
                await call_error(session, "brief", task="fix the build"),
            ]

    messages = anyio.run(run)
    for message in messages:
        assert f"no_hub: no hub at {url}:" in message, message
        assert "ultron serve" in message
    errlog.seek(0)
    stderr = [line for line in errlog.read().splitlines() if line.strip()]
    assert "Traceback" not in "\n".join(stderr)
    assert len(stderr) <= len(messages), stderr  # at most one line per failed call


def test_mcp_against_a_hub_url_loads_no_orm_numpy_or_fastapi(tmp_path):
    """`ultron mcp --url` is an HTTP client: naming the database's, the providers' and REST's errors must not
    import SQLAlchemy, numpy or FastAPI (ultron.mcp.errors did: 0.9 s of its 1.9 s start-up, quiet box)."""
    code = (
        "import sys\n"
        "from ultron.cli import main\n"
        "try:\n"
        f"    main(['mcp', '--url', 'http://127.0.0.1:{_free_port()}'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "names = ('sqlalchemy', 'numpy', 'fastapi', 'ultron.db.models')\n"
        "print('LOADED:' + ','.join(m for m in names if m in sys.modules), file=sys.stderr)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTRON_")}
    env["ULTRON_DATA_DIR"] = str(tmp_path / "data")
    out = subprocess.run([sys.executable, "-c", code], input="", capture_output=True, text=True, env=env)
    assert "LOADED:" in out.stderr, out.stderr  # the server ran and ended at the end of its input
    assert out.stderr.split("LOADED:")[-1].strip() == "", out.stderr


def test_database_and_provider_failures_keep_rest_words():
    """The error mapping that loads its exception types only once they can have been raised still names a
    database or provider failure as REST does, and anything else an internal error with a request id."""
    from mcp.server.fastmcp.exceptions import ToolError
    from sqlalchemy.exc import DataError, OperationalError

    from ultron.mcp.errors import tool_errors
    from ultron.providers.base import ProviderError

    cases = [
        (DataError("SELECT 1", {}, Exception("numeric field overflow")), "validation_error: a value is out"),
        (OperationalError("SELECT 1", {}, Exception("gone")), "database_unavailable:"),
        (ProviderError("dashscope", "slow", kind="timeout"), "the dashscope provider timed out"),
        (RuntimeError("boom"), "internal_error: an internal error occurred (request id"),
    ]
    for raised, words in cases:
        with pytest.raises(ToolError) as caught, tool_errors():
            raise raised
        assert words in str(caught.value), (raised, str(caught.value))
        assert "SELECT" not in str(caught.value) and "boom" not in str(caught.value)
