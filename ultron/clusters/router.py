"""Read-only HTTP view of knowledge clusters: `GET /clusters`, `GET /clusters/{id}`."""

from __future__ import annotations

from uuid import UUID

from fastapi import APIRouter, Query, Request

from ultron.api.app import ERROR_RESPONSES, call
from ultron.clusters import views
from ultron.clusters.schemas import ClusterDetail, ClusterSummary

router = APIRouter(prefix="/clusters", tags=["clusters"], responses=ERROR_RESPONSES)


@router.get("", response_model=list[ClusterSummary])
def list_clusters(
    request: Request, limit: int = Query(50, ge=1, le=500), offset: int = Query(0, ge=0)
) -> list[ClusterSummary]:
    """Non-empty clusters, largest first, with what the next evolution cycle would do with each."""
    settings = request.app.state.hub.settings
    return call(
        request, lambda s, a: views.list_clusters(s, a, settings, limit=limit, offset=offset), read=True
    )


@router.get("/{cluster_id}", response_model=ClusterDetail)
def get_cluster(request: Request, cluster_id: UUID) -> ClusterDetail:
    """A cluster with a sample of the members you may see (closest to the centroid first) and its skill."""
    hub = request.app.state.hub
    return call(
        request, lambda s, a: views.cluster_detail(s, a, hub.settings, hub.skills, cluster_id), read=True
    )
