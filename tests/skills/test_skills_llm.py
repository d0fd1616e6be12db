"""The evolution engine with a chat model (the fake OpenAI server on 127.0.0.1): LLM topic naming, LLM
synthesis with cited steps, the fallbacks to the offline paths, and recrystallization as an edit."""

from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import select

from tests.fakes.servers import FAKE_API_KEY, OPENAI_CHAT
from tests.skills.conftest import DOCKER, POSTGRES, PYTEST
from ultron.clusters import service as cluster_service
from ultron.db.models import EvolutionRecord, KnowledgeCluster, Skill
from ultron.hub import build_worker
from ultron.sdk import Ultron
from ultron.skills import evolve
from ultron.skills.format import SkillDoc, render
from ultron.skills.llm import CRYSTALLIZE_SYSTEM, RECRYSTALLIZE_SYSTEM, read_answer
from ultron.tenancy import local_actor
from ultron.worker.evolution import run_evolution_cycle

DISTINCT = {"dedup_similarity_threshold": 0.99, "dedup_soft_threshold": 0.99}
TOPIC_MARK = "You name a group of related memories"
CRYSTALLIZE_MARK = CRYSTALLIZE_SYSTEM[:60]
RECRYSTALLIZE_MARK = RECRYSTALLIZE_SYSTEM[:60]
VERIFY_MARK = "independent auditor"
IDS = re.compile(r'<memory id="m:([0-9a-f]{8})"')


@pytest.fixture()
def offline(make_hub):  # type: ignore[no-untyped-def]
    """A heuristic hub that stocks the thirty memories of tests/skills/test_skills.py (3 topics)."""
    hub = make_hub(**DISTINCT)
    alice = Ultron(hub=hub, agent="alice")
    for text in DOCKER + POSTGRES + PYTEST:
        alice.upload_memory(text)
    build_worker(hub).run_cycle(("cluster",), quiet=True)  # the worker's tick: the uploads' clusters
    return hub


@pytest.fixture()
def llm(make_hub, fake_openai, offline):  # type: ignore[no-untyped-def]
    """A hub on the same database whose chat model is the fake server."""
    return make_hub(
        llm_provider="openai",
        llm_base_url=fake_openai.base_url,
        llm_api_key=FAKE_API_KEY,
        llm_model="fake-chat",
        **DISTINCT,
    )


def by_prompt(**replies):  # type: ignore[no-untyped-def]
    """Answer each call by which system prompt asks (a string, or a function of the user message)."""
    marks = {
        "topic": TOPIC_MARK,
        "crystallize": CRYSTALLIZE_MARK,
        "recrystallize": RECRYSTALLIZE_MARK,
        "verify": VERIFY_MARK,
    }

    def reply(messages):  # type: ignore[no-untyped-def]
        system, user = messages[0]["content"], messages[-1]["content"]
        for task, answer in replies.items():
            if marks[task] in system:
                return answer(user) if callable(answer) else answer
        return "not json"

    return reply


def skill_md(user: str, *, name: str | None = None, marker: str = "LLM-WRITTEN", steps: int = 4) -> str:
    """A SKILL.md that cites the members the prompt showed, plus one memory it never showed."""
    ids = IDS.findall(user)
    topic = re.search(r"<topic>(.*?)</topic>", user).group(1)  # type: ignore[union-attr]
    lines = [f"{n}. {marker} step {n} for {topic}, run the fix [m:{ids[n % len(ids)]}]" for n in range(steps)]
    lines[0] += " [m:deadbeef]"  # not a member: the citation must be removed
    return "\n".join(
        [
            "```markdown",
            "---",
            f"name: {name or 'LLM ' + topic}",
            f"description: {marker} skill about {topic}",
            "---",
            f"# {name or 'LLM ' + topic}",
            "",
            "## When to use",
            "",
            f"When an agent meets {topic} problems again and again in its builds and tests. [m:{ids[0]}]",
            "",
            "## Steps",
            "",
            *lines,
            "",
            "## Edge cases and fallbacks",
            "",
            f"- If none of the steps helps, collect the logs and compare with the evidence. [m:{ids[-1]}]",
            "```",
        ]
    )


def audit(score: float) -> str:
    return json.dumps(
        {
            "grounded_in_evidence": 0.95,
            "contradicted": False,
            "workflow_clarity": score,
            "specificity_and_reusability": score,
        }
    )


