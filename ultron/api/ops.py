"""Request ids, per-route metrics and an access log for every request; `/ready` and `/metrics`."""

from __future__ import annotations

import logging
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.exc import SQLAlchemyError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ultron.db.migrate import current_revision, head_revision
from ultron.observability import metrics
from ultron.observability.logs import new_request_id, request_id_var
from ultron.routing.deps import DatabaseDep
from ultron.routing.errors import ErrorBody

access_log = logging.getLogger("ultron.access")

# Label for requests no route matched: raw paths would give every scanner's probe its own series.
UNMATCHED_ROUTE = "unmatched"


def _route_of(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path_format", None) or getattr(route, "path", None)
    return str(path) if path else UNMATCHED_ROUTE


class RequestContext:
    """Pure ASGI middleware: X-Request-ID in and out, latency by route, one access record per request."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        offered = None
        for name, value in scope.get("headers", ()):
            if name == b"x-request-id":
                offered = value.decode("latin-1")
                break
        rid = new_request_id(offered)
        token = request_id_var.set(rid)
        status = 500
        start = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"x-request-id"]
                headers.append((b"x-request-id", rid.encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - start
            method, route = scope["method"], _route_of(scope)
            metrics.HTTP_REQUESTS.labels(method, route, str(status)).inc()
            metrics.HTTP_LATENCY.labels(method, route).observe(elapsed)
            access_log.info(
                "%s %s %d %.1fms",
                method,
                route,
                status,
                elapsed * 1000,
                extra={
                    "request_id": rid,
                    "method": method,
                    "route": route,
                    "status": status,
                    "duration_ms": round(elapsed * 1000, 2),
                },
            )
            request_id_var.reset(token)


class Readiness(BaseModel):
    status: str
    database: str
    revision: str | None
    head: str | None


async def _search_hits(request: Request) -> Any:
    """The process's buffer of search hits not yet written (None on a hub without one)."""
    return getattr(request.app.state.hub, "hits", None)


def _head(request: Request) -> str | None:
    # The migration scripts ship with the process and cannot change under it: read them once (from disk,
    # so a plain `def`: FastAPI runs it in its threadpool).
    state = request.app.state
    if not hasattr(state, "migration_head"):
        state.migration_head = head_revision()
    return state.migration_head  # type: ignore[no-any-return]


ops = APIRouter(tags=["system"])


@ops.get("/ready", response_model=Readiness, responses={503: {"model": ErrorBody}})
def ready(db: DatabaseDep, head: Annotated[str | None, Depends(_head)]) -> Any:
    """Ready for traffic: the database answers and its schema is at the newest migration."""
    try:
        revision = current_revision(db.engine)  # one round trip: reachable, and where the schema is
    except SQLAlchemyError as exc:
        logging.getLogger(__name__).warning("not ready: database unreachable (%s)", type(exc).__name__)
        return _not_ready("the database is unreachable")
    if revision != head:
        return _not_ready(f"the database schema is at {revision}, not at {head}: run `ultron db upgrade`")
    return Readiness(status="ready", database="ok", revision=revision, head=head)


def _not_ready(detail: str) -> JSONResponse:
    return JSONResponse(status_code=503, content={"error": "not_ready", "detail": detail})


@ops.get("/metrics", include_in_schema=False)
def prometheus_metrics(db: DatabaseDep, hits: Annotated[Any, Depends(_search_hits)]) -> Response:
    """Prometheus text exposition (unauthenticated, like /health: keep it on the internal network)."""
    local = {"search_hits": hits.pending()} if hits is not None else {}
    if metrics.queue_probes():
        try:
            with db.session() as session:
                body, content_type = metrics.render(session, local)
            return Response(body, media_type=content_type)
        except SQLAlchemyError:
            # The database is down: still expose the process's own series (they show the outage).
            logging.getLogger(__name__).warning("queue depths unavailable: the database is unreachable")
    body, content_type = metrics.render(None, local)
    return Response(body, media_type=content_type)
