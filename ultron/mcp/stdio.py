"""`ultron mcp`: the MCP tools over stdio, acting as one agent in-process or against a running hub."""

from __future__ import annotations

import logging
from typing import Any

from ultron.mcp.server import build_server
from ultron.mcp.skills import skills_of

log = logging.getLogger(__name__)


def serve_stdio(client: Any) -> None:
    """Serve until the MCP client closes stdin. `client` is an `ultron.Ultron` (in-process or HTTP)."""
    backend = client._backend  # the SDK's backend: LocalBackend or HttpBackend, same methods
    server = build_server(
        lambda ctx: backend,
        ingest=hasattr(backend, "ingest_text"),
        # In-process the skill tools read the hub directly; against a remote hub (--url) they go through
        # the SDK's HTTP backend.
        skills=skills_of(backend) is not None,
        log_level="WARNING",
    )
    try:
        server.run("stdio")
    finally:
        client.close()
