"""The MCP tools, built on the official `mcp` SDK (FastMCP).

Every tool runs on a *backend*: the same object the Python SDK uses (`LocalBackend` in-process,
`HttpBackend` against a running hub, or a `LocalBackend` bound to the agent of an HTTP request), so
MCP, the SDK and the HTTP API share one code path and one set of rules (scopes, redaction, hits).
Backend calls block (database, embedding, LLM), so they run in a worker thread, never on the loop.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Literal
from uuid import UUID

import anyio
from mcp.server.fastmcp import Context, FastMCP
from pydantic import BaseModel

from ultron import __version__
from ultron.companion.schemas import ReflectionRequest
from ultron.mcp.errors import tool_errors, validate_call
from ultron.mcp.skills import skills_of
from ultron.memory.filters import search_filters
from ultron.memory.schemas import MemoryPatch, UploadRequest

INSTRUCTIONS = """Ultron is a memory hub shared by many agents: what one agent learned, the others can find.

- At the start of a session call `brief` (optionally with the task) for pinned rules, what is known
  about the person and hot memories.
- Before a non-trivial task call `search_skills`: a skill is a tested procedure distilled from many
  agents' experience. When one matches, load it with `get_skill` and follow its SKILL.md.
- Before non-trivial work (debugging an error, touching an unfamiliar system, a task that smells
  familiar) call `search_memories`; read promising hits with `get_memory_details`.
- After solving something others could hit again, call `upload_memory` with objective, reusable
  experience: the symptom or fact, the context (versions, environment) and the resolution.
  Never upload secrets, credentials, tokens or identifying data such as e-mail addresses, phone or ID
  numbers (the hub redacts, but do not rely on it), and not chit-chat or one-off state.
- A companion remembering its person (a preference, a life event they told you) uploads that with
  scope="private": only you will see it, and it stays for months even when unused.
