"""HTTP endpoints of trajectories: sessions, their messages and segments, reprocessing, and
`POST /trajectory/process`."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Protocol
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, Field

from ultron.routing.deps import UnitDep
from ultron.routing.errors import ERROR_RESPONSES
from ultron.trajectory import views
from ultron.trajectory.schemas import MessageInfo, SegmentInfo, SessionDetail, SessionInfo

# Tagged "ingestion", where these routes were first published: the API reference keeps its sections.
router = APIRouter(tags=["ingestion"], responses=ERROR_RESPONSES)


class Drainer(Protocol):
    """What `POST /trajectory/process` needs of a worker (ultron/worker/runner.py's Worker)."""

    def process_due(self, tenant_id: UUID, limit: int) -> dict[str, int]: ...


async def _drainer(request: Request) -> Drainer:
    # Built per request by the composition root (api/app.py puts hub.build_worker on app.state): its own
    # lease owner, the same lease/claim/finish code path as the worker loop.
    return request.app.state.build_worker()  # type: ignore[no-any-return]


DrainerDep = Annotated[Drainer, Depends(_drainer)]


class ProcessRequest(BaseModel):
    limit: int = Field(100, ge=1, le=10_000)


@router.get("/sessions", response_model=list[SessionInfo])
def list_sessions(
    unit: UnitDep,
    limit: int = Query(50, ge=1, le=500),
    before: datetime | None = Query(None, description="Page: the last row's updated_at"),
    import_id: UUID | None = None,
) -> list[SessionInfo]:
    return unit.write(lambda s, a: views.list_sessions(s, a, limit=limit, before=before, import_id=import_id))


@router.get("/sessions/{session_id}", response_model=SessionDetail)
def show_session(session_id: UUID, unit: UnitDep, superseded: bool = False) -> SessionDetail:
    """A session with its segments, each with every metric value and the memories extracted from it."""
    return unit.write(lambda s, a: views.show_session(s, a, session_id, superseded=superseded))


@router.get("/sessions/{session_id}/messages", response_model=list[MessageInfo])
def session_messages(
    session_id: UUID, unit: UnitDep, start: int = Query(0, ge=0), limit: int = Query(200, ge=1, le=500)
) -> list[MessageInfo]:
    return unit.write(lambda s, a: views.session_messages(s, a, session_id, start=start, limit=limit))


@router.post("/sessions/{session_id}/reprocess", response_model=SessionInfo)
def reprocess_session(session_id: UUID, unit: UnitDep) -> SessionInfo:
    return unit.write(lambda s, a: views.reprocess_session(s, a, session_id))


@router.get("/segments", response_model=list[SegmentInfo])
def list_segments(
    unit: UnitDep,
    session_id: UUID | None = None,
    stage: str | None = Query(None, pattern="^(score|extract|done|skipped|superseded)$"),
    limit: int = Query(100, ge=1, le=500),
    before: datetime | None = Query(None, description="Page: the last row's created_at"),
) -> list[SegmentInfo]:
    return unit.write(
        lambda s, a: views.list_segments(s, a, session_id=session_id, stage=stage, limit=limit, before=before)
    )


@router.get("/segments/{segment_id}", response_model=SegmentInfo)
def show_segment(segment_id: UUID, unit: UnitDep) -> SegmentInfo:
    return unit.write(lambda s, a: views.show_segment(s, a, segment_id))


@router.post("/segments/{segment_id}/reprocess", response_model=SegmentInfo)
def reprocess_segment(segment_id: UUID, unit: UnitDep) -> SegmentInfo:
    return unit.write(lambda s, a: views.reprocess_segment(s, a, segment_id))


@router.post("/trajectory/process")
def process(unit: UnitDep, worker: DrainerDep, body: ProcessRequest | None = None) -> dict[str, int]:
    """Run due segmentation, scoring and extraction for the caller's tenant now, in this request."""
    actor = unit.write(lambda s, a: a)
    return worker.process_due(actor.tenant_id, (body or ProcessRequest()).limit)
