"""App factory and the memory endpoints.

Handlers are plain `def`: FastAPI runs them in its threadpool, so database, embedding and LLM calls
never block the event loop. Each request authenticates in one short read-only transaction and does its
work in one more; no transaction is open while a provider (embedding, LLM) is called (docs/security.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar
from uuid import UUID

from fastapi import APIRouter, FastAPI, Request, Response
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import text
from sqlalchemy.orm import Session
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint

from ultron import __version__
from ultron.api.auth import AuthPolicy
from ultron.api.errors import ErrorBody, install_error_handlers
from ultron.db.engine import lsn_text, lsn_value
from ultron.errors import PayloadTooLarge, ValidationFailed
from ultron.hub import Hub, build_worker
from ultron.memory.schemas import (
    Contribution,
    DetailLevel,
    MemoryPatch,
    MemoryRecord,
    MemoryStats,
    SearchResult,
    SplitResult,
    Tier,
    UploadBatchRequest,
    UploadBatchResult,
    UploadRequest,
    UploadResult,
)
from ultron.tenancy import Actor

T = TypeVar("T")
P = TypeVar("P")

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (400, 401, 403, 404, 409, 413, 422, 503)
}


class SearchRequest(BaseModel):
    query: str = Field(..., min_length=1, max_length=4000)
    tier: Tier | None = None
    limit: int | None = Field(None, ge=1, le=200)
    detail_level: DetailLevel = "l0"
    explain: bool = False
    valence: float | None = Field(None, ge=-1, le=1, description="Mood to resonate with (companion)")
    arousal: float | None = Field(None, ge=0, le=1, description="Arousal to resonate with (companion)")
    serendipity: bool | None = Field(None, description="Surface old memories when little is found")
    min_relevance: float | None = Field(
        None,
        ge=-1,
        le=1,
        description="Relevance floor for this search (default: the model's; docs/ranking.md)",
    )


class SearchResponse(BaseModel):
    count: int
    results: list[SearchResult]


class DetailsRequest(BaseModel):
    ids: list[UUID] = Field(..., min_length=1, max_length=100)


class DetailsResponse(BaseModel):
    count: int
    records: list[MemoryRecord]


class Health(BaseModel):
    status: str
    database: str
    version: str


def authenticate(request: Request) -> Actor:
    """The calling agent, resolved in its own short read-only transaction."""
    hub: Hub = request.app.state.hub
    with hub.db.session() as session:
        return request.app.state.auth.actor(request, session)  # type: ignore[no-any-return]


# Read-your-writes across API processes (docs/operations.md#read-replicas): a write's response names the
# primary's WAL position after it; a client that sends it back on its reads is served by a replica only
# once that replica has replayed past it. The SDK's HTTP client does this by itself.
WRITTEN_HEADER = "X-Ultron-Written-LSN"
READ_AFTER_HEADER = "X-Ultron-Read-After"
_LSN = re.compile(r"[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}")


def read_after(request: Request) -> int | None:
    raw = request.headers.get(READ_AFTER_HEADER, "").strip()
    if not raw:
        return None
    if not _LSN.fullmatch(raw):
        raise ValidationFailed(
            f"{READ_AFTER_HEADER} must be a WAL position such as 16/B374D848 (as sent in {WRITTEN_HEADER})"
        )
    return lsn_value(raw)


def _written(request: Request, lsn: int | None) -> None:
    if lsn is not None:
        request.state.written_lsn = lsn_text(lsn)  # BodyLimit puts it in the response's headers


def reader(actor: Actor) -> tuple[Any, Any]:
    """Whose writes a read must see (read-your-writes with replicas): the agent."""
    return (actor.tenant_id, actor.agent_id)


def call(request: Request, fn: Callable[[Session, Actor], T], *, read: bool = False) -> T:
    """Run `fn` in one transaction as the calling agent.

    The agent is authenticated first, in its own short transaction on the primary (a revoked key is
    refused at once); `fn`'s session takes a pooled connection only at its first statement, so provider
    work a service does before that (a search embedding its query) holds no connection while it waits.
    `read=True` marks an `fn` that writes nothing: with read replicas configured it may run on one
    (ultron/db/engine.py); anything else runs on the primary and counts as the agent's write.
    """
    hub: Hub = request.app.state.hub
    policy: AuthPolicy = request.app.state.auth
    actor = authenticate(request)
    after = read_after(request) if read else None
    if read:
        result = hub.db.read(lambda session: fn(session, actor), reader(actor), after=after)
    else:
        with hub.db.session() as session:
            result = fn(session, actor)
        _written(request, hub.db.wrote(reader(actor)))
    policy.last_seen.touch(hub.db, actor)
    return result


def call_prepared(request: Request, prepare: Callable[[Actor], P], fn: Callable[[Session, Actor, P], T]) -> T:
    """Authenticate in a short transaction, run `prepare` (provider calls: embed, type, summarize) with
    no connection held, then `fn` in its own short transaction. A hanging provider so holds no
    database connection and no lock, and a provider failure leaves nothing written."""
    hub: Hub = request.app.state.hub
    policy: AuthPolicy = request.app.state.auth
    actor = authenticate(request)
    prepared = prepare(actor)
    with hub.db.session() as session:
        result = fn(session, actor, prepared)
    _written(request, hub.db.wrote(reader(actor)))
    policy.last_seen.touch(hub.db, actor)
    return result


class BodyLimit(BaseHTTPMiddleware):
    """Refuse oversized bodies from their Content-Length before reading them."""

    def __init__(self, app: Any, max_bytes: int):
        super().__init__(app)
        self.max_bytes = max_bytes

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > self.max_bytes:
            err = PayloadTooLarge(f"request body is {length} bytes; the limit is {self.max_bytes}")
            return Response(
                content=f'{{"error":"{err.error}","detail":"{err.detail}"}}',
                status_code=413,
                media_type="application/json",
            )
        response = await call_next(request)
        written = getattr(request.state, "written_lsn", None)
        if written is not None:
            response.headers[WRITTEN_HEADER] = written
        return response


memories = APIRouter(prefix="/memories", tags=["memories"], responses=ERROR_RESPONSES)


@memories.post(
    "/upload",
    response_model=UploadResult,
    status_code=200,
    responses={201: {"model": UploadResult, "description": "Created: a new memory (200: merged)"}},
)
def upload_memory(request: Request, body: UploadRequest, response: Response) -> UploadResult:
    """Store an experience. The hub infers its type, summarizes, embeds and merges near duplicates:
    201 with a new memory, 200 when merged into an existing one."""
    hub = request.app.state.hub
    memory = hub.memory

    def prepare(actor: Actor) -> Any:
        with hub.db.session() as session:  # the tenant's redaction policy, in a short read of its own
            memory.load_tenant_policy(session, actor.tenant_id)
        return memory.prepare(body, actor)

    result = call_prepared(
        request,
        prepare,
        lambda s, a, prepared: memory.upload(s, a, body, prepared=prepared),
    )
    response.status_code = 201 if result.decision == "created" else 200
    return result


@memories.post("/upload-batch", response_model=UploadBatchResult)
def upload_memories_batch(request: Request, body: UploadBatchRequest) -> UploadBatchResult:
    """Up to 500 uploads in one call, each checked, redacted, typed and de-duplicated exactly as a single
    upload is (an item that repeats an earlier one of the batch merges into it). Results come in the
    batch's order; an item that fails its checks is refused with the reason and the others are stored."""
    from ultron.memory.batch import check_items, summarize

    hub = request.app.state.hub
    memory = hub.memory
    reqs = check_items(body.items)

    def prepare(actor: Actor) -> Any:
        with hub.db.session() as session:  # the tenant's redaction policy, in a short read of its own
            memory.load_tenant_policy(session, actor.tenant_id)
        return memory.prepare_batch(reqs, actor)

    results = call_prepared(
        request, prepare, lambda s, a, prepared: memory.upload_batch(s, a, reqs, prepared)
    )
    return summarize(results)