- Fix what is wrong with `edit`; remove what is false or harmful with `forget`.
"""

DetailLevel = Literal["l0", "l1"]
Tier = Literal["hot", "warm", "cold"]
Scope = Literal["shared", "private", "group"]


def _json(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_json(v) for v in value]
    return value


def build_server(
    backend_for: Callable[[Context], Any], *, ingest: bool = True, skills: bool = True, **fastmcp: Any
) -> FastMCP:
    """A FastMCP server whose tools call `backend_for(ctx)` (the calling agent's backend); the skill
    tools need a backend that holds the hub (ultron/mcp/skills.py)."""
    server = FastMCP("ultron", instructions=INSTRUCTIONS, **fastmcp)
    server._mcp_server.version = __version__

    async def run(ctx: Context, method: str, *args: Any, **kwargs: Any) -> Any:
        with tool_errors():
            validate_call(method, args, kwargs)
            backend = backend_for(ctx)
            call = functools.partial(getattr(backend, method), *args, **kwargs)
            return _json(await anyio.to_thread.run_sync(call))

    async def run_skills(ctx: Context, method: str, *args: Any) -> Any:
        with tool_errors():
            validate_call(method, args, {})
            tools = skills_of(backend_for(ctx))
            if tools is None:  # cannot happen where skills=True was chosen for a backend with the hub
                raise RuntimeError("skills are not available on this backend")
            return await anyio.to_thread.run_sync(functools.partial(getattr(tools, method), *args))

    @server.tool()
    async def search_memories(
        query: str,
        ctx: Context,
        limit: int = 10,
        tier: Tier | None = None,
        detail_level: DetailLevel = "l0",
        explain: bool = False,
        valence: float | None = None,
        arousal: float | None = None,
        # plain strings: the filters' own validation answers (one layer, the same words as REST)
        types: list[str] | None = None,
        tags: list[str] | None = None,
        agents: list[str] | None = None,
        scopes: list[str] | None = None,
        thread: str | None = None,
        occurred_after: str | None = None,
        occurred_before: str | None = None,
        created_after: str | None = None,
        created_before: str | None = None,
    ) -> dict[str, Any]:
        """Search the shared memory BEFORE non-trivial work: an error message, an unfamiliar tool or
        system, a task that may have been solved before. Hybrid (semantic + keyword) search; returns
        one-line summaries (detail_level l0) or overviews (l1) ranked by score. Read the promising ones
        in full with get_memory_details. valence (-1..1) / arousal (0..1) add emotional resonance;
        explain shows every score factor (ripple, resonance, serendipity included). A result whose
        confidence is "low" is probably unrelated to the query: treat a search of only those as no match.
        Filters (AND across fields, any of a list): types, tags, agents (names), scopes, thread, and
        occurred_/created_ after/before (ISO 8601 times)."""
        with tool_errors():
            filters = search_filters(
                types=types,
                tags=tags,
                agents=agents,
                scopes=scopes,
                thread=thread,
                occurred_after=occurred_after,
                occurred_before=occurred_before,
                created_after=created_after,
                created_before=created_before,
            )
        options = {
            "tier": tier,
            "limit": limit,
            "detail_level": detail_level,
            "explain": explain,
            "filters": filters,
        }
        signals = {"valence": valence, "arousal": arousal}
        results = await run(
            ctx, "search", query, **options, **{k: v for k, v in signals.items() if v is not None}
        )
        return {"count": len(results), "results": results}

    @server.tool()
    async def get_memory_details(ids: list[str], ctx: Context) -> dict[str, Any]:
        """Full text (content, context, resolution) of memories found by search_memories, by id. Reading
        a memory tells the hub it was useful, which keeps it HOT."""
        records = await run(ctx, "details", [UUID(i) for i in ids])
        return {"count": len(records), "records": records}

    @server.tool()
    async def upload_memory(
        content: str,
        ctx: Context,
        context: str = "",
        resolution: str = "",
        tags: list[str] | None = None,
        scope: Scope = "shared",
        group: str | None = None,
        valence: float | None = None,
        arousal: float | None = None,
    ) -> dict[str, Any]:
        """Store one objective, reusable experience after solving something another agent could hit
        again: content = the symptom, fact or lesson; context = where (task, environment, versions);
        resolution = what fixed it or what to do. NEVER include secrets, credentials, tokens or identifying
        data (e-mail, phone, ID numbers); no chit-chat, no one-off state. Near duplicates are merged
        automatically. scope: shared (default, the whole tenant), private (only you: what a person told
        you about themselves) or group (with group=NAME)."""
        req = UploadRequest(
            content=content,
            context=context,
            resolution=resolution,
            tags=tags or [],
            scope=scope,
            group=group,
            valence=valence,
            arousal=arousal,
        )
        return await run(ctx, "upload", req)

    if ingest:

        @server.tool()
        async def ingest_text(text: str, ctx: Context) -> dict[str, Any]:
            """Hand the hub a longer free text (notes, a write-up, a log excerpt); it extracts the
            reusable memories in it and uploads each. Same rules as upload_memory: no secrets."""
            return await run(ctx, "ingest_text", text)

    if skills:

        @server.tool()
        async def search_skills(query: str, ctx: Context, limit: int = 5) -> dict[str, Any]:
            """Search the hub's skills BEFORE a non-trivial task (a build or deploy problem, a migration,
            a debugging session, any job with a known procedure). A skill is a step-by-step procedure
            distilled from many agents' memories and verified against them. Returns slug, name,
            description, version and similarity (cosine to the query), best first. When one fits your
            task, load it with get_skill and follow it."""
            results = await run_skills(ctx, "search_skills", query, limit)
            return {"count": len(results), "results": results}

        @server.tool()
        async def get_skill(slug: str, ctx: Context, version: str | None = None) -> dict[str, Any]:
            """Load a skill found by search_skills (or listed in the brief) and FOLLOW its SKILL.md: when
            to use it, the steps in order, edge cases and fallbacks; [m:xxxxxxxx] cites the memories a
            step comes from. version: MAJOR.MINOR.PATCH (default: the latest). Returns skill_md, the
            version, every version (newest first) and status; a superseded skill names the slug that
            replaced it in superseded_by: load that one instead."""
            return await run_skills(ctx, "get_skill", slug, version)

    @server.tool()
    async def brief(ctx: Context, task: str | None = None, max_tokens: int | None = None) -> dict[str, Any]:
        """Call at the START of a session: what to know before working, within max_tokens. Pinned
        memories first, then what is known about the person (life, preferences), then HOT memories
        most relevant to the optional task hint, then relevant skills; each item says why it is there."""
        return await run(ctx, "brief", task, max_tokens)

    @server.tool()
    async def edit(
        memory_id: str,
        ctx: Context,
        content: str | None = None,
        context: str | None = None,
        resolution: str | None = None,
        tags: list[str] | None = None,
        tier: Tier | None = None,
        pinned: bool | None = None,
        valence: float | None = None,
        arousal: float | None = None,
        importance: int | None = None,
    ) -> dict[str, Any]:
        """Correct a memory you contributed (admins: any): changed text is re-redacted, re-embedded and
        re-summarized. pinned=true keeps it in every brief and out of decay. valence (-1..1), arousal
        (0..1) and importance (1-10, 5 neutral) change how it ranks."""
        changes = {
            "content": content,
            "context": context,
            "resolution": resolution,
            "tags": tags,
            "tier": tier,
            "pinned": pinned,
            "valence": valence,
            "arousal": arousal,
            "importance": importance,
        }
        patch = MemoryPatch(**{k: v for k, v in changes.items() if v is not None})
        return await run(ctx, "edit", UUID(memory_id), patch)

    @server.tool()
    async def forget(memory_id: str, ctx: Context) -> dict[str, Any]:
        """Delete a memory for good (one you contributed; admins: any). Use for what is false or harmful,
        not for what is merely old: unused memories fade by themselves."""
        await run(ctx, "delete", UUID(memory_id))
        return {"deleted": memory_id}

    @server.tool()
    async def pin(memory_id: str, ctx: Context, pinned: bool = True) -> dict[str, Any]:
        """Pin (or unpin: pinned=false) a memory: pinned ones never decay, never archive, lead the brief."""
        return await run(ctx, "pin", UUID(memory_id), pinned)

    @server.tool()
    async def resolve(memory_id: str, ctx: Context, resolved: bool = True) -> dict[str, Any]:
        """Mark a memory resolved (the matter is settled; resolved=false reopens it): it is kept and still
        found, but sinks in search and leaves the brief's HOT and personal sections."""
        return await run(ctx, "resolve", UUID(memory_id), resolved)

    @server.tool()
    async def dream(ctx: Context, limit: int = 10) -> dict[str, Any]:
        """Reflection time: recent memories you have not reflected on yet, each with a prompt. Answer with
        reflect(content, source_ids=[...])."""
        return await run(ctx, "dream", limit)

    @server.tool()
    async def reflect(
        content: str,
        ctx: Context,
        source_ids: list[str] | None = None,
        context: str = "",
        resolution: str = "",
        tags: list[str] | None = None,
        scope: Scope = "private",
    ) -> dict[str, Any]:
        """Store your own lesson (a reflection: kept apart from events, never merged into them) and mark
        the memories it reflects on (source_ids) so dream stops offering them."""
        req = ReflectionRequest(
            content=content,
            context=context,
            resolution=resolution,
            tags=tags or [],
            source_ids=[UUID(i) for i in source_ids or []],
            scope=scope,
        )
        return await run(ctx, "reflect", req)

    return server


TOOL_NAMES = (
    "search_memories",
    "get_memory_details",
    "upload_memory",
    "ingest_text",
    "search_skills",
    "get_skill",
    "brief",
    "edit",
    "forget",
    "pin",
    "resolve",
    "dream",
    "reflect",
)
