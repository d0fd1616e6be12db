"""From real-looking agent sessions to skills, offline (issue 32): 42 sessions of two harnesses (OpenAI
messages and Claude Code logs, each with its long boilerplate in every session) about three problems,
some of them failed runs that sign off as if they had succeeded. With the default local embedder every
extracted memory holds its error lines and the fix, no failed run is cited, clusters stay by problem and
each problem that gathered enough memories gets one skill titled by it."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

from sqlalchemy import select

from tests.data.make_skill_sessions import OUT, expected
from ultron.db.models import ClusterMember, Memory, MemorySource, SessionRecord, Skill
from ultron.hub import build_worker
from ultron.ingestion.schemas import IngestFile
from ultron.skills import evolve
from ultron.skills.format import parse
from ultron.tenancy import local_actor
from ultron.worker.evolution import run_evolution_cycle

EXPECTED = expected()
# Each topic's error signature (ultron/clusters/signature.py): the tool and kind its errors share.
SIGNATURES = {"nginx": ["nginx [emerg]"], "make": ["make ***", "collect2 error"], "rust": ["error[E0"]}
# What every session of a harness says, never a problem's name.
HARNESS_WORDS = {"met", "task", "trajectory", "verified", "bash", "consider", "execute", "workspace"}
# A query naming each topic's problem, as an agent meeting it would search.
QUERIES = {
    "nginx": "nginx -t fails: [emerg] unknown directive in the server config",
    "make": "make fails to link: undefined reference, collect2: error: ld returned 1 exit status",
    "rust": "cargo build error[E0502]: cannot borrow as mutable because it is also borrowed",
}


DOC = Path(__file__).parents[2] / "docs" / "skills.md"
DOC_SECTION = "## From agent sessions to a skill, offline (issue 32)"
DOC_TOPIC = "make"  # the skill docs/skills.md quotes
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_CITE = re.compile(r"\[m:[0-9a-f]{8}\]")


# The two harnesses' runs of one variant differ in the check's `cd` and the wrong attempt's comment; which
# of the two survives their near-duplicate merge depends on the order the worker leases the sessions (by
# random id), as do the memory and cluster ids.
_HARNESS_COPY = re.compile(r"(?<=`)cd /workspace/\w+ && |\s+# (?:retry|tmp)(?=;|`)")


def _without_ids(md: str) -> str:
    """A SKILL.md as any run renders it: ids, citations and the surviving harness's copy made alike."""
    return _HARNESS_COPY.sub("", _CITE.sub("[m:…]", _UUID.sub("…", md))).strip()


def _documented() -> str:
    """The SKILL.md docs/skills.md quotes in its issue-32 section."""
    section = DOC.read_text().split(DOC_SECTION, 1)[1]
    return section.split("```markdown\n", 1)[1].split("\n```", 1)[0]


def _files() -> list[IngestFile]:
    return [IngestFile(str(p.relative_to(OUT)), p.read_bytes()) for p in sorted(OUT.glob("*/*.jsonl"))]


def test_the_corpus_is_as_the_generator_writes_it():
    assert len(_files()) == len(EXPECTED) >= 40
    formats = {f.name.split("/")[0] for f in _files()}
    assert formats == {"swe", "cc"}
    assert sum(not e["passed"] for e in EXPECTED.values()) >= 6
    assert len({e["topic"] for e in EXPECTED.values()}) == 3


def _process(make_hub):  # type: ignore[no-untyped-def]
    """The corpus ingested into a hub with the local embedder at its default thresholds, processed by the
    worker, and one evolution cycle run."""
    hub = make_hub(embedding_provider="local", cluster_similarity_threshold=None)
    with hub.db.session() as s:
        result = hub.ingestion.ingest_files(s, local_actor(s), _files())
    assert result.successful == len(EXPECTED), result.errors
    worker = build_worker(hub)
    while any(worker.process_due().values()):
        pass
    return hub, run_evolution_cycle(hub.db, hub.skills)


def _memories(hub) -> dict:  # type: ignore[type-arg,no-untyped-def]
    """memory id -> (the memory, the corpus files it came from)."""
    with hub.db.session() as s:
        rows = s.execute(
            select(Memory, SessionRecord.source)
            .join(
                MemorySource,
                (MemorySource.memory_id == Memory.id) & (MemorySource.tenant_id == Memory.tenant_id),
            )
            .join(
                SessionRecord,
                (SessionRecord.id == MemorySource.session_id)
                & (SessionRecord.tenant_id == MemorySource.tenant_id),
            )
            .where(Memory.status == "active")
        ).all()
        out: dict = defaultdict(lambda: [None, []])
        for memory, source in rows:
            if out[memory.id][0] is None:
                s.expunge(memory)
            out[memory.id][0] = memory
            out[memory.id][1].append(source)
    return out


def test_from_sessions_to_skills_offline(make_hub):
    hub, counts = _process(make_hub)
    _every_memory_holds_its_errors_and_a_concrete_fix_and_no_failed_run_is_one(hub)
    _clusters_are_pure_by_problem_and_each_problem_gets_one_skill_named_by_it(hub, counts)
    _a_query_naming_a_problem_finds_its_skill_first(hub)


