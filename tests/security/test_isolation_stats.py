"""Issue 33, found 4: nothing an agent is answered depends on the content of memories it cannot see.

Two tenants of one hub hold the same memories their agent A can see: shared ones, A's own private ones.
They differ only in another agent's private memories and a group's memories A is not in: one tenant's name a
surname A searches for and words A's queries hold, the other's do not. Every search A makes must come back
the same in both, every field of every result, `explain` included. What a store draws itself is made the
same: memory ids come from one seeded sequence per tenant (so ties in score break the same way), creation
times are set to one instant; the age of a memory, which moves with the clock between the two calls, is
compared within a thousandth of a day.
"""

from __future__ import annotations

import itertools
import math
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from ultron.api.app import create_app
from ultron.tenancy import create_agent

SEEN = [
    ("shared", "the nightly backup job fails when the disk is full", "prune old snapshots first"),
    ("shared", "Kowalski reviewed the retry policy of the payment service", "three retries with jitter"),
    ("shared", "grafana alerts are routed to the ops channel", ""),
    ("private", "my notes on the kafka consumer lag during the migration", "raise max.poll.records"),
    ("shared", "the staging cluster runs kafka 3.6 with three brokers", "upgrade to 3.7 next quarter"),
]
# Only in the first hub: words A's queries use (a surname, kafka, backup), in memories A cannot see.
UNSEEN = [
    ("private", "Nowakowska told me the kafka backup password is rotated monthly", "kafka backup"),
    ("private", "disk full on every kafka broker, consumer lag grew past an hour", "backup"),
    ("group", "Nowakowska owns the kafka backup runbook for the payment service", "see the wiki"),
]
UNSEEN_OTHER = [
    ("private", "lunch orders are due by eleven", ""),
    ("group", "the office printer needs toner", "order from the supplier"),
]
QUERIES = [
    "Nowakowska",
    "kafka consumer lag",
    "backup disk full",
    "Kowalski retry policy payment service",
    "zyxwvut unknown word",
]
CLOCK = {"days_since_hit", "hotness"}


def _fill(
    hub: Any, tenant: str, unseen: list[tuple[str, str, str]], monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    ids = (uuid.UUID(int=i) for i in itertools.count(1))
    monkeypatch.setattr("ultron.memory.service.uuid4", lambda: next(ids))
    with hub.db.session() as s:
        keys = {n: create_agent(s, n, tenant, admin=n == "boss")[1] for n in ("a", "b", "boss")}
    h = {n: {"Authorization": f"Bearer {k}"} for n, k in keys.items()}
    with TestClient(create_app(hub)) as c:
        assert c.post("/groups", json={"name": "ops"}, headers=h["boss"]).status_code in (200, 201)
        assert c.put("/groups/ops/members/b", headers=h["boss"]).status_code == 200
        for scope, content, resolution in SEEN:
            body = {"content": content, "resolution": resolution, "scope": scope}
            assert c.post("/memories/upload", json=body, headers=h["a"]).status_code == 201
        for scope, content, resolution in unseen:
            body = {"content": content, "resolution": resolution, "scope": scope}
            body |= {"group": "ops"} if scope == "group" else {}
            assert c.post("/memories/upload", json=body, headers=h["b"]).status_code in (200, 201), body
    with hub.db.session() as s:
        # one clock for both tenants: what A sees was created and last used at the same instant
        s.execute(text("UPDATE memories SET created_at = '2026-11-01Z', updated_at = '2026-11-01Z'"))
        for tenant in s.execute(text("SELECT id FROM tenants")).scalars():
            hub.memory.refresh_term_stats(s, tenant)
    return h["a"]


def _answers(hub: Any, a: dict[str, str]) -> list[dict[str, Any]]:
    """A's answers, each contribution id (a sequence shared by the tenants) named by its position among the
    memory's contributions."""
    out = []
    with TestClient(create_app(hub)) as c:
        for query in QUERIES:
            r = c.post(
                "/memories/search",
                json={"query": query, "explain": True, "limit": 20, "detail_level": "l1"},
                headers=a,
            )
            assert r.status_code == 200, r.text
            body = r.json()
            for x in body["results"]:
                if x["explain"]["matched_contribution"] is not None:
                    rows = c.get(f"/memories/{x['record']['id']}/contributions", headers=a).json()
                    ids = [row["id"] for row in rows]
                    x["explain"]["matched_contribution"] = ids.index(x["explain"]["matched_contribution"])
            # each result once: ids are unique per tenant only, and the search joined back on the id alone
            # (with the seeded ids both tenants share, each result came twice, the other tenant's text too)
            assert len({x["record"]["id"] for x in body["results"]}) == body["count"] <= len(SEEN)
            out.append(body)
    return out


def _diff(one: Any, two: Any, where: str = "") -> list[str]:
    """The paths at which two answers differ, with both values (the failure message)."""
    if isinstance(one, dict) and isinstance(two, dict):
        keys = sorted(set(one) | set(two))
        return [d for k in keys for d in _diff(one.get(k), two.get(k), f"{where}.{k}")]
    if isinstance(one, list) and isinstance(two, list) and len(one) == len(two):
        return [
            d for i, (x, y) in enumerate(zip(one, two, strict=True)) for d in _diff(x, y, f"{where}[{i}]")
        ]
    return [] if one == two else [f"{where}: {one!r} != {two!r}"]


def _clock(body: Any) -> list[float]:
    return [x["explain"][k] for x in body["results"] for k in sorted(CLOCK)]


def _strip_clock(body: Any) -> Any:
    return {
        **body,
        "results": [
            {**x, "explain": {k: v for k, v in x["explain"].items() if k not in CLOCK}}
            for x in body["results"]
        ],
    }


def test_no_response_field_depends_on_memories_the_agent_cannot_see(make_hub, monkeypatch):
    hub = make_hub(hit_flush_seconds=0, serendipity_seed=7, time_decay_weight=0)
    a1, a2 = _fill(hub, "one", UNSEEN, monkeypatch), _fill(hub, "two", UNSEEN_OTHER, monkeypatch)
    first, second = _answers(hub, a1), _answers(hub, a2)
    assert any(body["count"] for body in first)
    for query, one, two in zip(QUERIES, first, second, strict=True):
        assert _strip_clock(one) == _strip_clock(two), (
            query,
            _diff(_strip_clock(one), _strip_clock(two))[:8],
        )
        assert all(math.isclose(x, y, abs_tol=1e-3) for x, y in zip(_clock(one), _clock(two), strict=True))
