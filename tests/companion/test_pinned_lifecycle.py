"""Pinned memories survive the worker: a rebalance with zero hits never archives them."""

from __future__ import annotations

import pytest

from tests.companion.conftest import age, agent

# The worker's rebalance (ultron/worker/) is built alongside; until it is in the tree this test skips.
rebalance = pytest.importorskip("ultron.worker.rebalance")

NOTES = [
    "always tag docker images with the git sha, never only latest",
    "the billing cron runs at 02:00 UTC and locks the invoices table",
    "staging TLS certificates are issued by the internal CA",
    "feature flags are read once per request from the flag service",
    "the search index rebuild takes forty minutes on production",
]


def test_pinned_memories_survive_a_rebalance_with_zero_hits(hub):
    alice = agent(hub, "alice")
    ids = [alice.upload_memory(note).id for note in NOTES]
    pinned = ids[0]
    alice.pin_memory(pinned)
    for memory_id in ids:
        age(hub, memory_id, 400)  # long unused, never hit
    with hub.db.session() as s:
        counts = rebalance.rebalance_tenant(
            s, hub.settings.model_copy(update={"cold_ttl_days": 30}), alice._backend.actor.tenant_id
        )
    assert counts["archived"] >= 1
    kept = alice.get_memory(pinned)
    assert kept.status == "active" and kept.pinned and kept.hit_count == 0
    assert alice.brief().items[0].id == pinned
    archived = [alice.get_memory(i).status for i in ids[1:]]
    assert "archived" in archived
