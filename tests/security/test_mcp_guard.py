"""MCP under the same rules as REST (issue 16, found 8 and 9), and property-based inputs for every tool.

The tools run over the MCP SDK's in-memory transport on a LocalBackend of a real hub (real Postgres).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import ClientSession
from mcp.shared.memory import create_connected_server_and_client_session

from ultron.mcp.server import TOOL_NAMES, build_server
from ultron.sdk._local import LocalBackend

# Seeds of trouble: NUL, lone surrogates, bidi, very long text, SQL-looking text, numbers at the edges.
NASTY_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        ["", "\x00", "a\x00b", "\ud800", "x\udfff", "\u202etxt.exe", "'; DROP TABLE memories;--"]
    ),
    st.builds(lambda n: "q" * n, st.integers(3990, 4100)),
)
NASTY_INT = st.one_of(st.integers(-5, 300), st.sampled_from([0, -1, 2**31, 2**63 - 1, 2**63, -(2**63) - 1]))


@pytest.fixture()
def mcp_session(hub) -> Iterator[tuple[BlockingPortal, ClientSession]]:  # type: ignore[no-untyped-def]
    backend = LocalBackend(hub, owns_hub=False)
    server = build_server(lambda ctx: backend)
    with start_blocking_portal() as portal:
        connected = create_connected_server_and_client_session(server._mcp_server)
        with portal.wrap_async_context_manager(connected) as session:
            yield portal, session


def call(portal: BlockingPortal, session: ClientSession, tool: str, args: dict[str, Any]) -> tuple[bool, str]:
    result = portal.call(session.call_tool, tool, args)
    return bool(result.isError), result.content[0].text if result.content else ""


def test_upload_with_nul_is_a_tool_error_without_sql(mcp_session, hub):
    portal, session = mcp_session
    is_error, message = call(portal, session, "upload_memory", {"content": "a\x00b"})
    assert is_error
    assert message.endswith(
        "validation_error: content contains a NUL character (\\u0000): text cannot hold binary data"
    ), message
    for leak in ("INSERT", "SELECT", "tenant_id", "agent_id", "embedding", "Traceback"):
        assert leak not in message


@pytest.mark.parametrize(
    ("tool", "arg"), [("search_memories", "query"), ("brief", "task"), ("search_skills", "query")]
)
def test_mcp_applies_the_rest_4000_character_limits(mcp_session, tool, arg):
    portal, session = mcp_session
    is_error, message = call(portal, session, tool, {arg: "x" * 1_000_000})
    assert is_error
    assert f"{arg} is 1000000 characters; the limit is 4000" in message
    assert not call(portal, session, tool, {arg: "x" * 4000})[0]


def _arguments(tool: str) -> st.SearchStrategy[dict[str, Any]]:
    ids = st.lists(st.one_of(st.uuids().map(str), NASTY_TEXT), max_size=3)
    per_tool: dict[str, dict[str, st.SearchStrategy[Any]]] = {
        "search_memories": {"query": NASTY_TEXT, "limit": NASTY_INT},
        "get_memory_details": {"ids": ids},
        "upload_memory": {
            "content": NASTY_TEXT,
            "context": NASTY_TEXT,
            "tags": st.lists(NASTY_TEXT, max_size=3),
        },
        "ingest_text": {"text": NASTY_TEXT},
        "search_skills": {"query": NASTY_TEXT, "limit": NASTY_INT},
        "get_skill": {
            "slug": NASTY_TEXT,
            "version": st.one_of(st.none(), NASTY_TEXT, st.just("99999999999999999999.0.0")),
        },
        "brief": {"task": st.one_of(st.none(), NASTY_TEXT), "max_tokens": st.one_of(st.none(), NASTY_INT)},
        "edit": {"memory_id": st.one_of(st.uuids().map(str), NASTY_TEXT), "content": NASTY_TEXT},
        "forget": {"memory_id": st.one_of(st.uuids().map(str), NASTY_TEXT)},
        "pin": {"memory_id": st.one_of(st.uuids().map(str), NASTY_TEXT)},
        "resolve": {"memory_id": st.one_of(st.uuids().map(str), NASTY_TEXT), "resolved": st.booleans()},
        "dream": {"limit": NASTY_INT},
        "reflect": {"content": NASTY_TEXT, "source_ids": ids},
    }
    return st.fixed_dictionaries({}, optional=per_tool[tool])


@pytest.mark.parametrize("tool", TOOL_NAMES)
def test_every_mcp_tool_answers_nasty_input_without_an_internal_error(mcp_session, hub, tool):
    portal, session = mcp_session

    @settings(max_examples=25, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
    @given(args=_arguments(tool))
    def check(args: dict[str, Any]) -> None:
        is_error, message = call(portal, session, tool, args)
        if is_error:
            assert "internal_error" not in message, (args, message)
            assert "Traceback" not in message and "INSERT INTO" not in message and "SELECT " not in message

    check()
    # The hub is alive afterwards.
    assert not call(portal, session, "upload_memory", {"content": "still alive after the fuzz"})[0]
