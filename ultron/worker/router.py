"""Read-only HTTP view of the worker: `GET /worker/status`."""

from __future__ import annotations

from fastapi import APIRouter, Query

from ultron.routing.deps import SettingsDep, UnitDep
from ultron.routing.errors import ERROR_RESPONSES
from ultron.worker.status import WorkerStatus, worker_status

router = APIRouter(prefix="/worker", tags=["worker"], responses=ERROR_RESPONSES)


@router.get("/status", response_model=WorkerStatus)
def get_worker_status(
    unit: UnitDep,
    settings: SettingsDep,
    runs: int = Query(30, ge=1, le=500, description="How many recent step runs"),
    parked: int = Query(50, ge=1, le=500, description="How many parked items"),
) -> WorkerStatus:
    """Recent step runs and live workers (hub-wide); queue depths and parked items of your tenant."""
    lease = settings.worker_lease_seconds
    return unit.write(
        lambda s, a: worker_status(s, a.tenant_id, lease_seconds=lease, runs=runs, parked=parked)
    )
