"""Search filters (types, tags, agents, scopes, thread, occurred/created after/before) through REST, the SDK
(HTTP and in-process), MCP and the CLI, on a store where each filter changes the top result."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from sqlalchemy import text

from tests.mcp.test_mcp import serve
from ultron.api.app import create_app
from ultron.cli import main
from ultron.errors import ValidationFailed
from ultron.memory.filters import SearchFilters, search_filters
from ultron.memory.schemas import UploadRequest
from ultron.sdk import Ultron
from ultron.tenancy import authenticate, create_agent

TENANT = "filters"
QUERY = "docker build fails behind the corporate proxy"
JUNE_2025 = datetime(2025, 6, 1, tzinfo=UTC)

# name -> (agent, upload fields, created_at override). "best" matches the query best and passes no filter
# below; each other memory is the one its filter leaves on top.
STORE: dict[str, tuple[str, dict[str, Any], datetime | None]] = {
    "best": (
        "alpha",
        {
            "content": "docker build fails behind the corporate proxy: error connecting to the registry",
            "resolution": "set HTTP_PROXY and HTTPS_PROXY as build args",
            "tags": ["docker"],
        },
        datetime(2022, 1, 1, tzinfo=UTC),
    ),
    "preference": (
        "alpha",
        {"content": "I prefer docker builds behind the proxy to use the BuildKit cache", "tags": ["docker"]},
        None,
    ),
    "tagged": (
        "alpha",
        {"content": "docker build behind a proxy in CI: mirror the base image", "tags": ["ci"]},
        None,
    ),
    "beta": (
        "beta",
        {"content": "docker build fails at the proxy: the CA bundle is missing", "tags": ["docker"]},
        None,
    ),
    "private": (
        "alpha",
        {"content": "my docker build at home fails behind the router proxy", "scope": "private"},
        None,
    ),
    "thread": (
        "alpha",
        {
            "content": "Sam: the docker build keeps failing at the office proxy",
            "thread": "chat-7",
            "position": 0,
        },
        None,
    ),
    "recent": (
        "alpha",
        {"content": "docker build broke when the proxy was replaced", "occurred_at": "2026-02-01T09:00:00Z"},
        None,
    ),
    "old": (
        "alpha",
        {
            "content": "docker build failed when the proxy certificate expired",
            "occurred_at": "2024-03-01T09:00:00Z",
        },
        None,
    ),
    "ancient": (
        "alpha",
        {"content": "the first docker build behind the proxy took an hour"},
        datetime(2020, 1, 1, tzinfo=UTC),
    ),
}

# filter -> the memory it leaves on top (None: any but "best"), and how a result's record passes it
CASES: list[tuple[str, dict[str, Any], str | None]] = [
    ("types", {"types": ["preference"]}, "preference"),
    ("tags", {"tags": ["ci", "nightly"]}, "tagged"),
    ("agents", {"agents": ["beta"]}, "beta"),
    ("scopes", {"scopes": ["private"]}, "private"),
    ("thread", {"thread": "chat-7"}, "thread"),
    ("occurred_after", {"occurred_after": "2026-01-01T00:00:00Z"}, "recent"),
    ("occurred_before", {"occurred_before": "2025-01-01T00:00:00Z"}, "old"),
    ("created_after", {"created_after": "2023-01-01T00:00:00Z"}, None),
    ("created_before", {"created_before": "2021-01-01"}, "ancient"),
]


def _passes(record: dict[str, Any], agent: str, flt: dict[str, Any]) -> bool:
    f = SearchFilters.model_validate(flt)
    created = datetime.fromisoformat(record["created_at"])
    happened = datetime.fromisoformat(record["occurred_at"]) if record["occurred_at"] else created
    return (
        (f.types is None or record["memory_type"] in f.types)
        and (f.tags is None or bool(set(record["tags"]) & set(f.tags)))
        and (f.agents is None or agent in f.agents)
        and (f.scopes is None or record["scope"] in f.scopes)
        and (f.thread is None or record["thread"] == f.thread)
        and (f.occurred_after is None or happened >= f.occurred_after)
        and (f.occurred_before is None or happened < f.occurred_before)
        and (f.created_after is None or created >= f.created_after)
        and (f.created_before is None or created < f.created_before)
    )


@pytest.fixture()
def store(make_hub) -> Iterator[dict[str, Any]]:  # type: ignore[no-untyped-def]
    """The hub served on loopback with keys required, the store above, and the agents' keys."""
    hub = make_hub(dedup_similarity_threshold=0.99, dedup_soft_threshold=0.99)
    with hub.db.session() as s:
        keys = {name: create_agent(s, name, TENANT)[1] for name in ("alpha", "beta")}
    with hub.db.session() as s:
        actors = {name: authenticate(s, key) for name, key in keys.items()}
    ids: dict[str, str] = {}
    for name, (agent, fields, created) in STORE.items():
        fields = {"occurred_at": JUNE_2025.isoformat(), **fields}
        with hub.db.session() as s:
            up = hub.memory.upload(s, actors[agent], UploadRequest(**fields))
            assert up.decision == "created", name
            ids[name] = str(up.record.id)
            if created is not None:
                s.execute(
                    text("UPDATE memories SET created_at = :c WHERE id = :i"),
                    {"c": created, "i": up.record.id},
                )
    with hub.db.session() as s:
        types = dict(s.execute(text("SELECT id::text, memory_type FROM memories")).all())
    assert types[ids["preference"]] == "preference" and types[ids["best"]] != "preference"
    with serve(create_app(hub, allow_open=False)) as url:  # with its lifespan: MCP's session manager
        yield {"hub": hub, "url": url, "keys": keys, "ids": ids, "names": {v: k for k, v in ids.items()}}


