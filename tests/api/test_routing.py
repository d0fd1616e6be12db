"""Every route reaches the database through the request's unit of work (ultron/routing/deps.py), and
the unit commits before the response is sent."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.testclient import TestClient
from sqlalchemy import text

from ultron.api.app import create_app
from ultron.config import Settings
from ultron.routing.deps import request_unit
from ultron.tenancy import create_agent

# Routes that hold no data or answer without a key: the dashboard's page and assets, health, readiness.
PUBLIC = {"/", "/health", "/ready", "/metrics", "/dashboard", "/dashboard/", "/dashboard/assets/{name}"}
PUBLIC |= {"/api/dashboard/features"}
# The API explorer: static pages and their bundled assets (ultron/api/explorer.py), no data.
PUBLIC |= {"/docs", "/docs/oauth2-redirect", "/redoc", "/docs/assets/{name}"}


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


# Fails a new group named "late" at COMMIT, as a deferred unique check would: a real failure of the commit.
LATE_FAILURE = """
CREATE FUNCTION fail_late() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'refused at commit' USING ERRCODE = 'unique_violation';
END $$;
CREATE CONSTRAINT TRIGGER fail_late AFTER INSERT ON agent_groups DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.name = 'late') EXECUTE FUNCTION fail_late();
"""


def test_a_failed_commit_never_answers_success(hub) -> None:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        key = create_agent(s, "boss", "acme", admin=True)[1]
        s.execute(text(LATE_FAILURE))
    with TestClient(create_app(hub)) as api:
        r = api.post("/groups", json={"name": "late"}, headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 409, r.text
        assert api.get("/groups", headers={"Authorization": f"Bearer {key}"}).json() == []
