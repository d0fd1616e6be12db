"""Agents of one tenant acting in-process on the test hub."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from ultron.sdk import Ultron


def agent(hub, name: str, groups: tuple[str, ...] = ()) -> Ultron:  # type: ignore[no-untyped-def]
    """An in-process client acting as `name` (created, without a key, in the default tenant)."""
    client = Ultron(hub=hub, agent=name)
    admin = Ultron(hub=hub)  # the local agent is an admin
    for group in groups:
        if group not in [g.name for g in admin.list_groups()]:
            admin.create_group(group)
        admin.add_to_group(group, name)
    return client


def age(hub, memory_id, days: float) -> None:  # type: ignore[no-untyped-def]
    """Move a memory's creation (and last use) `days` into the past."""
    with hub.db.session() as s:
        s.execute(
            text(
                "UPDATE memories SET created_at = now() - make_interval(secs => :s), last_hit_at = NULL "
                "WHERE id = :id"
            ),
            {"s": days * 86400.0, "id": memory_id},
        )


@pytest.fixture()
def alice(hub):  # type: ignore[no-untyped-def]
    return agent(hub, "alice")


@pytest.fixture()
def bob(hub):  # type: ignore[no-untyped-def]
    return agent(hub, "bob")
