"""One place that renders every error as `{error, detail}` with its HTTP status."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.exc import IntegrityError, OperationalError

from ultron.errors import UltronError

log = logging.getLogger(__name__)


class ErrorBody(BaseModel):
    error: str
    detail: str


def _body(status: int, error: str, detail: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": error, "detail": detail})


def _describe(exc: RequestValidationError) -> tuple[int, str, str]:
    problems = []
    for err in exc.errors():
        if err.get("type") == "json_invalid":
            return 400, "malformed_json", f"request body is not valid JSON: {err.get('msg', '')}"
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        problems.append(f"{where}: {err.get('msg')}" if where else str(err.get("msg")))
    return 422, "validation_error", "; ".join(problems) or "invalid request"


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(UltronError)
    async def _ultron(_: Request, exc: UltronError) -> JSONResponse:
        return _body(exc.status_code, exc.error, exc.detail)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        return _body(*_describe(exc))

    @app.exception_handler(IntegrityError)
    async def _integrity(_: Request, exc: IntegrityError) -> JSONResponse:
        log.info("integrity error: %s", exc.orig)
        return _body(409, "conflict", "the change conflicts with stored data")

    @app.exception_handler(OperationalError)
    async def _db_down(_: Request, exc: OperationalError) -> JSONResponse:
        log.error("database error: %s", exc.orig)
        return _body(503, "database_unavailable", "the database is unavailable; try again")
