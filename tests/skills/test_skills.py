"""The Skill Hub on real Postgres: crystallization end to end, the gates, versions, supersession, SKILL.md."""

from __future__ import annotations

from sqlalchemy import func, select

from ultron.db.models import EvolutionRecord, KnowledgeCluster, Skill
from ultron.hub import build_worker
from ultron.skills import evolve
from ultron.skills.format import SkillDoc, Version, parse
from ultron.tenancy import local_actor
from ultron.worker.evolution import run_evolution_cycle


def test_offline_end_to_end_thirty_memories_three_clusters_three_skills(hub, stocked):  # type: ignore[no-untyped-def]
    outcome = next(o for o in build_worker(hub).run_cycle(("evolution",)) if o.step == "evolution")
    assert outcome.counts.get("published") == 3, outcome
    with hub.db.session() as s:
        tenant = local_actor(s).tenant_id
        clusters = hub.clusters.list_clusters(s, tenant)
        assert len([c for c in clusters if c.member_count >= 5]) == 3
        skills = list(s.scalars(select(Skill).where(Skill.tenant_id == tenant)))
        assert len(skills) == 3
        names = " | ".join(sorted(sk.name.lower() for sk in skills))
        assert "docker" in names and "postgres" in names and "pytest" in names
        for sk in skills:
            members = {str(m).replace("-", "")[:8] for m in _members(s, sk.source_cluster_id)}
            assert evolve.steps_of(sk.body) == [] and evolve.is_offline(sk.body)  # alternatives, not steps
            steps = evolve.entries_of(sk.body)
            assert len(steps) >= 3
            for step in steps:  # every entry cites members of its own cluster
                cited = set(evolve.CITE.findall(step))
                assert cited and cited <= members
        found = hub.skills.search(s, tenant, "my docker build reinstalls pip packages every time")
        assert "docker" in found[0]["slug"]


def _members(s, cluster_id):  # type: ignore[no-untyped-def]
    from ultron.db.models import ClusterMember

    return s.scalars(select(ClusterMember.memory_id).where(ClusterMember.cluster_id == cluster_id)).all()


def test_a_verifier_failure_blocks_publishing_and_backs_off(hub, stocked):  # type: ignore[no-untyped-def]
    hub.skills.verify = lambda doc, members: evolve.Verdict(False, 0.9, "auditor found a contradiction")
    counts = run_evolution_cycle(hub.db, hub.skills)
    assert counts["published"] == 0 and counts["failed"] == 3
    with hub.db.session() as s:
        assert s.scalar(select(func.count()).select_from(Skill)) == 0
        assert (
            s.scalar(
                select(func.count())
                .select_from(KnowledgeCluster)
                .where(KnowledgeCluster.next_attempt_at.is_not(None))
            )
            == 3
        )
        assert {r.status for r in s.scalars(select(EvolutionRecord))} == {"verify_failed"}
    # backing off: the next cycle does not retry them
    assert run_evolution_cycle(hub.db, hub.skills)["failed"] == 0


def test_an_unparsable_llm_verifier_answer_is_a_failure():
    doc = SkillDoc("x", "d", "## When to use\n\n## Steps\n\n1. do a [m:0123abcd]\n", {})
    members = [
        {"id": "0123abcd-0000-0000-0000-000000000000", "content": "a", "context": "", "resolution": ""}
    ]
    assert evolve.grounding(doc, members).passed
    assert not evolve.llm_verifier(lambda *a: None)(doc, members).passed
    assert not evolve.llm_verifier(lambda *a: {"nonsense": 1})(doc, members).passed
    ok = {
        "grounded_in_evidence": 0.9,
        "contradicted": False,
        "workflow_clarity": 0.8,
        "specificity_and_reusability": 0.6,
    }
    assert evolve.llm_verifier(lambda *a: ok)(doc, members).passed


def test_an_upgrade_that_does_not_score_higher_keeps_the_old_version(hub, stocked):  # type: ignore[no-untyped-def]
    assert run_evolution_cycle(hub.db, hub.skills)["published"] == 3
    with hub.db.session() as s:
        tenant = local_actor(s).tenant_id
        cluster = next(c for c in hub.clusters.list_clusters(s, tenant) if c.skill_slug)
        old = hub.skills.latest(s, tenant, cluster.skill_slug)
        old_score = old.score
        hub.skills.verify = lambda doc, members: evolve.Verdict(True, old_score, "")
        assert hub.skills.evolve_cluster(s, tenant, cluster.id, "recrystallize") == "reverted"
        assert hub.skills.versions(s, tenant, cluster.skill_slug) == ["1.0.0"]
        hub.skills.verify = lambda doc, members: evolve.Verdict(True, old_score + 0.1, "")
        assert hub.skills.evolve_cluster(s, tenant, cluster.id, "recrystallize") == "published"
        assert hub.skills.versions(s, tenant, cluster.skill_slug) == ["1.1.0", "1.0.0"]


def test_superseded_slugs_leave_search_and_versions_sort_as_numbers(hub, stocked):  # type: ignore[no-untyped-def]
    assert run_evolution_cycle(hub.db, hub.skills)["published"] == 3
    with hub.db.session() as s:
        tenant = local_actor(s).tenant_id
        cluster = next(c for c in hub.clusters.list_clusters(s, tenant) if "docker" in (c.skill_slug or ""))
        old_slug = cluster.skill_slug
        base = hub.skills.latest(s, tenant, old_slug)
        doc = SkillDoc("Docker Build Caching", base.description, base.body, {})
        for v in ("1.9.0", "1.10.0"):
            hub.skills.save(s, tenant, old_slug, Version.parse(v), doc, 0.5, cluster.id)
        assert str(Version(*_v(hub.skills.latest(s, tenant, old_slug)))) == "1.10.0"
        assert Version.parse("1.10.0") > Version.parse("1.9.0")
        hits = hub.skills.search(s, tenant, "docker build cache pip install")
        assert [h["version"] for h in hits if h["slug"] == old_slug] == ["1.10.0"]
        # a rename: the cluster's next version publishes under a new slug; the old one is superseded
        hub.skills.synthesize = lambda topic, members: _renamed(evolve.synthesize(topic, members))
        hub.skills.verify = lambda doc, members: evolve.Verdict(True, 0.99, "")
        assert hub.skills.evolve_cluster(s, tenant, cluster.id, "recrystallize") == "published"
        s.refresh(cluster)
        assert old_slug in cluster.superseded_slugs and cluster.skill_slug == "container-image-caching"
        slugs = [h["slug"] for h in hub.skills.search(s, tenant, "docker build cache pip install")]
        assert old_slug not in slugs and "container-image-caching" in slugs


def _v(skill):  # type: ignore[no-untyped-def]
    return skill.version_major, skill.version_minor, skill.version_patch


def _renamed(doc: SkillDoc) -> SkillDoc:
    return SkillDoc("Container Image Caching", doc.description, doc.body, doc.metadata)


def test_an_exported_skill_md_parses_back_to_the_same_skill(hub, stocked):  # type: ignore[no-untyped-def]
    run_evolution_cycle(hub.db, hub.skills)
    with hub.db.session() as s:
        skill = s.scalars(select(Skill)).first()
        doc = parse(hub.skills.skill_md(skill))
        assert (doc.name, doc.description, doc.body) == (skill.name, skill.description, skill.body.strip())
        assert doc.metadata["version"] == "1.0.0"
