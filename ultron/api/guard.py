"""Input guard in front of every route: the shared validation layer applied to the raw request.

A pure ASGI middleware. It refuses, with a 4xx and before any handler or parser sees them:
NUL in the path or a query value, integers in a query beyond a bigint, JSON bodies nested deeper than
MAX_JSON_DEPTH, and JSON bodies carrying NUL or lone surrogates anywhere (`\\u0000`, `\\ud800`).
MCP (`/mcp`) is checked for depth only: its tools answer bad text as a tool error (ultron/mcp/server.py).
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import parse_qsl

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ultron import validation
from ultron.errors import PayloadTooLarge, UltronError, ValidationFailed
from ultron.routing.errors import internal_error_response

log = logging.getLogger(__name__)

_DIGITS = frozenset("0123456789")


def _check_query(scope: Scope) -> None:
    path = scope.get("path", "")
    if "\x00" in path:
        raise ValidationFailed("the path contains a NUL character (\\u0000)")
    raw = scope.get("query_string", b"").decode("latin-1")
    for name, value in parse_qsl(raw, keep_blank_values=True, errors="surrogateescape"):
        validation.check_text(value, f"query parameter {name!r}".replace("\x00", "\\u0000"))
        digits = value.lstrip("+-")
        if digits and set(digits) <= _DIGITS and (len(digits) > 19 or int(digits) > validation.MAX_INT):
            raise ValidationFailed(f"query parameter {name!r} is out of range")


def _is_json(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            return b"json" in value.lower()
    return False


class InputGuard:
    """Validates the raw request; also turns any unhandled exception into the JSON 500 with its id."""

    def __init__(self, app: ASGIApp, max_bytes: int = 25 * 1024 * 1024):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self._guarded(scope, receive, tracking_send)
        except Exception as exc:
            if started:
                raise  # half a response is out: the server can only drop the connection
            log.error("unhandled error", exc_info=exc)
            await internal_error_response()(scope, receive, send)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            _check_query(scope)
        except UltronError as exc:
            await _refuse(exc, scope, receive, send)
            return
        if scope.get("method") not in ("POST", "PUT", "PATCH") or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        try:
            body = await _read_body(receive, self.max_bytes)
            _check_body(body, mcp=scope.get("path", "").startswith("/mcp"))
        except UltronError as exc:
            await _refuse(exc, scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)


async def _read_body(receive: Receive, max_bytes: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)  # the client went away; the app sees what came
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > max_bytes:  # a chunked body has no Content-Length for BodyLimit to refuse
            raise PayloadTooLarge(f"request body is over {max_bytes} bytes; the limit is {max_bytes}")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _check_body(body: bytes, *, mcp: bool) -> None:
    if validation.json_depth_exceeds(body):
        raise UltronError(f"the JSON body is nested deeper than {validation.MAX_JSON_DEPTH} levels")
    if mcp or b"\\u" not in body:
        return  # valid UTF-8 JSON holds no NUL or surrogate unless written as an escape
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        return  # the route answers malformed JSON with its own 400
    validation.check_all(parsed)


async def _refuse(exc: UltronError, scope: Scope, receive: Receive, send: Send) -> None:
    response = JSONResponse({"error": exc.error, "detail": exc.detail}, status_code=exc.status_code)
    await response(scope, receive, send)
