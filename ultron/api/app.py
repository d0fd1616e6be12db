"""The app: create_app assembles the middleware, the error handler, every domain's router and MCP.

Routes live in their domains (`ultron/<domain>/router.py`) and reach the database through the
dependencies of `ultron/routing/deps.py`; this module only adds the system routes and the middleware.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.responses import RedirectResponse
from pydantic import BaseModel
from sqlalchemy import text
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint

from ultron import __version__
from ultron.api.explorer import explorer
from ultron.api.guard import InputGuard
from ultron.api.ops import RequestContext, ops
from ultron.clusters.router import router as clusters
from ultron.companion.router import router as companion
from ultron.errors import PayloadTooLarge
from ultron.groups.router import router as groups
from ultron.hub import Hub, build_worker
from ultron.ingestion.router import imports
from ultron.ingestion.router import router as ingestion
from ultron.mcp.http import mount_mcp
from ultron.memory.router import router as memories
from ultron.routing.auth import AuthPolicy
from ultron.routing.deps import WRITTEN_HEADER, DatabaseDep
from ultron.routing.errors import ErrorBody, install_error_handlers
from ultron.skills.router import router as skills
from ultron.trajectory.router import router as trajectory
from ultron.vault.router import router as vault
from ultron.web import router as dashboard
from ultron.worker.router import router as worker


class Health(BaseModel):
    status: str
    database: str
    version: str


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


system = APIRouter(tags=["system"])


@system.get("/", include_in_schema=False)
def root() -> Response:
    """A browser opening the hub's address lands on the dashboard."""
    return RedirectResponse("/dashboard", status_code=307)


@system.get("/health", response_model=Health, responses={503: {"model": ErrorBody}})
def health(db: DatabaseDep) -> Health:
    """Alive and able to reach the database."""
    with db.session() as session:
        session.execute(text("SELECT 1"))
    return Health(status="ok", database="ok", version=__version__)


def create_app(hub: Hub, *, allow_open: bool = False) -> FastAPI:
    app = FastAPI(
        title="Ultron",
        version=__version__,
        description="A Postgres-native memory hub that many AI agents share.",
        docs_url=None,  # /docs and /redoc come from ultron/api/explorer.py, with no CDN
        redoc_url=None,
    )
    app.state.hub = hub
    app.state.auth = AuthPolicy(allow_open)
    # POST /trajectory/process drains through a worker's lease protocol (its own lease owner per request).
    app.state.build_worker = partial(build_worker, hub)
    # The shared validation layer, and JSON 500s that name the request id; inside BodyLimit, so an
    # oversized body is refused from its Content-Length before the guard reads it.
    app.add_middleware(InputGuard, max_bytes=hub.settings.max_request_bytes)
    app.add_middleware(BodyLimit, max_bytes=hub.settings.max_request_bytes)
    app.add_middleware(RequestContext)  # added last, so outermost: it sees (and ids) every response
    install_error_handlers(app)
    # In this order: the OpenAPI schema, and so docs/api.md, lists the routes as they are included.
    app.include_router(system)
    app.include_router(explorer)
    app.include_router(ops)  # /ready, /metrics
    app.include_router(memories)
    app.include_router(dashboard.pages)
    app.include_router(dashboard.api)
    app.include_router(ingestion)
    app.include_router(trajectory)  # sessions, segments: between /ingest and /imports, as before
    app.include_router(imports)
    app.include_router(companion)
    mount_mcp(app, hub)  # MCP over streamable HTTP at /mcp, same Bearer keys
    app.include_router(worker)
    app.include_router(skills)
    app.include_router(clusters)
    app.include_router(groups)
    app.include_router(vault)
    return app
