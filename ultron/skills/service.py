"""The evolution engine and the skill catalogue.

The worker's evolution step (ultron/worker/evolution.py owns its loop over tenants and its transactions)
first brings each tenant's clusters up to date (`refresh_clusters`: leavers out, unclustered memories in,
new clusters into the HNSW index), then crystallizes ready clusters and recrystallizes grown ones
(`ready_clusters`, `evolve_cluster`). Publishing needs the structural bar and the verifier; a
recrystallization must also score strictly higher than the version it would replace, or, offline, present
fixes the current offline version lacks without presenting fewer (`_offline_gain`). Failures back off
exponentially.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import numpy as np
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from ultron.clusters.merge import merge_small, refine
from ultron.clusters.service import ClusterService
from ultron.config import Settings
from ultron.db.engine import Database
from ultron.db.models import EvolutionRecord, KnowledgeCluster, Skill, SkillFile
from ultron.db.queries import q
from ultron.errors import NotFound, ValidationFailed
from ultron.skills import bundle, evolve
from ultron.skills.format import (
    FIRST,
    SkillDoc,
    Version,
    embedding_text,
    kept_front_matter,
    parse,
    render,
    slugify,
)
from ultron.skills.llm import LLMSynthesizer
from ultron.skills.schemas import (
    EvolutionEntry,
    SkillDetail,
    SkillHit,
    SkillStatusFilter,
    SkillSummary,
    SkillUploadResult,
)
from ultron.tenancy import Actor

logger = logging.getLogger(__name__)
# Versions are integer columns: this orders 1.10.0 above 1.9.0.
NEWEST_FIRST = (Skill.version_major.desc(), Skill.version_minor.desc(), Skill.version_patch.desc())

Verifier = Callable[[SkillDoc, list[dict[str, Any]]], evolve.Verdict]
Synthesizer = Callable[[str, list[dict[str, Any]]], SkillDoc]
# (topic, sample, current version or None) -> (draft, note) or (None, why the answer was rejected)
LLMDraft = Callable[[str, list[dict[str, Any]], SkillDoc | None], tuple[SkillDoc | None, str]]
SAMPLE = 20  # members a synthesis or verification prompt sees at most
BATCH = 10  # clusters per tenant per cycle
BACKOFF_BASE = timedelta(minutes=5)
BACKOFF_MAX = timedelta(days=1)
# Advisory-lock namespace of skill uploads (first key of pg_advisory_xact_lock(int, int)).
UPLOAD_LOCK_NAMESPACE = 0x554C0006


def version_of(skill: Skill) -> Version:
    return Version(skill.version_major, skill.version_minor, skill.version_patch)


class SkillService:
    def __init__(
        self,
        settings: Settings,
        db: Database,
        embedder: Any,
        clusters: ClusterService,
        intelligence: Any,
        *,
        redactor: Any = None,
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
        self.redactor = redactor  # uploads and search queries are redacted (None: redaction is off)

    # --- the worker step ---------------------------------------------------------------------------

    def refresh_clusters(self, session: Session, tenant_id: UUID) -> dict[str, int]:
        """One tenant's clusters brought up to date: leavers out, unclustered memories in, new clusters
        into the HNSW index, misplaced members moved (`refine`), small clusters merged into the neighbour they
        would have formed one with."""
        left = self.clusters.sync(session, tenant_id)["left"]
        clustered = self.clusters.run_initial_clustering(session, tenant_id)
        indexed = self.clusters.index_pending(session, tenant_id)
        settings = self.settings
        # misplaced members moved first (a fragment's true members then merge whole), and again after
        moved = refine(session, self.clusters, tenant_id, settings.cluster_threshold)
        merged = merge_small(
            session, tenant_id, settings.cluster_threshold, settings.crystallization_threshold
        )
        moved += refine(session, self.clusters, tenant_id, settings.cluster_threshold)
        return {"left": left, "clustered": clustered, "indexed": indexed, "merged": merged, "moved": moved}

    def ready_clusters(self, session: Session, tenant_id: UUID) -> list[tuple[UUID, str]]:
        """(cluster, crystallize | recrystallize) for the tenant's clusters due for a skill version."""
        ready = [
            (c, "crystallize")
            for c in self.clusters.get_clusters_ready_to_crystallize(session, tenant_id, BATCH)
        ]
        ready += [
            (c, "recrystallize")
            for c in self.clusters.get_clusters_ready_to_recrystallize(session, tenant_id, BATCH)
        ]
        return ready

    def evolve_cluster(self, session: Session, tenant_id: UUID, cluster_id: UUID, trigger: str) -> str:
        """Crystallize or recrystallize one cluster; returns published, failed or reverted."""
        cluster = session.get(KnowledgeCluster, (cluster_id, tenant_id), with_for_update=True)
        if cluster is None or cluster.tenant_id != tenant_id:
            raise NotFound(f"cluster {cluster_id} not found")
        if not cluster.topic:
            self.clusters.name_topic(session, tenant_id, cluster_id)
        current = self.latest(session, tenant_id, cluster.skill_slug) if cluster.skill_slug else None
        if current is None:
            members = self.clusters.get_cluster_memories(session, tenant_id, cluster_id, SAMPLE, core=True)
        else:  # a revision must see the new members and the ones the current version cites
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
        added = self._offline_gain(doc, current, source)
        if current is not None and not (verdict.score > (current.score or 0.0) or added):
            record.status = "reverted"
            record.detail = f"the new version does not score higher and adds no fix; {source}"
            cluster.members_at_last_version = cluster.member_count
            self._back_off(cluster)
            return self._finish(session, record, "reverted")
        if current is not None and not verdict.score > (current.score or 0.0):
            record.detail = f"adds {added} fixes the current version lacks; {source}"
        skill = self._publish(session, tenant_id, cluster, doc, verdict.score, current)
        record.status, record.skill_slug, record.new_version = "published", skill.slug, str(version_of(skill))
        cluster.failed_attempts, cluster.next_attempt_at = 0, None
        cluster.members_at_last_version = cluster.member_count
        return self._finish(session, record, "published")

    @staticmethod
    def _offline_gain(doc: SkillDoc, current: Skill | None, source: str) -> int:
        """How many fixes an offline revision of an offline version adds, when it keeps at least as many
        as the current one presents (0 otherwise): the measure that can improve offline, where the
        grounding score is capped at 1.0. A version a chat model or a person wrote is never replaced by
        the offline list on this measure."""
        if (
            current is None
            or not source.startswith("synthesis: offline")
            or not evolve.is_offline(current.body)
        ):
            return 0
        new, old = evolve.fixes_of(doc.body), evolve.fixes_of(current.body)
        return len(new - old) if len(new) >= len(old) else 0

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
        # An uploaded skill's own front matter (license, allowed-tools, ...) stays with its next versions.
        kept = current.front_matter if current is not None else None
        skill = self.save(session, tenant_id, slug, version, doc, score, cluster.id, cluster, kept)
        if current is not None:  # an uploaded skill's scripts and references stay with its next versions
            self._store_files(session, skill, self.files(session, current))
        return skill

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
        front_matter: dict[str, Any] | None = None,
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
            front_matter=front_matter or {},
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

    def newest(self, session: Session, tenant_id: UUID, slug: str | None) -> Skill | None:
        """The slug's highest version (whatever its status), or None."""
        return session.scalar(
            select(Skill)
            .where(Skill.tenant_id == tenant_id, Skill.slug == slug)
            .order_by(*NEWEST_FIRST)
            .limit(1)
        )

    def latest(
        self, session: Session, tenant_id: UUID, slug: str | None, version: str | None = None
    ) -> Skill:
        if version is None:
            skill = self.newest(session, tenant_id, slug)
        else:
            v = Version.parse(version)
            skill = session.scalar(
                select(Skill).where(
                    Skill.tenant_id == tenant_id,
                    Skill.slug == slug,
                    Skill.version_major == v.major,
                    Skill.version_minor == v.minor,
                    Skill.version_patch == v.patch,
                )
            )
        if skill is None:
            raise NotFound(f"skill {slug!r}{f' version {version}' if version else ''} not found")
        return skill

    def versions(self, session: Session, tenant_id: UUID, slug: str) -> list[str]:
        rows = session.execute(
            select(Skill.version_major, Skill.version_minor, Skill.version_patch)
            .where(Skill.tenant_id == tenant_id, Skill.slug == slug)
            .order_by(*NEWEST_FIRST)
        ).all()
        return [str(Version(*r)) for r in rows]

    def search(self, session: Session, tenant_id: UUID, query: str, limit: int = 10) -> list[dict[str, Any]]:
        """Latest active skills nearest to a free-text query (validated, redacted, embedded as a query)."""
        return self.find(session, tenant_id, query, limit)

    def skill_doc(self, skill: Skill) -> SkillDoc:
        kept = skill.front_matter or {}
        metadata = {
            **(kept.get("metadata") or {}),
            "version": str(version_of(skill)),
            "categories": list(skill.categories),
            "source_cluster": str(skill.source_cluster_id) if skill.source_cluster_id else None,
        }
        return SkillDoc(skill.name, skill.description, skill.body, metadata, dict(kept.get("extra") or {}))

    def skill_md(self, skill: Skill) -> str:
        return render(self.skill_doc(skill))

    # --- the hub's API: catalogue, files, upload ----------------------------------------------------

    def hits(self, session: Session, tenant_id: UUID, query: str, limit: int = 5) -> list[SkillHit]:
        return [SkillHit.model_validate(h) for h in self.search(session, tenant_id, query, limit)]

    def list_skills(
        self,
        session: Session,
        tenant_id: UUID,
        *,
        status: SkillStatusFilter = "active",
        limit: int = 50,
        offset: int = 0,
    ) -> list[SkillSummary]:
        """The latest version of each slug, newest first."""
        rows = session.execute(
            q("list_skills"), {"tenant_id": tenant_id, "status": status, "limit": limit, "offset": offset}
        ).all()
        return [_summary(dict(r._mapping)) for r in rows]

    def summary(self, skill: Skill) -> SkillSummary:
        return _summary({c: getattr(skill, c) for c in _SUMMARY_COLUMNS})

    def detail(self, session: Session, tenant_id: UUID, slug: str, version: str | None = None) -> SkillDetail:
        skill = self.latest(session, tenant_id, slug, version)
        paths = session.scalars(
            select(SkillFile.path)
            .where(SkillFile.skill_id == skill.id, SkillFile.tenant_id == tenant_id)
            .order_by(SkillFile.path)
        )
        return SkillDetail(
            **self.summary(skill).model_dump(),
            versions=self.versions(session, tenant_id, slug),
            body=skill.body,
            files=list(paths),
        )

    def history(self, session: Session, tenant_id: UUID, slug: str, limit: int = 50) -> list[EvolutionEntry]:
        """Evolution records of the skill and of the clusters it came from, newest first."""
        self.latest(session, tenant_id, slug)  # NotFound for an unknown slug
        rows = session.execute(q("skill_history"), {"tenant_id": tenant_id, "slug": slug, "limit": limit})
        return [EvolutionEntry.model_validate(dict(r._mapping)) for r in rows]

    def files(self, session: Session, skill: Skill) -> dict[str, str]:
        """The files of one version besides SKILL.md."""
        rows = session.execute(
            select(SkillFile.path, SkillFile.content)
            .where(SkillFile.skill_id == skill.id, SkillFile.tenant_id == skill.tenant_id)
            .order_by(SkillFile.path)
        )
        return {r.path: r.content for r in rows}

    def folder(
        self, session: Session, tenant_id: UUID, slug: str, version: str | None = None
    ) -> dict[str, str]:
        """The whole skill folder of one version: SKILL.md (as skill_md renders it) and its files."""
        skill = self.latest(session, tenant_id, slug, version)
        return {bundle.SKILL_MD: self.skill_md(skill), **self.files(session, skill)}

    def _store_files(self, session: Session, skill: Skill, files: Mapping[str, str]) -> None:
        for path, content in files.items():
            session.add(
                SkillFile(
                    tenant_id=skill.tenant_id,
                    skill_id=skill.id,
                    path=path,
                    content=content,
                    sha256=hashlib.sha256(content.encode("utf-8")).hexdigest(),
                )
            )
        session.flush()

    def upload(self, session: Session, actor: Actor, files: Mapping[str, str]) -> SkillUploadResult:
        """Store an existing skill folder: a new slug starts at 1.0.0, a known one gets the next minor."""
        files = bundle.check_files(files)
        doc, extra, redacted = self._redact_upload(_uploaded_doc(files[bundle.SKILL_MD]), files)
        slug = _upload_slug(doc)
        session.execute(
            q("lock_skill_slug"), {"ns": UPLOAD_LOCK_NAMESPACE, "tenant_id": actor.tenant_id, "slug": slug}
        )
        current = self.newest(session, actor.tenant_id, slug)
        version = version_of(current).bump_minor() if current is not None else FIRST
        kept = kept_front_matter(doc)
        skill = self.save(session, actor.tenant_id, slug, version, doc, None, None, front_matter=kept)
        self._store_files(session, skill, extra)
        now = datetime.now(UTC)
        session.add(
            EvolutionRecord(
                tenant_id=actor.tenant_id,
                skill_slug=slug,
                trigger="upload",
                status="published",
                old_version=str(version_of(current)) if current is not None else None,
                old_score=current.score if current is not None else None,
                new_version=str(version),
                detail=f"uploaded by {actor.agent_name}: SKILL.md and {len(extra)} other files",
                started_at=now,
                finished_at=now,
            )
        )
        session.flush()
        return SkillUploadResult(
            skill=self.detail(session, actor.tenant_id, slug, str(version)),
            previous_version=str(version_of(current)) if current is not None else None,
            redacted=redacted,
        )

    def _redact_upload(
        self, doc: SkillDoc, files: Mapping[str, str]
    ) -> tuple[SkillDoc, dict[str, str], dict[str, int]]:
        """Redact the parsed SKILL.md field by field (a placeholder could break its YAML) and every file."""
        extra = {p: c for p, c in files.items() if p != bundle.SKILL_MD}
        if self.redactor is None:
            return doc, extra, {}
        fields = {"name": doc.name, "description": doc.description, "body": doc.body}
        clean, counts = self.redactor.redact_fields({**fields, **{f"file:{p}": c for p, c in extra.items()}})
        metadata, more = self.redactor.redact_json(doc.metadata)
        front, most = self.redactor.redact_json(doc.extra)
        for entity, n in [*more.items(), *most.items()]:
            counts[entity] = counts.get(entity, 0) + n
        out = SkillDoc(clean["name"] or "", clean["description"] or "", clean["body"] or "", metadata, front)
        return out, {p: clean[f"file:{p}"] or "" for p in extra}, counts

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
        redactor = redactor if redactor is not None else self.redactor
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


