"""The session-start brief: pinned first, then HOT by relevance to the task; within its token budget."""

from __future__ import annotations

import pytest

from ultron.errors import ValidationFailed
from ultron.providers.tokens import count_tokens

TEXTS = [
    "Always run database migrations inside a transaction so a failure leaves no half-applied schema",
    "ModuleNotFoundError: No module named 'pandas' in the nightly cron job; use the venv interpreter",
    "Docker build cache misses because COPY . . comes before pip install; copy requirements first",
    "pytest fixtures with scope=session leak state between tests that mutate the database",
    "nginx returns 502 when the upstream gunicorn worker times out on slow report exports",
    "Postgres VACUUM FULL takes an exclusive lock; use pg_repack on busy tables instead",
]


@pytest.fixture()
def stocked(alice):  # type: ignore[no-untyped-def]
    ids = [alice.upload_memory(t).id for t in TEXTS]
    alice.pin_memory(ids[0])
    for memory_id in ids[1:]:
        alice.edit_memory(memory_id, tier="hot")
    return ids


def test_pinned_lead_then_hot_by_relevance_with_reasons(alice, stocked):
    brief = alice.brief(task="docker image build is slow, pip install runs every time")
    sections = [item.section for item in brief.items]
    assert sections[0] == "pinned" and set(sections[1:]) <= {"relevant", "hot"}
    assert brief.items[0].id == stocked[0] and "pinned" in brief.items[0].reason
    assert brief.items[1].id == stocked[2]  # the Docker cache memory answers the task: first after the pin
    # its section: relevant when the task's search is confident of it, else HOT ranked by similarity
    assert brief.items[1].confidence == ("high" if brief.items[1].section == "relevant" else "low")
    hot = [item for item in brief.items if item.section == "hot"]
    sims = [item.similarity for item in hot]
    assert sims == sorted(sims, reverse=True)
    assert all("similarity" in item.reason for item in hot)
    assert brief.skills_available and brief.items[-1].kind == "memory"  # the hub has skills, none published
    assert brief.text.splitlines()[1:] == [item.text for item in brief.items]


def test_without_a_task_hot_memories_come_most_used_first(alice, stocked):
    alice.get_memory_details([stocked[4]])  # +2 hits
    brief = alice.brief()
    assert brief.task is None
    assert brief.items[1].id == stocked[4]
    assert "most used" in brief.items[1].reason


def test_the_budget_is_respected_and_the_order_kept(alice, stocked):
    full = alice.brief(task="database", max_tokens=5000)
    assert full.omitted == 0 and len(full.items) == len(TEXTS)
    for budget in (10, 40, 80, 150, 300):
        brief = alice.brief(task="database", max_tokens=budget)
        assert brief.tokens == count_tokens(brief.text) <= budget
        # A prefix of the full order: budget cuts the tail, never reorders.
        assert [i.id for i in brief.items] == [i.id for i in full.items[: len(brief.items)]]
        assert brief.omitted == len(full.items) - len(brief.items)
    assert alice.brief(task="database", max_tokens=5000) == full  # deterministic


def test_bad_budget_is_refused(alice):
    with pytest.raises(ValidationFailed):
        alice.brief(max_tokens=0)


def test_unpinned_memories_leave_the_pinned_section(alice, stocked):
    alice.unpin_memory(stocked[0])
    assert all(item.section == "hot" for item in alice.brief().items)


def test_the_task_hint_is_redacted_before_it_is_embedded_or_shown(alice, stocked):
    brief = alice.brief(task="docker build for jane.roe@example.com is slow")
    assert "jane.roe@example.com" not in brief.text and "jane.roe@example.com" not in (brief.task or "")
    assert brief.items[0].section == "pinned"


LIFE = "Sam goes on a hiking trip to Norway every July with his daughter Mia"
PREFERENCE = "Sam prefers window seats on long flights and never books red-eye departures"
NGINX = "nginx returns 502 when the upstream gunicorn worker times out on slow report exports"


def test_what_the_hub_knows_about_the_person_follows_the_pins(alice, bob):
    life = alice.upload_memory(LIFE, scope="private")
    pref = alice.upload_memory(PREFERENCE, scope="private")
    other = alice.upload_memory(NGINX, scope="private")
    assert (life.memory_type, pref.memory_type) == ("life", "preference") and other.memory_type != "life"
    rule = alice.upload_memory("Always answer Sam in English", scope="private")
    alice.pin_memory(rule.id)
    brief = alice.brief()
    assert [(i.section, i.id) for i in brief.items][0] == ("pinned", rule.id)
    personal = [i for i in brief.items if i.section == "personal"]
    assert {i.id for i in personal} == {life.id, pref.id}  # neither HOT nor pinned: their own section
    assert other.id not in {i.id for i in brief.items}  # a WARM memory of another type: not in a brief
    assert all("about the person" in i.reason and "most used" in i.reason for i in personal)
    # With a task, the personal memory it asks about comes first after the pins (its search found it).
    planned = alice.brief(task="book Sam's flights to Oslo, which seats")
    first = planned.items[1]
    assert first.id == pref.id and first.section == "relevant" and first.confidence == "high"
    assert first.relevance is not None and "relevant to the task" in first.reason
    # Another agent never sees alice's private person.
    assert not {life.id, pref.id} & {i.id for i in bob.brief().items}
    assert not {life.id, pref.id} & {i.id for i in bob.brief(task="flights to Oslo").items}
    # A pinned or HOT personal memory stays in its own section, never twice.
    alice.pin_memory(pref.id)
    alice.edit_memory(life.id, tier="hot")
    sections = {i.id: i.section for i in alice.brief().items}
    assert (sections[pref.id], sections[life.id]) == ("pinned", "hot")
    assert [i.id for i in alice.brief().items].count(pref.id) == 1


def test_a_zero_personal_limit_leaves_the_section_out(make_hub):  # type: ignore[no-untyped-def]
    from tests.companion.conftest import agent

    sam = agent(make_hub(brief_personal_limit=0), "sam")
    sam.upload_memory(LIFE, scope="private")
    assert sam.brief().items == []