def _agent_of(store: dict[str, Any], memory_id: str) -> str:
    return STORE[store["names"][memory_id]][0]


def _check(
    store: dict[str, Any], flt: dict[str, Any], expected: str | None, results: list[dict[str, Any]]
) -> None:
    assert results, flt
    top = store["names"][results[0]["record"]["id"]]
    assert top != "best", flt
    if expected is not None:
        assert top == expected, (flt, [store["names"][r["record"]["id"]] for r in results])
    for r in results:
        assert _passes(r["record"], _agent_of(store, r["record"]["id"]), flt), (flt, r["record"])


def _rest(store: dict[str, Any], body: dict[str, Any]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {store['keys']['alpha']}"}
    return httpx.post(
        f"{store['url']}/memories/search", json={"query": QUERY, **body}, headers=headers, timeout=30
    )


def test_unfiltered_the_best_match_leads(store):
    results = _rest(store, {}).json()["results"]
    assert store["names"][results[0]["record"]["id"]] == "best"


def test_each_filter_through_rest_and_both_sdks(store):
    with (
        Ultron(base_url=store["url"], api_key=store["keys"]["alpha"]) as client,
        Ultron(hub=store["hub"], agent="alpha", tenant=TENANT) as local,
    ):
        for _, flt, expected in CASES:
            response = _rest(store, flt)
            assert response.status_code == 200, response.text
            _check(store, flt, expected, response.json()["results"])
            for sdk in (client, local):
                found = sdk.search_memories(QUERY, **flt)
                _check(store, flt, expected, [r.model_dump(mode="json") for r in found])


def test_filters_combine_and_across_fields_or_within_one(store):
    either = {"tags": ["ci", "nightly"], "agents": ["alpha", "beta"]}
    _check(store, either, "tagged", _rest(store, either).json()["results"])
    both = {"tags": ["ci"], "agents": ["beta"]}  # the ci memory is alpha's: nothing passes both
    assert _rest(store, both).json()["results"] == []
    types_and_scope = {"types": ["error", "pattern", "life", "preference"], "scopes": ["private"]}
    _check(store, types_and_scope, "private", _rest(store, types_and_scope).json()["results"])


def test_each_filter_through_mcp(store):
    async def run() -> None:
        headers = {"Authorization": f"Bearer {store['keys']['alpha']}"}
        async with (
            streamablehttp_client(f"{store['url']}/mcp", headers=headers) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            for _, flt, expected in CASES:
                result = await session.call_tool("search_memories", {"query": QUERY, **flt})
                assert not result.isError, result.content
                _check(store, flt, expected, json.loads(result.content[0].text)["results"])
            bad = await session.call_tool("search_memories", {"query": QUERY, "types": ["nonsense"]})
            assert bad.isError and "validation_error" in bad.content[0].text

    anyio.run(run)


CLI_FLAGS = {
    "types": "--type",
    "tags": "--tag",
    "agents": "--by-agent",
    "scopes": "--scope",
    "thread": "--thread",
    "occurred_after": "--after",
    "occurred_before": "--before",
    "created_after": "--created-after",
    "created_before": "--created-before",
}


def test_each_filter_through_the_cli(store, capsys):
    remote = ["--url", store["url"], "--api-key", store["keys"]["alpha"]]
    for field, flt, expected in CASES:
        argv = ["memory", "search", QUERY, "--json", *remote]
        values = flt[field] if isinstance(flt[field], list) else [flt[field]]
        for value in values:
            argv += [CLI_FLAGS[field], value]
        capsys.readouterr()
        assert main(argv) == 0, capsys.readouterr().err
        _check(store, flt, expected, json.loads(capsys.readouterr().out))
    capsys.readouterr()
    assert main(["memory", "search", QUERY, "--after", "yesterday-ish", *remote]) == 2  # bad input
    err = capsys.readouterr().err
    assert err.startswith("error:") and "occurred_after" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"types": ["nonsense"]}, "types"),
        ({"occurred_after": "not a date"}, "occurred_after"),
        ({"created_after": "2026-02-01", "created_before": "2026-01-01"}, "earlier than"),
        ({"scopes": ["everyone"]}, "scopes"),
        ({"tags": []}, "tags"),
        ({"thread": "x\u0000y"}, "NUL"),
    ],
)
def test_a_bad_filter_is_a_422_everywhere_and_changes_nothing(store, body, words):
    before = _rest(store, {}).json()["count"]
    response = _rest(store, body)
    assert response.status_code == 422 and words in response.text, response.text
    with pytest.raises(ValidationFailed, match=words):
        search_filters(body)
    assert _rest(store, {}).json()["count"] == before


def test_a_filtered_search_fills_its_limit_from_inside_the_statement(store):
    """Forty better matches that fail the filter: a filter applied after the limit would return nothing."""
    hub = store["hub"]
    with hub.db.session() as s:
        actor = authenticate(s, store["keys"]["alpha"])
    for i in range(40):
        with hub.db.session() as s:
            hub.memory.upload(
                s,
                actor,
                UploadRequest(
                    content=f"docker build fails behind the corporate proxy, case {i} of host h{i}"
                ),
            )
    for i in range(6):
        with hub.db.session() as s:
            hub.memory.upload(
                s, actor, UploadRequest(content=f"proxy note {i}: rotate log {i * 7}", tags=["rare"])
            )
    plain = _rest(store, {"limit": 5}).json()["results"]
    assert not {"rare"} & {t for r in plain for t in r["record"]["tags"]}
    filtered = _rest(store, {"limit": 5, "tags": ["rare"]}).json()["results"]
    assert len(filtered) == 5 and all(r["record"]["tags"] == ["rare"] for r in filtered)
