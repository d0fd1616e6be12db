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
from ultron.errors import NotFound, ValidationFailed
from ultron.skills import evolve
from ultron.skills.format import FIRST, SkillDoc, Version, render, slugify

logger = logging.getLogger(__name__)

Verifier = Callable[[SkillDoc, list[dict[str, Any]]], evolve.Verdict]
Synthesizer = Callable[[str, list[dict[str, Any]]], SkillDoc]
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
        self.synthesize: Synthesizer = evolve.synthesize
        ask = getattr(intelligence, "_ask", None)
        llm = bool(getattr(intelligence, "llm_available", False)) and ask is not None
        self.verify: Verifier = evolve.llm_verifier(ask) if llm else evolve.grounding

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
        members = self.clusters.get_cluster_memories(session, tenant_id, cluster_id, SAMPLE)
        record = EvolutionRecord(
            tenant_id=tenant_id,
            cluster_id=cluster_id,
            trigger=trigger,
            status="running",
            memory_ids=[m["id"] for m in members],
            skill_slug=cluster.skill_slug,
        )
        session.add(record)
        current = self.latest(session, tenant_id, cluster.skill_slug) if cluster.skill_slug else None
        doc = self.synthesize(cluster.topic, members)
        problems = evolve.quality_problems(doc)
        verdict = evolve.Verdict(False, 0.0, "; ".join(problems)) if problems else self.verify(doc, members)
        record.new_score = verdict.score
        if current is not None:
            record.old_version, record.old_score = str(version_of(current)), current.score
        if not verdict.passed:
            record.status, record.detail = ("quality_failed" if problems else "verify_failed"), verdict.detail
            self._back_off(cluster)
            return self._finish(session, record, "failed")
        if current is not None and not verdict.score > (current.score or 0.0):
            record.status, record.detail = "reverted", "the new version does not score higher"
            cluster.members_at_last_version = cluster.member_count
            self._back_off(cluster)
            return self._finish(session, record, "reverted")
        skill = self._publish(session, tenant_id, cluster, doc, verdict.score, current)
        record.status, record.skill_slug, record.new_version = "published", skill.slug, str(version_of(skill))
        cluster.failed_attempts, cluster.next_attempt_at = 0, None
        cluster.members_at_last_version = cluster.member_count
        return self._finish(session, record, "published")

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
        vector = self.embedder.embed([f"{doc.name}\n{doc.description}\n{doc.body}"])[0]
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

    def skill_md(self, skill: Skill) -> str:
        metadata = {
            "version": str(version_of(skill)),
            "categories": list(skill.categories),
            "source_cluster": str(skill.source_cluster_id) if skill.source_cluster_id else None,
        }
        return render(SkillDoc(skill.name, skill.description, skill.body, metadata))

    # --- for agents: the MCP tools and the brief ---------------------------------------------------

    def find(
        self, session: Session, tenant_id: UUID, query: str, limit: int = 5, redactor: Any = None
    ) -> list[dict[str, Any]]:
        """An agent's free-text skill search: validated, redacted, embedded as a query (not a document)."""
        if not query.strip():
            raise ValidationFailed("query must not be empty")
        if not 1 <= limit <= FIND_MAX:
            raise ValidationFailed(f"limit must be between 1 and {FIND_MAX}")
        # The query goes to the embedding provider (maybe an external API): redact it like any text.
        query = redactor.redact(query[:4000]).text if redactor is not None else query[:4000]
        vector = self.embedder.embed([query], kind="query")[0]
        return self.nearest(session, tenant_id, vector, limit)

    def nearest(self, session: Session, tenant_id: UUID, vector: Any, limit: int) -> list[dict[str, Any]]:
        """The latest active skills nearest to an embedded query (`search_skills`, HNSW)."""
        params = {"tenant_id": tenant_id, "v": np.asarray(vector, np.float32), "limit": limit}
        return [skill_hit(row) for row in session.execute(q("search_skills"), params)]

    def successor(self, session: Session, tenant_id: UUID, slug: str) -> str | None:
        """The slug that replaced a superseded one (its cluster's current skill), if any."""
        return session.scalar(
            select(KnowledgeCluster.skill_slug)
            .where(
                KnowledgeCluster.tenant_id == tenant_id,
                KnowledgeCluster.superseded_slugs.contains([slug]),
                KnowledgeCluster.skill_slug.is_not(None),
            )
            .limit(1)
        )


FIND_MAX = 50  # most skills one find() returns


def skill_hit(row: Any) -> dict[str, Any]:
    """A `search_skills`-shaped row as a dict, its version columns folded into "1.2.0"."""
    item = dict(row._mapping)
    item["version"] = str(
        Version(item.pop("version_major"), item.pop("version_minor"), item.pop("version_patch"))
    )
    return item
