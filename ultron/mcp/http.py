"""Streamable HTTP MCP on the hub at `/mcp`, behind the same Bearer keys as the JSON API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from fastapi import FastAPI
from mcp.server.fastmcp import Context
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ultron.errors import UltronError
from ultron.hub import Hub
from ultron.mcp.server import build_server
from ultron.routing.auth import AuthPolicy, is_loopback
from ultron.sdk._local import LocalBackend
from ultron.tenancy import Actor

MCP_PATH = "/mcp"
_ACTOR_KEY = "ultron.actor"


class ActorBackend(LocalBackend):
    """The in-process backend, acting as an already authenticated agent."""

    def __init__(self, hub: Hub, actor: Actor):
        self.hub = hub
        self.actor = actor
        self._owns_hub = False


class BearerGate:
    """Authenticate every MCP request with the hub's policy before the MCP transport sees it."""

    def __init__(self, app: Any, hub: Hub, policy: AuthPolicy):
        self.app = app
        self.hub = hub
        self.policy = policy

    def _actor(self, scope: Scope) -> Actor:
        with self.hub.db.autocommit_session() as session:  # one statement, no transaction around it
            actor = self.policy.actor(Request(scope), session)
        self.policy.last_seen.touch(self.hub.db, actor)
        return actor

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            actor = await anyio.to_thread.run_sync(self._actor, scope)
        except UltronError as exc:
            body = {"error": exc.error, "detail": exc.detail}
            headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
            await JSONResponse(body, status_code=exc.status_code, headers=headers)(scope, receive, send)
            return
        scope[_ACTOR_KEY] = actor
        await self.app(scope, receive, send)


def _backend_for(hub: Hub) -> Any:
    def backend(ctx: Context) -> ActorBackend:
        request = ctx.request_context.request
        actor = request.scope.get(_ACTOR_KEY) if request is not None else None
        if actor is None:  # cannot happen behind BearerGate; refuse rather than act as anyone
            raise PermissionError("no authenticated agent on this MCP request")
        return ActorBackend(hub, actor)

    return backend


def mount_mcp(app: FastAPI, hub: Hub) -> None:
    """Serve MCP at /mcp (stateless streamable HTTP, JSON responses) and run its session manager."""
    host = hub.settings.host
    # DNS-rebinding protection matters for a hub on loopback (browsers on this machine); a hub on a
    # public address is reached by name, and its Bearer keys are the protection.
    security = None if is_loopback(host) else TransportSecuritySettings(enable_dns_rebinding_protection=False)
    server = build_server(
        _backend_for(hub),
        ingest=hasattr(LocalBackend, "ingest_text"),
        stateless_http=True,
        json_response=True,
        streamable_http_path=MCP_PATH,
        host=host if is_loopback(host) else "0.0.0.0",
        transport_security=security,
    )
    mcp_app = server.streamable_http_app()
    route = next(r for r in mcp_app.routes if isinstance(r, Route) and r.path == MCP_PATH)
    # Starlette's Route runs a class instance endpoint as an ASGI app; add_route's hint names functions only.
    gate = BearerGate(route.app, hub, app.state.auth)
    app.add_route(MCP_PATH, gate, include_in_schema=False)  # type: ignore[arg-type]
    outer = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with server.session_manager.run(), outer(a) as state:
            yield state

    app.router.lifespan_context = lifespan
