"""Companion memory: scopes, pins, reflections, emotion and resonance, time ripple, serendipity."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from tests.companion.conftest import age, agent
from tests.fakes.servers import FAKE_API_KEY
from ultron.errors import Forbidden, NotFound

SECRET_DIARY = "I felt embarrassed when the deploy failed in front of the whole team on Friday"


# --- scopes ---------------------------------------------------------------------------------------


def test_a_private_memory_never_leaves_its_agent(hub, alice, bob):
    mine = alice.upload_memory(SECRET_DIARY, scope="private")
    alice.pin_memory(mine.id)
    assert alice.get_memory(mine.id).scope == "private"
    assert [r.record.id for r in alice.search_memories("deploy failed embarrassed")][0] == mine.id
    assert alice.brief().items[0].id == mine.id

    assert mine.id not in {r.record.id for r in bob.search_memories("deploy failed embarrassed", limit=50)}
    with pytest.raises(NotFound):
        bob.get_memory_details([mine.id])
    with pytest.raises(NotFound):
        bob.get_memory(mine.id)
    with pytest.raises(NotFound):
        bob.get_contributions(mine.id)
    with pytest.raises(NotFound):
        bob.pin_memory(mine.id)
    with pytest.raises(NotFound):
        bob.reflect("a lesson", source_ids=[mine.id])
    assert mine.id not in {i.id for i in bob.brief().items}
    assert mine.id not in {i.record.id for i in bob.dream().items}
    assert bob.get_memory_stats().by_scope.get("private") is None
    assert alice.get_memory_stats().by_scope["private"] == 1


def test_stats_count_only_what_the_agent_may_see(hub, alice, bob):
    alice.upload_memory("my diary: write to me at alice.diary@example.com any time", scope="private")
    bob.upload_memory("shared: the staging host answers at ops@example.org for access requests")
    mine, theirs = alice.get_memory_stats(), bob.get_memory_stats()
    assert mine.redacted_entities["EMAIL_ADDRESS"] == 2 and mine.contributions == 2
    # bob sees the shared memory's e-mail address and its contribution, nothing of alice's diary
    assert theirs.redacted_entities["EMAIL_ADDRESS"] == 1 and theirs.contributions == 1
    assert theirs.total == 1


def test_group_memories_reach_only_the_group(hub, alice):
    ops1 = agent(hub, "ops1", groups=("ops",))
    ops2 = agent(hub, "ops2", groups=("ops",))
    memo = ops1.upload_memory("the on-call rota changes on Mondays at 09:00", scope="group", group="ops")
    assert ops2.get_memory(memo.id).group == "ops"
    with pytest.raises(NotFound):
        alice.get_memory(memo.id)


# --- pins -----------------------------------------------------------------------------------------


def test_only_the_contributor_or_an_admin_pins(hub, alice, bob):
    memo = alice.upload_memory("shared rule: never force-push to main")
    with pytest.raises(Forbidden):
        bob.pin_memory(memo.id)
    assert alice.pin_memory(memo.id).pinned
    assert not alice.unpin_memory(memo.id).pinned


def test_pinned_memories_do_not_decay_in_search(hub, alice):
    old = alice.upload_memory("retry webhooks with exponential backoff capped at one hour")
    age(hub, old.id, 200)
    before = alice.search_memories("webhooks exponential backoff", explain=True)[0]
    alice.pin_memory(old.id)
    after = alice.search_memories("webhooks exponential backoff", explain=True)[0]
    assert before.explain.hotness < 0.01
    assert after.explain.hotness == 1.0
    assert after.score == pytest.approx(before.score / (1 - before.explain.decay_weight), rel=1e-3)


# --- reflections ----------------------------------------------------------------------------------


def test_dream_offers_unreflected_memories_and_reflect_marks_them(hub, alice, bob):
    a = alice.upload_memory("the staging database ran out of disk during the load test")
    b = alice.upload_memory("the customer prefers answers in bullet points")
    dream = alice.dream()
    assert [i.record.id for i in dream.items] == [b.id, a.id]  # newest first
    assert dream.items[1].prompt and dream.guidance and dream.reflections == 0

    lesson = alice.reflect("Size staging disks from production growth, not from a guess", source_ids=[a.id])
    assert lesson.record.memory_type == "reflection" and lesson.record.scope == "private"
    assert lesson.marked == [a.id]
    dream = alice.dream()
    assert [i.record.id for i in dream.items] == [b.id]  # reflections are never offered for reflection
    assert dream.reflections == 1
    # Marks are per agent: bob has reflected on nothing.
    assert {a.id, b.id} <= {i.record.id for i in bob.dream().items}
    # Reflecting again on the same memory marks nothing new.
    assert alice.reflect("another thought on disks", source_ids=[a.id]).marked == []


def test_reflections_are_never_merged_into_events(hub, alice):
    words = "Check the disk quota before a load test on staging"
    lesson = alice.reflect(words, scope="shared")
    event = alice.upload(words)
    assert event.decision == "created" and event.record.id != lesson.record.id
    assert event.record.memory_type != "reflection"
    again = alice.reflect(words, scope="shared")
    assert again.record.id != lesson.record.id  # a reflection is its own moment, never deduplicated


# --- emotion --------------------------------------------------------------------------------------


def test_given_emotion_is_stored_and_merges_average(hub, alice):
    first = alice.upload("the release party was great fun", valence=0.8, arousal=0.6)
    assert (first.record.valence, first.record.arousal) == (0.8, 0.6)
    again = alice.upload("the release party was great fun", valence=0.4, arousal=0.2)
    assert again.decision == "merged"
    assert (again.record.valence, again.record.arousal) == pytest.approx((0.6, 0.4))


def test_without_an_llm_no_emotion_is_invented(hub, alice):
    memo = alice.upload_memory("the nightly backup finished in 14 minutes")
    assert memo.valence is None and memo.arousal is None


def test_the_llm_infers_emotion_when_configured(make_hub, fake_openai):
    def reply(messages):  # type: ignore[no-untyped-def]
        system = messages[0]["content"]
        if "emotional tone" in system:
            return json.dumps({"valence": -0.7, "arousal": 0.9})
        if "memory_type" in system or "type" in system.lower():
            return json.dumps({"memory_type": "life"})
        return "not json"

    fake_openai.reply_fn = reply
    llm_hub = make_hub(
        llm_provider="openai", llm_base_url=fake_openai.base_url, llm_api_key=FAKE_API_KEY, llm_model="fake"
    )
    memo = agent(llm_hub, "alice").upload_memory("we lost the whole afternoon's work when the disk died")
    assert (memo.valence, memo.arousal) == (-0.7, 0.9)
    assert any("emotional tone" in body for body in fake_openai.bodies())


def test_resonance_reranks_by_mood_and_shows_in_explain(hub, alice):
    sad = alice.upload_memory("the deploy of the billing service failed again", valence=-0.8, arousal=0.7)
    glad = alice.upload_memory("the deploy of the billing service went smoothly", valence=0.8, arousal=0.3)
    plain = alice.search_memories("deploy billing service", explain=True)
    assert all(r.explain.resonance is None for r in plain)
    for mood, first in ((-0.8, sad.id), (0.8, glad.id)):
        results = alice.search_memories("deploy billing service", explain=True, valence=mood, arousal=0.5)
        assert results[0].record.id == first
        assert results[0].explain.resonance > results[1].explain.resonance


# --- time ripple ----------------------------------------------------------------------------------


def test_using_a_memory_ripples_to_its_time_neighbours(hub, alice):
    used = alice.upload_memory("migrated the orders table to bigint ids on Tuesday")
    near = alice.upload_memory("the orders API returned 500s right after the id migration")
    far = alice.upload_memory("the orders dashboard got a new colour scheme")
    age(hub, far.id, 5)
    base = {r.record.id: r for r in alice.search_memories("orders", explain=True, limit=10)}
    assert base[near.id].explain.ripple is None

    alice.get_memory_details([used.id])
    after = {r.record.id: r for r in alice.search_memories("orders", explain=True, limit=10)}
    assert after[near.id].explain.ripple == pytest.approx(hub.settings.ripple_weight)
    assert after[near.id].explain.ripple_count == 1
    assert after[near.id].score == pytest.approx(
        base[near.id].score * (1 + hub.settings.ripple_weight), rel=1e-3
    )
    assert after[far.id].explain.ripple is None  # created five days away: outside the 48 h window


def test_ripples_are_capped(hub, alice):
    used = alice.upload_memory("rotated the TLS certificate of the public API")
    near = alice.upload_memory("Grafana alert for disk usage fired twice overnight")
    for _ in range(10):
        alice.get_memory_details([used.id])
    result = next(
        r for r in alice.search_memories("Grafana disk alert", explain=True) if r.record.id == near.id
    )
    assert result.explain.ripple == pytest.approx(hub.settings.ripple_cap)
    assert result.explain.ripple_count == 10


def test_ripples_do_not_reach_other_agents_private_memories(hub, alice, bob):
    used = alice.upload_memory("upgraded the message broker to version 4")
    private = bob.upload_memory("my own note: the broker upgrade scared me", scope="private")
    alice.get_memory_details([used.id])
    with hub.db.session() as s:
        count = s.execute(text("SELECT count(*) FROM memory_ripples WHERE memory_id = :i"), {"i": private.id})
        assert count.scalar_one() == 0


# --- serendipity ----------------------------------------------------------------------------------


OLD_NOTES = [
    "the lighthouse keeper logged a storm on the north cape",
    "grandmother's recipe for plum dumplings needs quark",
    "the bicycle chain skipped on the steep hill near the bakery",
    "a heron nested by the mill pond in early spring",
    "violin lessons moved from Tuesday to Thursday evenings",
    "the attic window leaks when the wind comes from the west",
]


def _old_memories(hub, client) -> list:  # type: ignore[no-untyped-def]
    ids = [client.upload_memory(note).id for note in OLD_NOTES]
    assert len(set(ids)) == len(OLD_NOTES)
    for memory_id in ids:
        age(hub, memory_id, 60)
    return ids


def test_serendipity_can_be_switched_off(make_hub):
    hub = make_hub(serendipity_enabled=False)
    alice = agent(hub, "alice")
    _old_memories(hub, alice)
    results = alice.search_memories("quantum chromodynamics lattice", explain=True, limit=3)
    assert not any(r.serendipity for r in results)


def test_serendipity_surfaces_old_memories_when_a_search_finds_little(make_hub):
    hub = make_hub(serendipity_enabled=True, serendipity_seed=7)
    alice = agent(hub, "alice")
    old = _old_memories(hub, alice)
    alice.upload_memory("fresh memory about kubernetes pod eviction")
    first = alice.search_memories("quantum chromodynamics lattice", explain=True, limit=3)
    surfaced = [r for r in first if r.serendipity]
    assert 1 <= len(surfaced) <= 3
    assert all(r.record.id in old and r.score == 0.0 and r.explain.serendipity for r in surfaced)
    # Surprises are no answer: flagged low, so a search that found only them still reads as "no match".
    assert all(r.confidence == "low" for r in surfaced)
    assert first[-len(surfaced) :] == surfaced  # low weight: after every real result
    again = alice.search_memories("quantum chromodynamics lattice", explain=True, limit=3)
    assert [r.record.id for r in again if r.serendipity] == [r.record.id for r in surfaced]  # seeded
    # A search that finds what it asks for gets no surprises; a caller may also switch it off.
    assert not any(r.serendipity for r in alice.search_memories("kubernetes pod eviction"))
    assert not any(r.serendipity for r in alice.search_memories("quantum lattice", serendipity=False))
