"""Create and delete groups, add and remove members (admins), list an agent's groups.

Every statement is scoped by the caller's tenant. A group that still holds memories is not deleted: the
hub keeps data, so its memories must be deleted or moved first.
"""

from __future__ import annotations

import re
from typing import Any, cast

from sqlalchemy import CursorResult, delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from ultron.db.models import Agent, AgentGroup, GroupMember, Memory
from ultron.errors import Conflict, Forbidden, NotFound, ValidationFailed
from ultron.groups.schemas import GROUP_NAME, GroupInfo
from ultron.tenancy import Actor, member_groups


def _admin(actor: Actor) -> None:
    if not actor.is_admin:
        raise Forbidden("only an admin agent may manage groups")


def _valid_name(name: str) -> str:
    if not re.fullmatch(GROUP_NAME, name):
        raise ValidationFailed(
            f"invalid group name {name!r}: use letters, digits, '_', '.', '@', '-' (1-100)"
        )
    return name


def _group(session: Session, actor: Actor, name: str) -> AgentGroup:
    group = session.execute(
        select(AgentGroup).where(AgentGroup.tenant_id == actor.tenant_id, AgentGroup.name == name)
    ).scalar_one_or_none()
    if group is None:
        raise NotFound(f"no group {name!r}")
    return group


def _agent(session: Session, actor: Actor, name: str) -> Agent:
    agent = session.execute(
        select(Agent).where(Agent.tenant_id == actor.tenant_id, Agent.name == name)
    ).scalar_one_or_none()
    if agent is None:
        raise NotFound(f"no agent {name!r}")
    return agent


def _infos(session: Session, actor: Actor, names: list[str] | None) -> list[GroupInfo]:
    members = (
        select(func.coalesce(func.array_agg(Agent.name).filter(Agent.name.is_not(None)), []))
        .select_from(GroupMember)
        .join(Agent, (Agent.id == GroupMember.agent_id) & (Agent.tenant_id == GroupMember.tenant_id))
        .where(GroupMember.group_id == AgentGroup.id, GroupMember.tenant_id == AgentGroup.tenant_id)
        .scalar_subquery()
    )
    count = (
        select(func.count())
        .select_from(Memory)
        .where(
            Memory.tenant_id == actor.tenant_id, Memory.scope == "group", Memory.group_name == AgentGroup.name
        )
        .scalar_subquery()
    )
    stmt = (
        select(AgentGroup.name, members, count, AgentGroup.created_at)
        .where(AgentGroup.tenant_id == actor.tenant_id)
        .order_by(AgentGroup.name)
    )
    if names is not None:
        stmt = stmt.where(AgentGroup.name.in_(names or [""]))
    return [
        GroupInfo(name=n, members=sorted(m or []), memories=c, created_at=t)
        for n, m, c, t in session.execute(stmt)
    ]


def list_groups(session: Session, actor: Actor) -> list[GroupInfo]:
    """Every group of the tenant for an admin; the caller's own groups otherwise."""
    if actor.is_admin:
        return _infos(session, actor, None)
    return _infos(session, actor, list(member_groups(session, actor.agent_id)) if actor.agent_id else [])


def agent_groups(session: Session, actor: Actor, agent: str | None) -> list[str]:
    """The groups of `agent` (default: the caller); another agent's only for an admin."""
    if agent is None or agent == actor.agent_name:
        return list(member_groups(session, actor.agent_id)) if actor.agent_id else []
    _admin(actor)
    return list(member_groups(session, _agent(session, actor, agent).id))


def create_group(session: Session, actor: Actor, name: str) -> GroupInfo:
    _admin(actor)
    _valid_name(name)
    stmt = (
        insert(AgentGroup)
        .values(tenant_id=actor.tenant_id, name=name)
        .on_conflict_do_nothing(constraint="uq_agent_groups_tenant_name")
        .returning(AgentGroup.id)
    )
    if session.execute(stmt).first() is None:
        raise Conflict(f"group {name!r} already exists")
    return _infos(session, actor, [name])[0]


def delete_group(session: Session, actor: Actor, name: str) -> None:
    _admin(actor)
    group = _group(session, actor, name)
    held = session.execute(
        select(func.count())
        .select_from(Memory)
        .where(Memory.tenant_id == actor.tenant_id, Memory.scope == "group", Memory.group_name == name)
    ).scalar_one()
    if held:
        raise Conflict(f"group {name!r} still holds {held} memories; delete or move them first")
    session.delete(group)  # memberships go with it (ON DELETE CASCADE)
    session.flush()


def add_member(session: Session, actor: Actor, name: str, agent: str) -> GroupInfo:
    _admin(actor)
    group = _group(session, actor, name)
    member = _agent(session, actor, agent)
    session.execute(
        insert(GroupMember)
        .values(group_id=group.id, agent_id=member.id, tenant_id=actor.tenant_id)
        .on_conflict_do_nothing()
    )
    return _infos(session, actor, [name])[0]


def remove_member(session: Session, actor: Actor, name: str, agent: str) -> GroupInfo:
    _admin(actor)
    group = _group(session, actor, name)
    member = _agent(session, actor, agent)
    # A DELETE's result is a CursorResult (it has rowcount); Session.execute is typed as returning Result.
    gone = cast(
        CursorResult[Any],
        session.execute(
            delete(GroupMember).where(
                GroupMember.tenant_id == actor.tenant_id,
                GroupMember.group_id == group.id,
                GroupMember.agent_id == member.id,
            )
        ),
    )
    if gone.rowcount == 0:
        raise NotFound(f"agent {agent!r} is not in group {name!r}")
    return _infos(session, actor, [name])[0]
