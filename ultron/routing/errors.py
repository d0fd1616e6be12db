"""One place that renders every error as `{error, detail}` with its HTTP status.

Error texts never carry SQL, bound parameters or stack traces: those go to the log under the request id,
and the answer names that id. Any 500 also says `Connection: close`, so a client does not reuse a
connection the server is about to drop.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.exc import DataError, IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from ultron.errors import DatabaseBusy, ProviderUnavailable, ServiceUnavailable, UltronError
from ultron.observability.logs import request_id_var
from ultron.providers.base import ProviderError

log = logging.getLogger(__name__)

# Seconds a client should wait after a provider failure (a 429 may say otherwise).
PROVIDER_RETRY_AFTER_S = 10


class ErrorBody(BaseModel):
    error: str
    detail: str


# The error answers every router declares (its OpenAPI `responses`).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (400, 401, 403, 404, 409, 413, 422, 503)
}


def _body(status: int, error: str, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": error, "detail": detail}, headers=headers)


def _describe(exc: RequestValidationError) -> tuple[int, str, str]:
    problems = []
    for err in exc.errors():
        if err.get("type") == "json_invalid":
            return 400, "malformed_json", f"request body is not valid JSON: {err.get('msg', '')}"
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        problems.append(f"{where}: {err.get('msg')}" if where else str(err.get("msg")))
    return 422, "validation_error", "; ".join(problems) or "invalid request"


def provider_unavailable(exc: ProviderError) -> ProviderUnavailable:
    """The typed 503 for a provider failure: which provider and how, never what was sent."""
    retry_after = getattr(exc, "retry_after", None) or PROVIDER_RETRY_AFTER_S
    what = {
        "timeout": "timed out",
        "connection": "could not be reached",
        "http": f"answered HTTP {exc.status_code}",
        "bad_payload": "gave an unusable answer",
        "unavailable": "is unavailable",
    }.get(exc.kind, "failed")
    return ProviderUnavailable(f"the {exc.provider} provider {what}; nothing was stored", retry_after)


def _database_error(exc: OperationalError) -> JSONResponse:
    sqlstate = getattr(exc.orig, "sqlstate", None) or ""
    if sqlstate.startswith("54"):  # program_limit_exceeded: a jsonb or index row too large, not an outage
        log.info("limit exceeded (sqlstate %s): %s", sqlstate, type(exc.orig).__name__)
        return _body(413, "payload_too_large", "the value is larger than the database can store")
    log.error("database error: %s", type(exc.orig).__name__)
    return _body(503, "database_unavailable", "the database is unavailable; try again", {"Retry-After": "5"})


def internal_error_response() -> JSONResponse:
    rid = request_id_var.get() or "-"
    return JSONResponse(
        status_code=500,
        content={"error": "internal_error", "detail": f"an internal error occurred (request id {rid})"},
        headers={"Connection": "close"},
    )


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ServiceUnavailable)
    async def _unavailable(_: Request, exc: ServiceUnavailable) -> JSONResponse:
        return _body(exc.status_code, exc.error, exc.detail, {"Retry-After": str(exc.retry_after)})

    @app.exception_handler(UltronError)
    async def _ultron(_: Request, exc: UltronError) -> JSONResponse:
        return _body(exc.status_code, exc.error, exc.detail)

    @app.exception_handler(ProviderError)
    async def _provider(_: Request, exc: ProviderError) -> JSONResponse:
        log.warning("provider failure: %s (%s, status %s)", exc.provider, exc.kind, exc.status_code)
        typed = provider_unavailable(exc)
        return _body(503, typed.error, typed.detail, {"Retry-After": str(typed.retry_after)})

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        return _body(*_describe(exc))

    @app.exception_handler(IntegrityError)
    async def _integrity(_: Request, exc: IntegrityError) -> JSONResponse:
        log.info("integrity error: %s", type(exc.orig).__name__)
        return _body(409, "conflict", "the change conflicts with stored data")

    @app.exception_handler(DataError)
    async def _data(_: Request, exc: DataError) -> JSONResponse:
        # NUL in text, a number beyond its column, an invalid value: the input, not the server.
        log.info("data error: %s", type(exc.orig).__name__)
        return _body(422, "validation_error", "a value is out of range or cannot be stored")

    @app.exception_handler(OperationalError)
    async def _db_down(_: Request, exc: OperationalError) -> JSONResponse:
        return _database_error(exc)

    @app.exception_handler(PoolTimeout)
    async def _pool(_: Request, exc: PoolTimeout) -> JSONResponse:
        log.warning("database pool exhausted")
        busy = DatabaseBusy("every database connection is busy; try again", 2)
        return _body(503, busy.error, busy.detail, {"Retry-After": str(busy.retry_after)})

    @app.exception_handler(RecursionError)
    async def _recursion(_: Request, exc: RecursionError) -> JSONResponse:
        return _body(400, "bad_request", "the input is nested too deeply")

    @app.exception_handler(Exception)
    async def _internal(_: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error", exc_info=exc)
        return internal_error_response()
