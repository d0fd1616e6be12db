"""The evolution engine and the skill catalogue.

A worker step (`run_evolution_cycle`, called by ultron/worker/runner.py's evolve hook) first brings the
clusters up to date (leavers out, unclustered memories in), then crystallizes ready clusters and
recrystallizes grown ones. Publishing needs the structural bar and the verifier; a recrystallization must
also score strictly higher than the version it would replace. Failures back off exponentially.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import numpy as np
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from ultron.clusters.service import ClusterService
from ultron.config import Settings
from ultron.db.models import EvolutionRecord, KnowledgeCluster, Skill
from ultron.db.queries import q
from ultron.errors import NotFound
from ultron.skills import evolve
from ultron.skills.format import FIRST, SkillDoc, Version, embedding_text, render, slugify
from ultron.skills.llm import LLMSynthesizer

logger = logging.getLogger(__name__)

Verifier = Callable[[SkillDoc, list[dict[str, Any]]], evolve.Verdict]
Synthesizer = Callable[[str, list[dict[str, Any]]], SkillDoc]
# (topic, sample, current version or None) -> (draft, note) or (None, why the answer was rejected)
LLMDraft = Callable[[str, list[dict[str, Any]], SkillDoc | None], tuple[SkillDoc | None, str]]
SAMPLE = 20  # members a synthesis or verification prompt sees at most
BATCH = 10  # clusters per tenant per cycle
BACKOFF_BASE = timedelta(minutes=5)
BACKOFF_MAX = timedelta(days=1)


def version_of(skill: Skill) -> Version:
    return Version(skill.version_major, skill.version_minor, skill.version_patch)


class SkillService:
    def __init__(
        self, settings: Settings, db: Any, embedder: Any, clusters: ClusterService, intelligence: Any
    ):
        self.settings = settings
        self.db = db
        self.embedder = embedder
        self.clusters = clusters
        # The deterministic synthesizer: the offline path, and the fallback when the LLM's draft is unusable.
        self.synthesize: Synthesizer = evolve.synthesize
        llm = bool(getattr(intelligence, "llm_available", False))
        self.llm_synthesize: LLMDraft | None = LLMSynthesizer(intelligence) if llm else None
        self.verify: Verifier = evolve.llm_verifier(intelligence.ask) if llm else evolve.grounding

    # --- the worker step ---------------------------------------------------------------------------

    def run_evolution_cycle(self, should_stop: Callable[[], bool] = lambda: False) -> dict[str, int]:
        from ultron.worker.rebalance import tenant_ids

        with self.db.session() as session:
            tenants = tenant_ids(session)
        counts: dict[str, int] = {"clustered": 0, "left": 0, "published": 0, "failed": 0, "reverted": 0}
        for tenant_id in tenants:
            with self.db.session() as session:
                left = self.clusters.sync(session, tenant_id)
                counts["left"] += left["left"]
                counts["clustered"] += self.clusters.run_initial_clustering(session, tenant_id)
            with self.db.session() as session:
                ready = [
                    (c, "crystallize")
                    for c in self.clusters.get_clusters_ready_to_crystallize(session, tenant_id, BATCH)
                ]
                ready += [
                    (c, "recrystallize")
                    for c in self.clusters.get_clusters_ready_to_recrystallize(session, tenant_id, BATCH)
                ]
            for cluster_id, trigger in ready:
                if should_stop():
                    return counts
                with self.db.session() as session:
                    outcome = self.evolve_cluster(session, tenant_id, cluster_id, trigger)
                counts[outcome] = counts.get(outcome, 0) + 1
        return counts

    def evolve_cluster(self, session: Session, tenant_id: UUID, cluster_id: UUID, trigger: str) -> str:
        """Crystallize or recrystallize one cluster; returns published, failed or reverted."""
        cluster = session.get(KnowledgeCluster, cluster_id, with_for_update=True)
        if cluster is None or cluster.tenant_id != tenant_id:
            raise NotFound(f"cluster {cluster_id} not found")
        if not cluster.topic:
            self.clusters.name_topic(session, tenant_id, cluster_id)
        current = self.latest(session, tenant_id, cluster.skill_slug) if cluster.skill_slug else None
        if current is None or self.llm_synthesize is None:
            members = self.clusters.get_cluster_memories(session, tenant_id, cluster_id, SAMPLE)
        else:  # an edit of the current version: the prompt must see the new members and the cited ones
            cited = evolve.CITE.findall(current.body)
            members = self.clusters.get_revision_sample(
                session, tenant_id, cluster_id, current.created_at, cited, SAMPLE
            )
        record = EvolutionRecord(
            tenant_id=tenant_id,
            cluster_id=cluster_id,
            trigger=trigger,
            status="running",
            memory_ids=[m["id"] for m in members],
            skill_slug=cluster.skill_slug,
        )
        session.add(record)
        doc, source = self._draft(cluster.topic, members, current)
        problems = evolve.quality_problems(doc)
        verdict = evolve.Verdict(False, 0.0, "; ".join(problems)) if problems else self.verify(doc, members)
        record.new_score, record.detail = verdict.score, source
        if current is not None:
            record.old_version, record.old_score = str(version_of(current)), current.score
        if not verdict.passed:
            record.status = "quality_failed" if problems else "verify_failed"
            record.detail = f"{verdict.detail}; {source}"
            self._back_off(cluster)
            return self._finish(session, record, "failed")
        if current is not None and not verdict.score > (current.score or 0.0):
            record.status = "reverted"
            record.detail = f"the new version does not score higher; {source}"
            cluster.members_at_last_version = cluster.member_count
            self._back_off(cluster)
            return self._finish(session, record, "reverted")
        skill = self._publish(session, tenant_id, cluster, doc, verdict.score, current)
        record.status, record.skill_slug, record.new_version = "published", skill.slug, str(version_of(skill))
        cluster.failed_attempts, cluster.next_attempt_at = 0, None
        cluster.members_at_last_version = cluster.member_count
        return self._finish(session, record, "published")

    def _draft(
        self, topic: str, members: list[dict[str, Any]], current: Skill | None
    ) -> tuple[SkillDoc, str]:
        """The chat model's draft (a revision of `current` when there is one), else the deterministic
        synthesizer's; with a note for the evolution record saying which path produced it."""
        if self.llm_synthesize is None:
            return self.synthesize(topic, members), "synthesis: offline"
        base = self.skill_doc(current) if current is not None else None
        doc, note = self.llm_synthesize(topic, members, base)
        if doc is not None:
            return doc, f"synthesis: llm{f' ({note})' if note else ''}"
        return self.synthesize(topic, members), f"synthesis: offline (llm draft rejected: {note})"

    def _finish(self, session: Session, record: EvolutionRecord, outcome: str) -> str:
        record.finished_at = datetime.now(UTC)
        session.flush()
        return outcome

    def _back_off(self, cluster: KnowledgeCluster) -> None:
        cluster.failed_attempts += 1
        delay = min(BACKOFF_MAX, BACKOFF_BASE * 2 ** (cluster.failed_attempts - 1))
        cluster.next_attempt_at = datetime.now(UTC) + delay

    def _publish(
        self,
        session: Session,
        tenant_id: UUID,
        cluster: KnowledgeCluster,
        doc: SkillDoc,
        score: float,
        current: Skill | None,
    ) -> Skill:
        slug = slugify(doc.name)
        if current is not None and slug != current.slug:
            # A renamed skill: the old slug is superseded and leaves search.
            self.supersede(session, tenant_id, current.slug)
            cluster.superseded_slugs = [*cluster.superseded_slugs, current.slug]
        if current is None or slug != current.slug:
            slug = self._free_slug(session, tenant_id, slug)
            version = FIRST
        else:
            version = version_of(current).bump_minor()
        return self.save(session, tenant_id, slug, version, doc, score, cluster.id, cluster)

    def _free_slug(self, session: Session, tenant_id: UUID, slug: str) -> str:
        base, n = slug, 1
        while session.scalar(
            select(Skill.id).where(Skill.tenant_id == tenant_id, Skill.slug == slug).limit(1)
        ):
            slug, n = f"{base}-{n}", n + 1
        return slug

    # --- catalogue ---------------------------------------------------------------------------------

    def save(
        self,
        session: Session,
        tenant_id: UUID,
        slug: str,
        version: Version,
        doc: SkillDoc,
        score: float | None,
        cluster_id: UUID | None,
        cluster: KnowledgeCluster | None = None,
    ) -> Skill:
        vector = self.embedder.embed([embedding_text(doc.name, doc.description, doc.body)])[0]
        skill = Skill(
            tenant_id=tenant_id,
            slug=slug,
            version_major=version.major,
            version_minor=version.minor,
            version_patch=version.patch,
            name=doc.name,
            description=doc.description,
            body=doc.body,
            categories=list(doc.metadata.get("categories") or []),
            embedding=np.asarray(vector, np.float32),
            score=score,
            source_cluster_id=cluster_id,
        )
        session.add(skill)
        if cluster is not None:
            cluster.skill_slug = slug
        session.flush()
        return skill

    def supersede(self, session: Session, tenant_id: UUID, slug: str) -> None:
        session.execute(
            update(Skill).where(Skill.tenant_id == tenant_id, Skill.slug == slug).values(status="superseded")
        )

    def latest(
        self, session: Session, tenant_id: UUID, slug: str | None, version: str | None = None
    ) -> Skill:
        stmt = select(Skill).where(Skill.tenant_id == tenant_id, Skill.slug == slug)
        if version is not None:
            v = Version.parse(version)
            stmt = stmt.where(
                Skill.version_major == v.major, Skill.version_minor == v.minor, Skill.version_patch == v.patch
            )
        skill = session.scalar(
            stmt.order_by(Skill.version_major.desc(), Skill.version_minor.desc(), Skill.version_patch.desc())
        )
        if skill is None:
            raise NotFound(f"skill {slug!r}{f' version {version}' if version else ''} not found")
        return skill

    def versions(self, session: Session, tenant_id: UUID, slug: str) -> list[str]:
        rows = session.execute(
            select(Skill.version_major, Skill.version_minor, Skill.version_patch)
            .where(Skill.tenant_id == tenant_id, Skill.slug == slug)
            .order_by(Skill.version_major.desc(), Skill.version_minor.desc(), Skill.version_patch.desc())
        ).all()
        return [str(Version(*r)) for r in rows]

    def search(self, session: Session, tenant_id: UUID, query: str, limit: int = 10) -> list[dict[str, Any]]:
        vector = np.asarray(self.embedder.embed([query])[0], np.float32)
        rows = session.execute(
            q("search_skills"), {"tenant_id": tenant_id, "v": vector, "limit": limit}
        ).all()
        out = []
        for r in rows:
            item = dict(r._mapping)
            item["version"] = str(
                Version(item.pop("version_major"), item.pop("version_minor"), item.pop("version_patch"))
            )
            out.append(item)
        return out

    def skill_doc(self, skill: Skill) -> SkillDoc:
        metadata = {
            "version": str(version_of(skill)),
            "categories": list(skill.categories),
            "source_cluster": str(skill.source_cluster_id) if skill.source_cluster_id else None,
        }
        return SkillDoc(skill.name, skill.description, skill.body, metadata)

    def skill_md(self, skill: Skill) -> str:
        return render(self.skill_doc(skill))
