"""Read-only HTTP view of knowledge clusters: `GET /clusters`, `GET /clusters/{id}`."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Query

from ultron.clusters import views
from ultron.clusters.schemas import ClusterDetail, ClusterSummary
from ultron.routing.deps import SettingsDep, UnitDep, hub_part
from ultron.routing.errors import ERROR_RESPONSES

router = APIRouter(prefix="/clusters", tags=["clusters"], responses=ERROR_RESPONSES)
# The skill service, for a cluster's skill: typed loosely, as clusters sit below skills.
SkillsDep = Annotated[Any, Depends(hub_part("skills"))]


@router.get("", response_model=list[ClusterSummary])
def list_clusters(
    unit: UnitDep,
    settings: SettingsDep,
    limit: int = Query(50, ge=1, le=500),
    offset: int = Query(0, ge=0),
) -> list[ClusterSummary]:
    """Non-empty clusters, largest first, with what the next evolution cycle would do with each."""
    return unit.read(lambda s, a: views.list_clusters(s, a, settings, limit=limit, offset=offset))


@router.get("/{cluster_id}", response_model=ClusterDetail)
def get_cluster(cluster_id: UUID, unit: UnitDep, settings: SettingsDep, skills: SkillsDep) -> ClusterDetail:
    """A cluster with a sample of the members you may see (closest to the centroid first) and its skill."""
    return unit.read(lambda s, a: views.cluster_detail(s, a, settings, skills, cluster_id))
