"""Honest offline skills: a Docker build-cache cluster's SKILL.md lists symptoms with the fix that worked
for each (alternatives, not steps), is named from its distinctive words, and grows to version 2 offline
when new members bring new fixes."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from ultron.bench.cluster_calibration import load_topics
from ultron.clusters.service import topic_keywords
from ultron.db.models import ClusterMember, EvolutionRecord, Skill
from ultron.sdk import Ultron
from ultron.skills import evolve
from ultron.skills.format import parse
from ultron.tenancy import local_actor
from ultron.worker.evolution import run_evolution_cycle

DOCKER = [r for r in load_topics() if r["topic"] == "docker-build-cache"]
# An old merged record: a merge appended the incoming upload's fix as "Alternative: ...".
MERGED = {
    "content": "docker build of the API image reinstalls poetry dependencies every time",
    "context": "poetry project, Dockerfile copies the whole tree before poetry install",
    "resolution": "COPY pyproject.toml poetry.lock first and run poetry install --no-root before COPY .\n"
    "Alternative: export a requirements.txt with poetry export and pip install it in an early layer",
}
STOP = {"after", "because", "when", "the", "and", "with", "before"}


@pytest.fixture()
def one_cluster(make_hub):  # type: ignore[no-untyped-def]
    """Every upload joins one cluster (threshold 0: the cluster is given, its skill is under test);
    distinct memories are kept apart by dedup."""
    return make_hub(
        cluster_similarity_threshold=0.0, dedup_similarity_threshold=0.99, dedup_soft_threshold=0.99
    )


def _upload(hub, rows) -> dict[str, str]:  # type: ignore[no-untyped-def]
    agent = Ultron(hub=hub, agent="alice")
    out = {}
    for r in rows:
        rec = agent.upload_memory(r["content"], r["context"], r["resolution"])
        out[str(rec.id).replace("-", "")[:8]] = r["resolution"]
    return out


def _skill_md(hub) -> tuple[Skill, str]:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        tenant = local_actor(s).tenant_id
        (slug,) = set(s.scalars(select(Skill.slug).where(Skill.tenant_id == tenant)))
        skill = hub.skills.latest(s, tenant, slug)
        s.expunge(skill)
        return skill, hub.skills.skill_md(skill)


def test_an_offline_docker_build_cache_skill_reads_as_symptoms_with_their_fixes(one_cluster):
    uploaded = _upload(one_cluster, [*DOCKER, MERGED])
    assert run_evolution_cycle(one_cluster.db, one_cluster.skills)["published"] == 1
    skill, md = _skill_md(one_cluster)
    doc = parse(md)
    name_words = [w.lower() for w in re.split(r"[\W_]+", doc.name) if w]
    assert "docker" in name_words and "cache" in name_words
    assert len(name_words) == len(set(name_words)), doc.name  # no repeated word
    assert not set(name_words) & STOP, doc.name
    assert evolve.OFFLINE_NOTE.lower() in doc.description.lower()
    assert evolve.OFFLINE_NOTE in doc.body and "alternatives, not a sequence" in doc.body
    # alternatives, not a workflow: no numbered steps, no fallback chain, no merge fragments
    assert evolve.steps_of(doc.body) == []
    assert "## Steps" not in doc.body and "If the previous step" not in md and "Alternative:" not in md
    entries = evolve.entries_of(doc.body)
    # every fix is its own entry with its own symptom, cited to the memory that reported it
    for prefix, resolution in uploaded.items():
        for fix in re.split(r"\nAlternative: ", resolution):
            entry = next(e for e in entries if f"{evolve.FIX} {fix[:30]}" in e and prefix in e)
            assert entry.startswith(evolve.SYMPTOM)
    npm = next(e for e in entries if "package.json" in e)
    assert "npm ci runs from scratch" in npm  # the npm problem keeps its own text
    assert len([e for e in entries if "poetry" in e.lower()]) == 2  # the merged alternative: its own entry
    with one_cluster.db.session() as s:
        members = {
            str(m).replace("-", "")[:8]
            for m in s.scalars(
                select(ClusterMember.memory_id).where(ClusterMember.cluster_id == skill.source_cluster_id)
            )
        }
    assert set(evolve.CITE.findall(md)) <= members


def test_offline_a_cluster_grown_by_three_members_with_new_fixes_publishes_version_2(one_cluster):
    _upload(one_cluster, DOCKER[:5])
    assert run_evolution_cycle(one_cluster.db, one_cluster.skills)["published"] == 1
    first, _ = _skill_md(one_cluster)
    _upload(one_cluster, DOCKER[5:8])  # three new members, three new fixes
    counts = run_evolution_cycle(one_cluster.db, one_cluster.skills)
    assert counts["published"] == 1 and counts["reverted"] == 0, counts
    second, md = _skill_md(one_cluster)
    assert (second.slug, str(second.version_major), second.version_minor) == (first.slug, "1", 1)
    assert evolve.fixes_of(first.body) < evolve.fixes_of(second.body)
    for r in DOCKER[5:8]:
        assert r["resolution"][:40] in md
    with one_cluster.db.session() as s:
        record = s.scalars(select(EvolutionRecord).order_by(EvolutionRecord.started_at.desc())).first()
        assert record.status == "published" and "adds 3 fixes" in record.detail


def test_offline_three_members_repeating_known_fixes_revert(one_cluster):
    _upload(one_cluster, DOCKER[:5])
    assert run_evolution_cycle(one_cluster.db, one_cluster.skills)["published"] == 1
    repeats = [
        {
            "content": f"{r['content'][:30]} ... on the {ci} runner, slow again, same cause as before",
            "context": f"{ci} pipeline",
            "resolution": r["resolution"],
        }
        for r, ci in zip(DOCKER[:3], ("Jenkins", "Buildkite", "Drone"), strict=True)
    ]
    _upload(one_cluster, repeats)
    counts = run_evolution_cycle(one_cluster.db, one_cluster.skills)
    assert counts["reverted"] == 1 and counts["published"] == 0, counts
    with one_cluster.db.session() as s:
        tenant = local_actor(s).tenant_id
        slug = s.scalars(select(Skill.slug)).first()
        assert one_cluster.skills.versions(s, tenant, slug) == ["1.0.0"]


def test_offline_topic_names_have_no_stop_words_and_no_repeats():
    texts = [
        "git rebase fails after docker build because the build-cache was pruned",
        "docker builds fail after git checkout because the Dockerfile build-cache changed",
        "after a rebase the docker build cache is cold because of git clean",
    ]
    words = topic_keywords(texts).split()
    assert not set(words) & STOP and "build-cache" not in words and "builds" not in words
    assert "dockerfile" not in words
    assert topic_keywords(["rebase conflicts while rebasing", "a rebase conflict again"]) == "conflict rebase"
    # the "Build Build-Cache Docker Cache" and "Git Docker After Because"
    assert evolve.skill_name("build build-cache docker cache") == "Build Docker Cache"
    assert evolve.skill_name("git docker after because") == "Git Docker"
    assert evolve.skill_name("rebase conflict git rebasing") == "Rebase Conflict Git"
    # an error title of messages with no head is a title already ("Cannot Find Module Test Suite Failed Run")
    title = "Cannot find module; Test suite failed to run"
    assert evolve.skill_name(title) == title