@memories.post("/search", response_model=SearchResponse)
def search_memories(request: Request, body: SearchRequest) -> SearchResponse:
    """Hybrid (vector + full-text) search; each returned memory counts one hit."""
    results = call(
        request,
        lambda s, a: request.app.state.hub.memory.search(
            s,
            a,
            body.query,
            tier=body.tier,
            limit=body.limit,
            detail_level=body.detail_level,
            explain=body.explain,
            valence=body.valence,
            arousal=body.arousal,
            serendipity=body.serendipity,
            min_relevance=body.min_relevance,
        ),
        read=True,
    )
    return SearchResponse(count=len(results), results=results)


@memories.post("/details", response_model=DetailsResponse)
def memory_details(request: Request, body: DetailsRequest) -> DetailsResponse:
    """Full records; each counts two hits (the agent chose to read it)."""
    records = call(request, lambda s, a: request.app.state.hub.memory.details(s, a, body.ids))
    return DetailsResponse(count=len(records), records=records)


@memories.get("/stats", response_model=MemoryStats)
def memory_stats(request: Request) -> MemoryStats:
    return call(request, lambda s, a: request.app.state.hub.memory.stats(s, a), read=True)


@memories.get("/{memory_id}", response_model=MemoryRecord)
def get_memory(request: Request, memory_id: UUID) -> MemoryRecord:
    """One memory in full, without counting a hit."""
    return call(request, lambda s, a: request.app.state.hub.memory.get(s, a, memory_id), read=True)


