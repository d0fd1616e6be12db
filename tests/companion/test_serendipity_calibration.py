"""Serendipity fires by default, with a threshold calibrated for the embedding model (issue 19)."""

from __future__ import annotations

import pytest

from tests.companion.conftest import age, agent
from ultron.companion.serendipity import calibrate
from ultron.config import Settings
from ultron.hub import build_embedder

OLD_NOTES = [
    "the lighthouse keeper logged a storm on the north cape",
    "grandmother's recipe for plum dumplings needs quark",
    "the bicycle chain skipped on the steep hill near the bakery",
    "a heron nested by the mill pond in early spring",
    "violin lessons moved from Tuesday to Thursday evenings",
    "the attic window leaks when the wind comes from the west",
]
WORK = [
    ("kubernetes pod evicted because the node ran out of memory", "set memory requests and limits"),
    ("nginx 502 bad gateway after deploy", "gunicorn was not listening on the socket yet"),
    ("postgres sequential scan on orders table", "add an index on orders(customer_id)"),
]


def _store(hub):  # type: ignore[no-untyped-def]
    alice = agent(hub, "alice")
    for note in OLD_NOTES:
        age(hub, alice.upload_memory(note).id, 60)
    for content, resolution in WORK:
        alice.upload_memory(content, resolution=resolution)
    return alice


@pytest.mark.parametrize("provider", ["hash", "local"])
def test_fires_by_default_and_not_for_a_strong_match(make_hub, provider):
    hub = make_hub(embedding_provider=provider, serendipity_seed=3)
    assert hub.settings.serendipity_enabled and hub.settings.serendipity_relevance is None
    alice = _store(hub)
    threshold = hub.companion.hooks.serendipity_threshold()
    unrelated = alice.search_memories("quantum chromodynamics on a lattice", explain=True, limit=3)
    assert any(r.serendipity for r in unrelated), [(r.similarity_score, threshold) for r in unrelated]
    strong = alice.search_memories("pod evicted, node out of memory", explain=True, limit=3)
    assert strong[0].similarity_score >= threshold
    assert not any(r.serendipity for r in strong)


def test_each_model_gets_its_own_threshold():
    hash_cal = calibrate(build_embedder(Settings(embedding_provider="hash")))
    e5_cal = calibrate(build_embedder(Settings(embedding_provider="local")))
    for cal in (hash_cal, e5_cal):
        assert cal.unrelated_p95 < cal.cosine_threshold < cal.related_p50
    # e5's cosines sit near the top: a fixed 0.3 was below every e5 score, and e5's threshold is far above
    # the hash embedder's.
    assert e5_cal.unrelated_p50 > 0.5 > hash_cal.unrelated_p95
    assert e5_cal.cosine_threshold - hash_cal.cosine_threshold > 0.3


def test_an_explicit_threshold_still_wins(make_hub):
    hub = make_hub(serendipity_relevance=0.0, serendipity_min_results=1)
    alice = _store(hub)
    assert hub.companion.hooks.serendipity_threshold() == 0.0
    assert not any(r.serendipity for r in alice.search_memories("quantum chromodynamics on a lattice"))