_SUMMARY_COLUMNS = (
    "slug",
    "name",
    "description",
    "version_major",
    "version_minor",
    "version_patch",
    "categories",
    "score",
    "status",
    "source_cluster_id",
    "created_at",
)


def _summary(row: dict[str, Any]) -> SkillSummary:
    version = Version(row.pop("version_major"), row.pop("version_minor"), row.pop("version_patch"))
    return SkillSummary.model_validate({**row, "version": str(version)})


def _uploaded_doc(text: str) -> SkillDoc:
    doc = parse(text)
    categories = doc.metadata.get("categories") or []
    if isinstance(categories, str):
        categories = [categories]
    if not isinstance(categories, list) or not all(isinstance(c, str | int | float) for c in categories):
        raise ValidationFailed("SKILL.md metadata.categories must be a list of strings")
    metadata = {**doc.metadata, "categories": [str(c) for c in categories]}
    return replace(doc, metadata=metadata)


def _upload_slug(doc: SkillDoc) -> str:
    given = doc.metadata.get("slug")
    if given is not None and not isinstance(given, str):
        raise ValidationFailed("SKILL.md metadata.slug must be a string")
    if not doc.name.strip():
        raise ValidationFailed("SKILL.md name is empty after redaction")
    return slugify(given or doc.name)


FIND_MAX = 50  # most skills one find() returns


def skill_hit(row: Any) -> dict[str, Any]:
    """A `search_skills`-shaped row as a dict, its version columns folded into "1.2.0"."""
    item = dict(row._mapping)
    item["version"] = str(
        Version(item.pop("version_major"), item.pop("version_minor"), item.pop("version_patch"))
    )
    return item
