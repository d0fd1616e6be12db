"""MCP tool errors: the REST rules and messages, as tool errors; never SQL, parameters or tracebacks.

A tool call is checked by the shared validation layer (ultron/validation.py) before it runs: every text
argument free of NUL and lone surrogates, the search query and the brief's task within REST's 4,000
characters. A typed error (UltronError) becomes a tool error with REST's `error: detail`; a provider
failure the same words as REST's 503; a remote hub that does not answer "no hub at URL"; anything else
"internal error (request id ...)", the detail logged under that id.
"""

from __future__ import annotations

import logging
import sys
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import httpx
from mcp.server.fastmcp.exceptions import ToolError
from pydantic import ValidationError

from ultron import validation
from ultron.errors import UltronError
from ultron.observability.logs import request_id_var

log = logging.getLogger(__name__)

# Methods whose first argument is free text with a REST length cap.
_TEXT_LIMITS = {
    "search": ("query", validation.MAX_QUERY_CHARS),
    "search_skills": ("query", validation.MAX_QUERY_CHARS),
    "brief": ("task", validation.MAX_TASK_CHARS),
}


# The name of a method's first positional argument, for messages.
_FIRST_ARG = {
    "search": "query",
    "search_skills": "query",
    "brief": "task",
    "ingest_text": "text",
    "get_skill": "slug",
}


def validate_call(method: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    for i, arg in enumerate(args):
        name = _FIRST_ARG.get(method, "argument") if i == 0 else f"argument {i + 1}"
        validation.check_all(arg, "" if isinstance(arg, dict | list) or hasattr(arg, "model_dump") else name)
    validation.check_all(dict(kwargs))
    if method in _TEXT_LIMITS and args and isinstance(args[0], str):
        name, limit = _TEXT_LIMITS[method]
        validation.check_text(args[0], name, max_chars=limit)


@contextmanager
def tool_errors() -> Iterator[None]:
    try:
        yield
    except ToolError:
        raise
    except UltronError as exc:
        raise ToolError(f"{exc.error}: {exc.detail}") from None
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        # `ultron mcp --url` with no hub there: the CLI's words, one log line, not a traceback per call.
        url = _hub_url(exc)
        log.warning("no hub at %s", url)
        raise ToolError(
            f"no_hub: no hub at {url}: is `ultron serve` running there? (or fix --url / ULTRON_URL)"
        ) from None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in exc.errors()
        )
        raise ToolError(f"validation_error: {problems}") from None
    except Exception as exc:
        known = _known_failure(exc)
        if known is not None:
            raise ToolError(known) from None
        rid = request_id_var.get() or uuid.uuid4().hex
        log.error("MCP tool failed (request id %s)", rid, exc_info=exc)
        raise ToolError(f"internal_error: an internal error occurred (request id {rid})") from None


def _hub_url(exc: httpx.TransportError) -> str:
    try:
        url = exc.request.url
    except RuntimeError:  # an error raised without its request
        return "the hub's URL"
    return f"{url.scheme}://{url.netloc.decode()}"


def _loaded(module: str, name: str) -> Any:
    """`module.name` if that module is loaded, else None: an exception of a module nobody imported cannot
    have been raised. So `ultron mcp --url` (an HTTP client) never imports SQLAlchemy, numpy (the
    providers) or FastAPI (REST's error words) just to name their errors: 0.9 s of its 1.9 s start-up."""
    loaded = sys.modules.get(module)
    return None if loaded is None else getattr(loaded, name, None)


def _known_failure(exc: Exception) -> str | None:
    """A provider failure in REST's 503 words, a database one in REST's words; None for anything else."""
    provider_error = _loaded("ultron.providers.base", "ProviderError")
    if provider_error is not None and isinstance(exc, provider_error):
        from ultron.routing.errors import provider_unavailable  # REST's words for it (FastAPI behind)

        typed = provider_unavailable(exc)
        return f"{typed.error}: {typed.detail}"
    data_error = _loaded("sqlalchemy.exc", "DataError")
    if data_error is not None and isinstance(exc, data_error):
        return "validation_error: a value is out of range or cannot be stored"
    operational_error = _loaded("sqlalchemy.exc", "OperationalError")
    if operational_error is not None and isinstance(exc, operational_error):
        return "database_unavailable: the database is unavailable; try again"
    return None
