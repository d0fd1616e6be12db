"""HTTP endpoints of companion memory: the brief, pin/unpin, the reflect ("dream") call, reflections."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, Query

from ultron.companion.schemas import Brief, Dream, ReflectionRequest, ReflectionResult
from ultron.companion.service import CompanionService
from ultron.memory.schemas import MemoryRecord
from ultron.routing.deps import UnitDep, hub_part
from ultron.routing.errors import ERROR_RESPONSES

router = APIRouter(tags=["companion"], responses=ERROR_RESPONSES)
CompanionDep = Annotated[CompanionService, Depends(hub_part("companion"))]


@router.get("/brief", response_model=Brief)
def brief(
    unit: UnitDep,
    companion: CompanionDep,
    task: str | None = Query(None, max_length=4000, description="Optional hint of the task at hand"),
    max_tokens: int | None = Query(None, ge=1, le=100_000, description="Token budget of the brief"),
) -> Brief:
    """What to know at session start: pinned memories, what is known about the person, HOT ones relevant
    to the task, then skills."""
    return unit.read(lambda s, a: companion.brief(s, a, task, max_tokens))


@router.post("/memories/{memory_id}/pin", response_model=MemoryRecord)
def pin_memory(memory_id: UUID, unit: UnitDep, companion: CompanionDep) -> MemoryRecord:
    """Pin: never decays, never archives, never merges away, leads the brief."""
    return unit.write(lambda s, a: companion.pin(s, a, memory_id, True))


@router.post("/memories/{memory_id}/unpin", response_model=MemoryRecord)
def unpin_memory(memory_id: UUID, unit: UnitDep, companion: CompanionDep) -> MemoryRecord:
    return unit.write(lambda s, a: companion.pin(s, a, memory_id, False))


@router.post("/memories/{memory_id}/resolve", response_model=MemoryRecord)
def resolve_memory(memory_id: UUID, unit: UnitDep, companion: CompanionDep) -> MemoryRecord:
    """Resolved: the matter is settled. The memory sinks in search and leaves the brief's HOT and personal
    sections; it is kept and still found."""
    return unit.write(lambda s, a: companion.resolve(s, a, memory_id, True))


@router.post("/memories/{memory_id}/unresolve", response_model=MemoryRecord)
def unresolve_memory(memory_id: UUID, unit: UnitDep, companion: CompanionDep) -> MemoryRecord:
    return unit.write(lambda s, a: companion.resolve(s, a, memory_id, False))


@router.get("/reflect", response_model=Dream)
def dream(unit: UnitDep, companion: CompanionDep, limit: int = Query(10, ge=1, le=50)) -> Dream:
    """Recent memories this agent has not reflected on, with reflection prompts."""
    return unit.write(lambda s, a: companion.dream(s, a, limit))


@router.post("/reflections", response_model=ReflectionResult, status_code=201)
def reflect(body: ReflectionRequest, unit: UnitDep, companion: CompanionDep) -> ReflectionResult:
    """Store a reflection (the agent's own lesson) and mark the memories it reflects on."""
    return unit.write(lambda s, a: companion.reflect(s, a, body))
