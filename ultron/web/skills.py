"""The dashboard's read-only view of the Skill Hub: the skill list, one skill's versions, its SKILL.md and
the evolution history of the cluster it came from. Everything is scoped by the caller's tenant.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING
from uuid import UUID

from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from ultron.db.models import KnowledgeCluster, Skill
from ultron.db.queries import q
from ultron.errors import NotFound
from ultron.skills.format import Version
from ultron.skills.schemas import EvolutionEntry
from ultron.skills.service import NEWEST_FIRST
from ultron.tenancy import Actor

if TYPE_CHECKING:
    from ultron.skills.service import SkillService

MAX_SKILLS = 500
HISTORY_ROWS = 100


class SkillRow(BaseModel):
    """A skill as the list shows it: its latest version."""

    slug: str
    name: str
    description: str
    version: str
    status: str = Field(..., description="active, or superseded (renamed by a recrystallization)")
    score: float | None
    versions: int
    created_at: datetime = Field(..., description="when its first version was published")
    updated_at: datetime = Field(..., description="when its latest version was published")
    cluster_id: UUID | None
    cluster_topic: str | None
    cluster_size: int | None = Field(None, description="members of its source cluster today")


class SkillList(BaseModel):
    items: list[SkillRow]
    crystallization_threshold: int = Field(..., description="members a cluster needs to become a skill")
    recrystallization_delta: int = Field(..., description="new members before a skill is revised")
    clusters: int = Field(..., description="the tenant's non-empty knowledge clusters")
    largest_cluster_without_skill: int


class SkillVersion(BaseModel):
    version: str
    status: str
    score: float | None
    created_at: datetime


class ClusterInfo(BaseModel):
    id: UUID
    topic: str
    member_count: int
    members_at_last_version: int
    next_attempt_at: datetime | None


class SkillDetail(BaseModel):
    slug: str
    name: str
    description: str
    version: str = Field(..., description="the version shown")
    latest_version: str
    status: str
    score: float | None
    categories: list[str]
    created_at: datetime
    versions: list[SkillVersion] = Field(..., description="newest first")
    skill_md: str = Field(..., description="the shown version's SKILL.md")
    cluster: ClusterInfo | None
    history: list[EvolutionEntry] = Field(
        ..., description="the source cluster's evolution records, newest first"
    )


def list_skills(session: Session, actor: Actor, threshold: int, delta: int) -> SkillList:
    rows = session.execute(q("dashboard_skills"), {"tenant_id": actor.tenant_id, "limit": MAX_SKILLS})
    items = [
        SkillRow(
            slug=r.slug,
            name=r.name,
            description=r.description,
            version=str(Version(r.version_major, r.version_minor, r.version_patch)),
            status=r.status,
            score=r.score,
            versions=r.versions,
            created_at=r.created_at,
            updated_at=r.updated_at,
            cluster_id=r.cluster_id,
            cluster_topic=r.cluster_topic,
            cluster_size=r.cluster_size,
        )
        for r in rows
    ]
    counts = session.execute(
        q("cluster_counts"), {"tenant_id": actor.tenant_id, "min_members": threshold}
    ).one()
    return SkillList(
        items=items,
        crystallization_threshold=threshold,
        recrystallization_delta=delta,
        clusters=int(counts.clusters),
        largest_cluster_without_skill=int(counts.largest_without_skill),
    )


def _versions(session: Session, actor: Actor, slug: str) -> list[SkillVersion]:
    rows = session.execute(
        select(
            Skill.version_major,
            Skill.version_minor,
            Skill.version_patch,
            Skill.status,
            Skill.score,
            Skill.created_at,
        )
        .where(Skill.tenant_id == actor.tenant_id, Skill.slug == slug)
        .order_by(*NEWEST_FIRST)
    ).all()
    return [
        SkillVersion(version=str(Version(*r[:3])), status=r.status, score=r.score, created_at=r.created_at)
        for r in rows
    ]


def _cluster(session: Session, actor: Actor, cluster_id: UUID | None) -> ClusterInfo | None:
    cluster = session.get(KnowledgeCluster, (cluster_id, actor.tenant_id)) if cluster_id is not None else None
    if cluster is None or cluster.tenant_id != actor.tenant_id:
        return None
    return ClusterInfo(
        id=cluster.id,
        topic=cluster.topic,
        member_count=cluster.member_count,
        members_at_last_version=cluster.members_at_last_version,
        next_attempt_at=cluster.next_attempt_at,
    )


def skill_detail(
    session: Session, actor: Actor, skills: SkillService, slug: str, version: str | None = None
) -> SkillDetail:
    """One skill: every version, the chosen one's SKILL.md (the latest by default), its cluster's history."""
    versions = _versions(session, actor, slug)
    if not versions:
        raise NotFound(f"skill {slug!r} not found")
    skill = skills.latest(session, actor.tenant_id, slug, version)
    return SkillDetail(
        slug=skill.slug,
        name=skill.name,
        description=skill.description,
        version=str(Version(skill.version_major, skill.version_minor, skill.version_patch)),
        latest_version=versions[0].version,
        status=skill.status,
        score=skill.score,
        categories=list(skill.categories),
        created_at=skill.created_at,
        versions=versions,
        skill_md=skills.skill_md(skill),
        cluster=_cluster(session, actor, skill.source_cluster_id),
        history=skills.history(session, actor.tenant_id, slug, HISTORY_ROWS),
    )
