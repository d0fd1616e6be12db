"""HTTP endpoints of companion memory: the brief, pin/unpin, the reflect ("dream") call, reflections."""

from __future__ import annotations

from uuid import UUID

from fastapi import APIRouter, Query, Request

from ultron.api.app import ERROR_RESPONSES, call
from ultron.companion.schemas import Brief, Dream, ReflectionRequest, ReflectionResult
from ultron.memory.schemas import MemoryRecord

router = APIRouter(tags=["companion"], responses=ERROR_RESPONSES)


@router.get("/brief", response_model=Brief)
def brief(
    request: Request,
    task: str | None = Query(None, max_length=4000, description="Optional hint of the task at hand"),
    max_tokens: int | None = Query(None, ge=1, le=100_000, description="Token budget of the brief"),
) -> Brief:
    """What to know at session start: pinned memories, what is known about the person, HOT ones relevant
    to the task, then skills."""
    return call(
        request, lambda s, a: request.app.state.hub.companion.brief(s, a, task, max_tokens), read=True
    )


@router.post("/memories/{memory_id}/pin", response_model=MemoryRecord)
def pin_memory(request: Request, memory_id: UUID) -> MemoryRecord:
    """Pin: never decays, never archives, never merges away, leads the brief."""
    return call(request, lambda s, a: request.app.state.hub.companion.pin(s, a, memory_id, True))


@router.post("/memories/{memory_id}/unpin", response_model=MemoryRecord)
def unpin_memory(request: Request, memory_id: UUID) -> MemoryRecord:
    return call(request, lambda s, a: request.app.state.hub.companion.pin(s, a, memory_id, False))


@router.post("/memories/{memory_id}/resolve", response_model=MemoryRecord)
def resolve_memory(request: Request, memory_id: UUID) -> MemoryRecord:
    """Resolved: the matter is settled. The memory sinks in search and leaves the brief's HOT and personal
    sections; it is kept and still found."""
    return call(request, lambda s, a: request.app.state.hub.companion.resolve(s, a, memory_id, True))


@router.post("/memories/{memory_id}/unresolve", response_model=MemoryRecord)
def unresolve_memory(request: Request, memory_id: UUID) -> MemoryRecord:
    return call(request, lambda s, a: request.app.state.hub.companion.resolve(s, a, memory_id, False))


@router.get("/reflect", response_model=Dream)
def dream(request: Request, limit: int = Query(10, ge=1, le=50)) -> Dream:
    """Recent memories this agent has not reflected on, with reflection prompts."""
    return call(request, lambda s, a: request.app.state.hub.companion.dream(s, a, limit))


@router.post("/reflections", response_model=ReflectionResult, status_code=201)
def reflect(request: Request, body: ReflectionRequest) -> ReflectionResult:
    """Store a reflection (the agent's own lesson) and mark the memories it reflects on."""
    return call(request, lambda s, a: request.app.state.hub.companion.reflect(s, a, body))
