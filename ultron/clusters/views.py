"""Read-only views of knowledge clusters for the API, SDK and CLI; every query scoped by the caller."""

from __future__ import annotations

from typing import Any, Protocol
from uuid import UUID

from sqlalchemy.orm import Session

from ultron.clusters.schemas import ClusterDetail, ClusterMemberInfo, ClusterSummary, SkillSummary
from ultron.config import Settings
from ultron.db.models import Skill
from ultron.db.queries import q
from ultron.errors import NotFound
from ultron.tenancy import Actor

MEMBER_SAMPLE = 20  # members shown with a cluster


class SkillCatalogue(Protocol):
    """The Skill Hub (ultron/skills/service.py's SkillService): a cluster's detail shows its latest skill."""

    def latest(
        self, session: Session, tenant_id: UUID, slug: str | None, version: str | None = None
    ) -> Skill: ...
    def summary(self, skill: Skill) -> SkillSummary: ...


def _readiness_params(settings: Settings) -> dict[str, Any]:
    return {"threshold": settings.crystallization_threshold, "delta": settings.recrystallization_delta}


def list_clusters(
    session: Session, actor: Actor, settings: Settings, *, limit: int = 50, offset: int = 0
) -> list[ClusterSummary]:
    """Non-empty clusters, largest first, each with what the next evolution cycle would do with it."""
    rows = session.execute(
        q("clusters_with_readiness"),
        {
            "tenant_id": actor.tenant_id,
            "cluster_id": None,
            "limit": limit,
            "offset": offset,
            **_readiness_params(settings),
        },
    ).all()
    return [ClusterSummary.model_validate(dict(r._mapping)) for r in rows]


def cluster_detail(
    session: Session, actor: Actor, settings: Settings, skills: SkillCatalogue, cluster_id: UUID
) -> ClusterDetail:
    row = session.execute(
        q("clusters_with_readiness"),
        {
            "tenant_id": actor.tenant_id,
            "cluster_id": cluster_id,
            "limit": 1,
            "offset": 0,
            **_readiness_params(settings),
        },
    ).first()
    if row is None:
        raise NotFound(f"cluster {cluster_id} not found")
    members = session.execute(
        q("cluster_member_sample"),
        {
            "tenant_id": actor.tenant_id,
            "cluster_id": cluster_id,
            "limit": MEMBER_SAMPLE,
        },
    ).all()
    skill = None
    if row.skill_slug:
        skill = skills.summary(skills.latest(session, actor.tenant_id, row.skill_slug))
    return ClusterDetail(
        **dict(row._mapping),
        members=[ClusterMemberInfo.model_validate(dict(m._mapping)) for m in members],
        skill=skill,
    )
