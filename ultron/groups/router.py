"""HTTP endpoints of groups: admins create and delete groups and manage members; any agent lists its own."""

from __future__ import annotations

from fastapi import APIRouter, Response

from ultron.groups import service
from ultron.groups.schemas import GroupCreate, GroupInfo
from ultron.routing.deps import UnitDep
from ultron.routing.errors import ERROR_RESPONSES

router = APIRouter(tags=["groups"], responses=ERROR_RESPONSES)


@router.get("/groups", response_model=list[GroupInfo])
def list_groups(unit: UnitDep) -> list[GroupInfo]:
    """Every group of the tenant for an admin; the caller's own groups otherwise."""
    return unit.read(service.list_groups)


@router.post("/groups", response_model=GroupInfo, status_code=201)
def create_group(body: GroupCreate, unit: UnitDep) -> GroupInfo:
    """Create a group (admin)."""
    return unit.write(lambda s, a: service.create_group(s, a, body.name))


@router.delete("/groups/{name}", status_code=204)
def delete_group(name: str, unit: UnitDep) -> Response:
    """Delete a group and its memberships (admin); refused (409) while it still holds memories."""
    unit.write(lambda s, a: service.delete_group(s, a, name))
    return Response(status_code=204)


@router.put("/groups/{name}/members/{agent}", response_model=GroupInfo)
def add_member(name: str, agent: str, unit: UnitDep) -> GroupInfo:
    """Add an agent to a group (admin); adding a member twice changes nothing."""
    return unit.write(lambda s, a: service.add_member(s, a, name, agent))


@router.delete("/groups/{name}/members/{agent}", response_model=GroupInfo)
def remove_member(name: str, agent: str, unit: UnitDep) -> GroupInfo:
    """Remove an agent from a group (admin)."""
    return unit.write(lambda s, a: service.remove_member(s, a, name, agent))


@router.get("/agents/me/groups", response_model=list[str])
def my_groups(unit: UnitDep) -> list[str]:
    """The caller's groups."""
    return unit.write(lambda s, a: service.agent_groups(s, a, None))


@router.get("/agents/{agent}/groups", response_model=list[str])
def agent_groups(agent: str, unit: UnitDep) -> list[str]:
    """An agent's groups (the caller's own, or any agent's for an admin)."""
    return unit.write(lambda s, a: service.agent_groups(s, a, agent))
