"""Every route reaches the database through the request's unit of work (ultron/routing/deps.py)."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts

from ultron.api.app import create_app
from ultron.config import Settings
from ultron.routing.deps import request_unit

# Routes that hold no data or answer without a key: the dashboard's page and assets, health, readiness.
PUBLIC = {"/", "/health", "/ready", "/metrics", "/dashboard", "/dashboard/", "/dashboard/assets/{name}"}
PUBLIC |= {"/api/dashboard/features"}


def _calls(dependant: Dependant) -> Iterator[Any]:
    for sub in dependant.dependencies:
        yield sub.call
        yield from _calls(sub)


def test_every_data_route_takes_the_request_unit() -> None:
    app = create_app(SimpleNamespace(settings=Settings(_env_file=None)))  # type: ignore[arg-type,call-arg]
    # Included routers are nested in app.routes (FastAPI 0.165): their routes come from the contexts.
    contexts = iter_route_contexts(app.routes)
    routes = [c.route for c in contexts if isinstance(c.route, APIRoute) and c.path not in PUBLIC]
    assert len(routes) > 60
    missing = [f"{r.methods} {r.path}" for r in routes if request_unit not in set(_calls(r.dependant))]
    assert not missing, missing