def _a_query_naming_a_problem_finds_its_skill_first(hub):  # type: ignore[no-untyped-def]
    memories = _memories(hub)
    with hub.db.session() as s:
        members = dict(s.execute(select(ClusterMember.memory_id, ClusterMember.cluster_id)).all())
        tenant = local_actor(s).tenant_id
        topic_of = {
            c: Counter(
                EXPECTED[memories[m][1][0]]["topic"] for m, cc in members.items() if cc == c
            ).most_common(1)[0][0]
            for c in set(members.values())
        }
        for topic, query in QUERIES.items():
            hits = hub.skills.search(s, tenant, query, limit=3)
            assert hits and topic_of[hits[0]["source_cluster_id"]] == topic, (topic, query, hits)


def _every_memory_holds_its_errors_and_a_concrete_fix_and_no_failed_run_is_one(hub):  # type: ignore[no-untyped-def]
    memories = _memories(hub)
    sources = [src for _, srcs in memories.values() for src in srcs]
    passed = {name for name, e in EXPECTED.items() if e["passed"]}
    assert set(sources) == passed  # every run that passed taught something; no failed run did
    for memory, srcs in memories.values():
        wanted = [EXPECTED[src] for src in srcs]
        assert any(w["error"] in memory.content for w in wanted), (memory.content, wanted)
        assert any(
            f"+{w['fix']}" in memory.resolution.replace("+    ", "+").replace("+\t", "+")
            or w["fix"] in memory.resolution
            for w in wanted
        ), memory.resolution
        assert "@@" in memory.resolution and "Verified with:" in memory.resolution
        # the harness's prompt and template are gone; the sign-off is not the resolution
        assert "<uploaded_files>" not in memory.content and "system-reminder" not in memory.content
        assert "CLAUDE.md" not in memory.content and "ready to submit" not in memory.resolution


def _clusters_are_pure_by_problem_and_each_problem_gets_one_skill_named_by_it(hub, counts):  # type: ignore[no-untyped-def]
    memories = _memories(hub)
    with hub.db.session() as s:
        members = s.execute(select(ClusterMember.cluster_id, ClusterMember.memory_id)).all()
        tenant = local_actor(s).tenant_id
        skills = [hub.skills.latest(s, tenant, slug) for slug in set(s.scalars(select(Skill.slug)))]
        docs = [(k.source_cluster_id, parse(hub.skills.skill_md(k)), hub.skills.skill_md(k)) for k in skills]
    clusters: dict = defaultdict(list)
    for cluster_id, memory_id in members:
        if memory_id in memories:
            clusters[cluster_id].append(EXPECTED[memories[memory_id][1][0]]["topic"])
    majority = sum(Counter(topics).most_common(1)[0][1] for topics in clusters.values())
    purity = majority / sum(len(t) for t in clusters.values())
    assert purity >= 0.9, {str(k)[:8]: Counter(v) for k, v in clusters.items()}
    print(
        "clusters:",
        sorted(sorted(Counter(t).items()) for t in clusters.values()),
        "purity:",
        round(purity, 3),
    )
    # Every topic with enough memories (those that passed, after merging duplicates) gets exactly one skill.
    threshold = hub.settings.crystallization_threshold
    per_topic = Counter(EXPECTED[srcs[0]]["topic"] for _, srcs in memories.values())
    enough = {t for t, n in per_topic.items() if n >= threshold}
    assert enough == set(SIGNATURES), per_topic  # the corpus gives every topic enough passing runs
    skill_topics = Counter(Counter(clusters[c]).most_common(1)[0][0] for c, _, _ in docs)
    assert skill_topics == Counter(enough) and counts["published"] == len(docs), (skill_topics, counts)
    for cluster_id, doc, md in docs:
        topic = Counter(clusters[cluster_id]).most_common(1)[0][0]
        # titled by its problem: the topic's error signature, no harness word
        assert any(sig in doc.name for sig in SIGNATURES[topic]), (doc.name, topic)
        words = {w.lower().strip(",;:[]") for w in doc.name.split()}
        assert not words & HARNESS_WORDS, doc.name
        entries = evolve.entries_of(doc.body)
        assert entries and all(evolve.FIX in e for e in entries), md
        for entry in entries:  # the symptom is an error line; the fix is the diff and its check
            symptom = entry.split(evolve.SYMPTOM)[1].split(evolve.FIX)[0].strip()
            lines = [e for w in EXPECTED.values() for e in w["errors"]]
            assert any(e.startswith(symptom.rstrip("…")) for e in lines), entry  # one whole, clipped
            assert any(w["fix"] in entry for w in EXPECTED.values()), entry
            assert "verified with:" in entry, entry
        print(md)  # `pytest -s` shows the skills
    # docs/skills.md shows one of them verbatim (but for the ids a run draws at random)
    quoted = [md for c, _, md in docs if Counter(clusters[c]).most_common(1)[0][0] == DOC_TOPIC]
    assert _without_ids(quoted[0]) == _without_ids(_documented()), quoted[0]