def chat_users(server, mark: str) -> list[str]:  # type: ignore[no-untyped-def]
    bodies = [r.json["messages"] for r in server.requests_to(OPENAI_CHAT)]
    return [m[-1]["content"] for m in bodies if mark in m[0]["content"]]


def members_of(s, cluster_id) -> set[str]:  # type: ignore[no-untyped-def]
    from ultron.db.models import ClusterMember

    ids = s.scalars(select(ClusterMember.memory_id).where(ClusterMember.cluster_id == cluster_id))
    return {evolve.cite(i)[3:-1] for i in ids}


def test_llm_names_the_topic_from_a_bounded_sample_and_falls_back_on_garbage(  # type: ignore[no-untyped-def]
    llm, offline, fake_openai, monkeypatch
):
    fake_openai.reply_fn = by_prompt(topic='{"topic": "Docker build layer caching"}')
    monkeypatch.setattr(cluster_service, "TOPIC_SAMPLE", 4)
    with llm.db.session() as s:
        tenant = local_actor(s).tenant_id
        cluster = llm.clusters.list_clusters(s, tenant)[0]
        assert llm.clusters.name_topic(s, tenant, cluster.id) == "Docker build layer caching"
        assert s.get(KnowledgeCluster, (cluster.id, tenant)).topic == "Docker build layer caching"
        (user,) = chat_users(fake_openai, TOPIC_MARK)
        assert len([line for line in user.splitlines() if line.startswith("- ")]) == 4  # bounded

        before = llm.intelligence.counters["fallbacks"]
        offline_topic = offline.clusters.name_topic(s, tenant, cluster.id)
        for garbage in ("Sure! The topic is docker.", '{"topic": ""}', '{"name": "x"}'):
            fake_openai.reply_fn = by_prompt(topic=garbage)
            assert llm.clusters.name_topic(s, tenant, cluster.id) == offline_topic
        assert offline_topic and llm.intelligence.counters["fallbacks"] == before + 3


def test_llm_synthesis_publishes_skills_whose_steps_cite_their_members(llm, fake_openai):  # type: ignore[no-untyped-def]
    fake_openai.reply_fn = by_prompt(
        topic=lambda user: json.dumps({"topic": "docker" if "docker" in user else "other things"}),
        crystallize=skill_md,
        verify=audit(0.8),
    )
    assert run_evolution_cycle(llm.db, llm.skills)["published"] == 3
    with llm.db.session() as s:
        skills = list(s.scalars(select(Skill)))
        assert len(skills) == 3
        for skill in skills:
            assert "LLM-WRITTEN" in skill.body and "deadbeef" not in skill.body
            members = members_of(s, skill.source_cluster_id)
            steps = evolve.steps_of(skill.body)
            assert len(steps) == 4
            for step in steps:
                cited = set(evolve.CITE.findall(step))
                assert cited and cited <= members
            assert skill.score == 0.8  # the auditor's clarity and specificity
        assert "llm-docker" in {sk.slug for sk in skills}
        details = [r.detail for r in s.scalars(select(EvolutionRecord))]
        assert details and all(d.startswith("synthesis: llm") for d in details)
        assert any("removed citations of non-members ['deadbeef']" in d for d in details)
    prompts = chat_users(fake_openai, CRYSTALLIZE_MARK)
    assert len(prompts) == 3 and all(len(IDS.findall(p)) <= 20 for p in prompts)


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (lambda user: "I am sorry, I cannot write that skill.", "the answer is not a SKILL.md"),
        (lambda user: skill_md(user, steps=2), "fewer than 3 steps"),
        (lambda user: skill_md(user).replace("[m:", "[m:0"), "uncited steps"),
    ],
    ids=["garbage", "two-steps", "only-strangers-cited"],
)
def test_an_unusable_llm_draft_falls_back_to_the_offline_synthesizer(llm, fake_openai, answer, why):  # type: ignore[no-untyped-def]
    fake_openai.reply_fn = by_prompt(crystallize=answer, verify=audit(0.7))
    assert run_evolution_cycle(llm.db, llm.skills)["published"] == 3
    with llm.db.session() as s:
        for skill in s.scalars(select(Skill)):
            assert "LLM-WRITTEN" not in skill.body
            assert evolve.OFFLINE_NOTE in skill.body  # the deterministic synthesizer
        details = [r.detail for r in s.scalars(select(EvolutionRecord))]
        assert len(details) == 3
        assert all(d.startswith("synthesis: offline (llm draft rejected:") and why in d for d in details)