@memories.get("/{memory_id}/contributions", response_model=list[Contribution])
def memory_contributions(request: Request, memory_id: UUID) -> list[Contribution]:
    """Every upload merged into this memory: who sent what, when."""
    return call(request, lambda s, a: request.app.state.hub.memory.contributions(s, a, memory_id), read=True)


class SplitRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    contribution_id: int = Field(
        ..., description="Id of a merged contribution (GET /memories/{id}/contributions)"
    )


@memories.post("/{memory_id}/split", response_model=SplitResult)
def split_memory(request: Request, memory_id: UUID, body: SplitRequest) -> SplitResult:
    """Undo a merge: the contribution becomes its own memory again (its contributor or an admin; else 403)."""
    return call(
        request, lambda s, a: request.app.state.hub.memory.split(s, a, memory_id, body.contribution_id)
    )


@memories.get("/{memory_id}/thread", response_model=list[MemoryRecord])
def memory_thread(request: Request, memory_id: UUID, span: int = 2) -> list[MemoryRecord]:
    """The memory with its neighbouring turns of the same thread (position within span), in order."""
    return call(request, lambda s, a: request.app.state.hub.memory.thread(s, a, memory_id, span), read=True)


@memories.patch("/{memory_id}", response_model=MemoryRecord)
def edit_memory(request: Request, memory_id: UUID, body: MemoryPatch) -> MemoryRecord:
    return call(request, lambda s, a: request.app.state.hub.memory.edit(s, a, memory_id, body))


@memories.delete("/{memory_id}", status_code=204)
def delete_memory(request: Request, memory_id: UUID) -> Response:
    call(request, lambda s, a: request.app.state.hub.memory.delete(s, a, memory_id))
    return Response(status_code=204)


system = APIRouter(tags=["system"])


@system.get("/", include_in_schema=False)
def root() -> Response:
    """A browser opening the hub's address lands on the dashboard."""
    from fastapi.responses import RedirectResponse

    return RedirectResponse("/dashboard", status_code=307)


@system.get("/health", response_model=Health, responses={503: {"model": ErrorBody}})
def health(request: Request) -> Health:
    """Alive and able to reach the database."""
    hub: Hub = request.app.state.hub
    with hub.db.session() as session:
        session.execute(text("SELECT 1"))
    return Health(status="ok", database="ok", version=__version__)


def create_app(hub: Hub, *, allow_open: bool = False) -> FastAPI:
    app = FastAPI(
        title="Ultron",
        version=__version__,
        description="A Postgres-native memory hub that many AI agents share.",
    )
    app.state.hub = hub
    # POST /trajectory/process drains through a worker's lease protocol (its own lease owner per request).
    app.state.build_worker = partial(build_worker, hub)
    app.state.auth = AuthPolicy(allow_open)
    from ultron.api.guard import InputGuard
    from ultron.ops.http import RequestContext, ops  # request ids, metrics, /ready, /metrics

    # The shared validation layer, and JSON 500s that name the request id; inside BodyLimit, so an
    # oversized body is refused from its Content-Length before the guard reads it.
    app.add_middleware(InputGuard, max_bytes=hub.settings.max_request_bytes)
    app.add_middleware(BodyLimit, max_bytes=hub.settings.max_request_bytes)
    app.add_middleware(RequestContext)  # added last, so outermost: it sees (and ids) every response
    install_error_handlers(app)
    app.include_router(system)
    app.include_router(ops)
    app.include_router(memories)
    from ultron.web import router as dashboard  # imports `call` from this module, so not at the top

    app.include_router(dashboard.pages)
    app.include_router(dashboard.api)
    from ultron.ingestion.router import router as ingestion  # imports `call` from this module

    app.include_router(ingestion)
    from ultron.companion.router import router as companion  # imports `call` from this module

    app.include_router(companion)
    from ultron.mcp.http import mount_mcp  # MCP over streamable HTTP at /mcp, same Bearer keys

    mount_mcp(app, hub)
    from ultron.worker.router import router as worker  # imports `call` from this module

    app.include_router(worker)
    from ultron.clusters.router import router as clusters  # imports `call` from this module
    from ultron.skills.router import router as skills  # imports `call` from this module

    app.include_router(skills)
    app.include_router(clusters)
    from ultron.groups.router import router as groups  # imports `call` from this module

    app.include_router(groups)
    return app
