"""Read-only HTTP view of the worker: `GET /worker/status`."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request

from ultron.api.app import ERROR_RESPONSES, call
from ultron.worker.status import WorkerStatus, worker_status

router = APIRouter(prefix="/worker", tags=["worker"], responses=ERROR_RESPONSES)


@router.get("/status", response_model=WorkerStatus)
def get_worker_status(
    request: Request,
    runs: int = Query(30, ge=1, le=500, description="How many recent step runs"),
    parked: int = Query(50, ge=1, le=500, description="How many parked items"),
) -> WorkerStatus:
    """Recent step runs and live workers (hub-wide); queue depths and parked items of your tenant."""
    lease = request.app.state.hub.settings.worker_lease_seconds
    return call(
        request, lambda s, a: worker_status(s, a.tenant_id, lease_seconds=lease, runs=runs, parked=parked)
    )
