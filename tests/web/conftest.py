"""A hub with demo data, and the same hub served on a real loopback port."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ultron.bench.demo import DEMO_AGENTS, DemoData, seed_demo, seed_skills
from ultron.tenancy import authenticate


@pytest.fixture()
def demo(hub) -> DemoData:  # type: ignore[no-untyped-def]
    return seed_demo(hub)


@pytest.fixture()
def skilled(hub, demo) -> DemoData:  # type: ignore[no-untyped-def]
    """The demo plus three published skills; the docker one recrystallized to 1.1.0."""
    with hub.db.session() as s:
        actors = [authenticate(s, demo.keys[name]) for name in DEMO_AGENTS]
    outcome = seed_skills(hub, actors)
    assert outcome.get("published") == 1, outcome
    return demo


@pytest.fixture()
def admin_key(demo: DemoData) -> str:
    return demo.keys["claude-code"]


@pytest.fixture()
def client(hub, demo):  # type: ignore[no-untyped-def]
    from fastapi.testclient import TestClient

    from ultron.api.app import create_app

    with TestClient(create_app(hub)) as c:
        yield c


def auth(key: str) -> dict[str, Any]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture()
def live_hub(hub, demo) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """The demo hub on 127.0.0.1:<random port>, keys required (demo agents exist)."""
    from ultron.api.app import create_app
    from ultron.web.serve import LiveServer

    with LiveServer(create_app(hub, allow_open=True)) as url:
        yield url