def test_recrystallization_edits_the_current_skill_md(llm, offline, fake_openai):  # type: ignore[no-untyped-def]
    def audit_by_version(user: str) -> str:
        return audit(0.9 if "REVISED" in user else 0.6)

    fake_openai.reply_fn = by_prompt(crystallize=skill_md, verify=audit_by_version)
    assert run_evolution_cycle(llm.db, llm.skills)["published"] == 3
    with llm.db.session() as s:
        tenant = local_actor(s).tenant_id
        cluster = next(c for c in llm.clusters.list_clusters(s, tenant) if "docker" in c.topic)
        current = llm.skills.latest(s, tenant, cluster.skill_slug)
        current_md = llm.skills.skill_md(current)
    alice = Ultron(hub=offline, agent="alice")
    new = [
        alice.upload_memory(text).id
        for text in (
            "docker build cache lost after changing the base image tag; pin the digest for pip layers",
            "docker build with BuildKit: mount the pip cache with --mount=type=cache for faster builds",
            "docker build cache ignored on CI runners; pull the previous image before docker build",
        )
    ]
    build_worker(offline).run_cycle(("cluster",), quiet=True)  # the worker's tick: their clusters
    fake_openai.reply_fn = by_prompt(
        recrystallize=lambda user: skill_md(user, name="Renamed Docker Skill", marker="REVISED", steps=5),
        verify=audit_by_version,
    )
    with llm.db.session() as s:
        assert llm.clusters.get_clusters_ready_to_recrystallize(s, tenant) == [cluster.id]
        assert llm.skills.evolve_cluster(s, tenant, cluster.id, "recrystallize") == "published"
        (user,) = chat_users(fake_openai, RECRYSTALLIZE_MARK)
        assert current_md in user  # the current SKILL.md is the base of the edit
        shown_new = re.findall(r'<memory id="m:([0-9a-f]{8})" new="true">', user)
        assert {evolve.cite(i)[3:-1] for i in new} <= set(shown_new)
        assert llm.skills.versions(s, tenant, current.slug) == ["1.1.0", "1.0.0"]
        revised = llm.skills.latest(s, tenant, current.slug)
        assert "REVISED" in revised.body and revised.name == current.name  # the name was kept
        assert revised.body.startswith(f"# {current.name}\n") and "Renamed" not in revised.body
        assert revised.score == 0.9
        record = s.scalars(select(EvolutionRecord).order_by(EvolutionRecord.id.desc())).first()
        assert record.trigger == "recrystallize" and "name kept" in record.detail


def test_a_revision_that_does_not_score_higher_is_reverted(llm, offline, fake_openai):  # type: ignore[no-untyped-def]
    fake_openai.reply_fn = by_prompt(crystallize=skill_md, recrystallize=skill_md, verify=audit(0.8))
    assert run_evolution_cycle(llm.db, llm.skills)["published"] == 3
    with llm.db.session() as s:
        tenant = local_actor(s).tenant_id
        cluster = llm.clusters.list_clusters(s, tenant)[0]
        assert llm.skills.evolve_cluster(s, tenant, cluster.id, "recrystallize") == "reverted"
        assert llm.skills.versions(s, tenant, cluster.skill_slug) == ["1.0.0"]


def test_read_answer_accepts_skill_md_json_and_markdown_and_rejects_the_rest():
    md = "# Title\n\n## Steps\n\n1. a\n2. b\n3. c\n"
    skill = render(SkillDoc("T", "d", md, {}))
    for reply in (skill, f"Here it is:\n```markdown\n{skill}```", f"<think>{{</think>\n{skill}"):
        answer = read_answer(reply)
        assert answer is not None and (answer.doc.name, answer.doc.body) == ("T", md.strip())
    as_json = read_answer(json.dumps({"name": "J", "description": "d", "body": md}))
    assert as_json is not None and (as_json.doc.name, as_json.doc.description) == ("J", "d")
    bare = read_answer(md)
    assert bare is not None and bare.doc.name == "Title" and not bare.topic_changed
    changed = read_answer("---\nname: N\ndescription: d\ntopic_changed: true\n---\n" + md)
    assert changed is not None and changed.topic_changed
    for bad in ("", "no skill here", '{"quality": "insufficient"}', "<think># x\n## y</think>"):
        assert read_answer(bad) is None
