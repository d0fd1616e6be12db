"""The brief's skill section on a hub with published skills: after pinned and HOT, within the budget,
the most relevant first, never superseded or older versions, never another tenant's."""

from __future__ import annotations

import pytest

from tests.companion.conftest import agent
from tests.skill_data import stock_skills
from ultron.providers.tokens import count_tokens
from ultron.skills.format import SkillDoc, Version
from ultron.tenancy import local_actor

DOCKER_TASK = "my docker image build reinstalls every pip package each time"


@pytest.fixture()
def hub(make_hub):  # type: ignore[no-untyped-def]
    return make_hub(dedup_similarity_threshold=0.99, dedup_soft_threshold=0.99)


@pytest.fixture()
def stocked(hub):  # type: ignore[no-untyped-def]
    return stock_skills(hub)


@pytest.fixture()
def own(alice, stocked):  # type: ignore[no-untyped-def]
    """alice's own pinned memory and HOT memory."""
    pinned = alice.upload_memory("Always read the runbook before touching production").id
    alice.pin_memory(pinned)
    hot = alice.upload_memory("Docker builds on CI use the registry cache: pull the last image first").id
    alice.edit_memory(hot, tier="hot")
    return pinned, hot


def skills(brief):  # type: ignore[no-untyped-def]
    return [item for item in brief.items if item.kind == "skill"]


def test_skills_follow_pinned_and_hot_the_relevant_one_first(alice, own):  # type: ignore[no-untyped-def]
    brief = alice.brief(task=DOCKER_TASK)
    assert brief.skills_available
    # the pin, the memories that answer the task (relevant), the HOT one, then the skills
    sections = [i.section for i in brief.items]
    assert sections[0] == "pinned" and sections[-3:] == ["skill"] * 3
    assert sections[1:-3] == sorted(sections[1:-3], key=["relevant", "hot"].index) and "relevant" in sections
    ids = [i.id for i in brief.items]
    assert ids[0] == own[0] and ids.count(own[1]) == 1
    found = skills(brief)
    assert "docker" in found[0].slug and found[0].id == found[0].slug
    assert [any(t in s.slug for t in ("docker", "postgres", "pytest")) for s in found] == [True] * 3
    sims = [s.similarity for s in found]
    assert sims == sorted(sims, reverse=True) and sims[0] > sims[1]
    top = found[0]
    assert top.reason == f"skill, similarity {top.similarity:.2f} to the task"
    assert top.version == "1.0.0" and top.name and top.description and top.section == "skill"
    assert top.text.startswith(f"- [skill] {top.name} ({top.slug} 1.0.0): ")
    assert f'get_skill("{top.slug}")' in top.text and top.tokens == count_tokens(top.text)
    assert brief.text.splitlines()[1:] == [i.text for i in brief.items]


def test_without_a_task_the_most_used_skill_comes_first(hub, alice, stocked):  # type: ignore[no-untyped-def]
    alice.get_memory_details(stocked["ids"]["postgres"][:3])  # +2 hits each
    hub.hits.flush()
    brief = alice.brief()
    found = skills(brief)
    assert len(found) == 3 and "postgres" in found[0].slug
    assert "no task given, most used first (6 hits" in found[0].reason
    assert all(s.similarity is None for s in found)
    assert alice.brief() == brief  # deterministic


def test_the_budget_cuts_skills_first_and_keeps_the_order(alice, own):  # type: ignore[no-untyped-def]
    full = alice.brief(task=DOCKER_TASK, max_tokens=5000)
    assert full.omitted == 0 and len(skills(full)) == 3
    memories = [i for i in full.items if i.kind == "memory"]
    memories_only = count_tokens("\n".join([full.text.splitlines()[0], *[i.text for i in memories]]))
    first_skill = full.items[len(memories)]
    for budget in (20, memories_only, memories_only + first_skill.tokens + 2, 400):
        brief = alice.brief(task=DOCKER_TASK, max_tokens=budget)
        assert brief.tokens == count_tokens(brief.text) <= budget
        assert [i.id for i in brief.items] == [i.id for i in full.items[: len(brief.items)]]
        assert brief.omitted == len(full.items) - len(brief.items)
    cut = alice.brief(task=DOCKER_TASK, max_tokens=memories_only).items
    assert [i.id for i in cut] == [i.id for i in memories]


def test_superseded_slugs_and_older_versions_never_appear(hub, alice, stocked):  # type: ignore[no-untyped-def]
    before = {s.slug: s for s in skills(alice.brief(task=DOCKER_TASK))}
    docker = next(slug for slug in before if "docker" in slug)
    postgres = next(slug for slug in before if "postgres" in slug)
    with hub.db.session() as s:
        tenant = local_actor(s).tenant_id
        old = hub.skills.latest(s, tenant, docker)
        doc = SkillDoc("Container Image Caching", old.description, old.body, {})
        hub.skills.supersede(s, tenant, docker)
        hub.skills.save(
            s, tenant, "container-image-caching", Version(1, 0, 0), doc, 0.9, old.source_cluster_id
        )
        pg = hub.skills.latest(s, tenant, postgres)
        newer = SkillDoc(pg.name, pg.description, pg.body, {})
        hub.skills.save(s, tenant, postgres, Version(1, 10, 0), newer, 0.9, pg.source_cluster_id)
    for brief in (alice.brief(task=DOCKER_TASK), alice.brief()):
        found = [(s.slug, s.version) for s in skills(brief)]
        assert docker not in {slug for slug, _ in found}
        assert ("container-image-caching", "1.0.0") in found
        assert [v for slug, v in found if slug == postgres] == ["1.10.0"]


def test_another_tenants_skills_never_appear(hub, alice, stocked):  # type: ignore[no-untyped-def]
    task = "kubernetes pod CrashLoopBackOff after the deployment"
    mine = skills(alice.brief(task=task)) + skills(alice.brief())
    assert mine and not [s for s in mine if "kubernetes" in s.slug]
    theirs = skills(agent(hub, "erin").brief(task=task))  # default tenant too
    assert {s.slug for s in theirs} == {s.slug for s in skills(alice.brief(task=task))}
    dave = stocked["dave"]
    acme = skills(dave.brief(task=DOCKER_TASK)) + skills(dave.brief())
    assert acme and all("kubernetes" in s.slug for s in acme)


def test_a_zero_skill_limit_leaves_the_section_empty(make_hub):  # type: ignore[no-untyped-def]
    hub = make_hub(dedup_similarity_threshold=0.99, dedup_soft_threshold=0.99, brief_skill_limit=0)
    stock_skills(hub)
    brief = agent(hub, "alice").brief(task=DOCKER_TASK)
    assert brief.skills_available and not skills(brief)
