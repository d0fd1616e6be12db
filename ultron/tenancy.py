"""Tenants, agents and their API keys. Keys are shown once and stored as SHA-256 digests."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cache
from typing import Any
from uuid import UUID

from sqlalchemy import Select, bindparam, func, select
from sqlalchemy.dialects.postgresql import aggregate_order_by, insert
from sqlalchemy.orm import Session

from ultron.db.models import Agent, AgentGroup, GroupMember, Tenant
from ultron.errors import Conflict, NotFound, Unauthorized

KEY_PREFIX = "ult_"
DEFAULT_TENANT = "default"
LOCAL_AGENT = "local"


@dataclass(frozen=True)
class Actor:
    """Who is calling: every service call is scoped by this tenant and attributed to this agent."""

    tenant_id: UUID
    agent_id: UUID | None
    agent_name: str
    tenant_name: str = DEFAULT_TENANT
    groups: tuple[str, ...] = field(default_factory=tuple)
    is_admin: bool = False

    def visibility(self) -> dict[str, Any]:
        """The parameters of the named queries' visibility filter: what this agent may see (sql/*.sql:
        shared memories, its own private ones, its groups' ones)."""
        return {"tenant_id": self.tenant_id, "agent_id": self.agent_id, "groups": list(self.groups)}


@dataclass(frozen=True)
class AgentInfo:
    id: UUID
    name: str
    tenant: str
    key_prefix: str | None
    created_at: datetime
    revoked_at: datetime | None
    last_seen_at: datetime | None
    is_admin: bool = False


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def ensure_tenant(session: Session, name: str) -> UUID:
    name = name.strip()
    if not name or len(name) > 100:
        raise ValueError("tenant name must be 1-100 characters")
    stmt = insert(Tenant).values(name=name).on_conflict_do_nothing(index_elements=["name"])
    session.execute(stmt)
    return session.execute(select(Tenant.id).where(Tenant.name == name)).scalar_one()


def create_agent(
    session: Session, name: str, tenant: str = DEFAULT_TENANT, *, admin: bool = False
) -> tuple[AgentInfo, str]:
    """Create an agent with a fresh key; returns the key in clear text, the only time it exists."""
    name = name.strip()
    if not name or len(name) > 100:
        raise ValueError("agent name must be 1-100 characters")
    tenant_id = ensure_tenant(session, tenant)
    exists = session.execute(select(Agent.id).where(Agent.tenant_id == tenant_id, Agent.name == name)).first()
    if exists:
        raise Conflict(f"agent {name!r} already exists in tenant {tenant!r}")
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    agent = Agent(tenant_id=tenant_id, name=name, key_hash=hash_key(key), key_prefix=key[:12], is_admin=admin)
    session.add(agent)
    session.flush()
    return _info(agent, tenant), key


def _info(agent: Agent, tenant: str) -> AgentInfo:
    return AgentInfo(
        agent.id,
        agent.name,
        tenant,
        agent.key_prefix,
        agent.created_at,
        agent.revoked_at,
        agent.last_seen_at,
        agent.is_admin,
    )


def list_agents(session: Session, tenant: str | None = None) -> list[AgentInfo]:
    stmt = (
        select(Agent, Tenant.name)
        .join(Tenant, Tenant.id == Agent.tenant_id)
        .order_by(Tenant.name, Agent.name)
    )
    if tenant is not None:
        stmt = stmt.where(Tenant.name == tenant)
    return [_info(agent, tname) for agent, tname in session.execute(stmt)]


def revoke_agent(session: Session, name: str, tenant: str = DEFAULT_TENANT) -> AgentInfo:
    row = session.execute(
        select(Agent, Tenant.name)
        .join(Tenant, Tenant.id == Agent.tenant_id)
        .where(Tenant.name == tenant, Agent.name == name)
    ).first()
    if row is None:
        raise NotFound(f"no agent {name!r} in tenant {tenant!r}")
    agent, tname = row
    if agent.revoked_at is None:
        agent.revoked_at = datetime.now(UTC)
    return _info(agent, tname)


def count_issued_keys(session: Session) -> int:
    """Keys ever created, revoked ones included: a hub that ever had one never runs open again."""
    stmt = select(func.count()).select_from(Agent).where(Agent.key_hash.is_not(None))
    return session.execute(stmt).scalar_one()


@cache
def _actor_row(which: str) -> Select[Any]:
    """The agent with the key hash `:key_hash` ("key") or the open hub's local agent ("local"), with its
    tenant's name and its groups' names (sorted), in one statement: a request's authentication is one
    round trip. Built once (SQLAlchemy's cache key of a fresh statement costs more than running it)."""
    where = (
        Agent.key_hash == bindparam("key_hash")
        if which == "key"
        else (Agent.name == LOCAL_AGENT) & (Tenant.name == DEFAULT_TENANT)
    )
    groups = (
        select(func.array_agg(aggregate_order_by(AgentGroup.name, AgentGroup.name)))
        .join(
            GroupMember,
            (GroupMember.group_id == AgentGroup.id) & (GroupMember.tenant_id == AgentGroup.tenant_id),
        )
        .where(GroupMember.agent_id == Agent.id)
        .scalar_subquery()
    )
    return (
        select(
            Agent.id,
            Agent.tenant_id,
            Agent.name,
            Agent.is_admin,
            Agent.revoked_at,
            Tenant.name.label("tenant_name"),
            groups.label("groups"),
        )
        .join(Tenant, Tenant.id == Agent.tenant_id)
        .where(where)
    )


def _actor(row: Any) -> Actor:
    return Actor(row.tenant_id, row.id, row.name, row.tenant_name, tuple(row.groups or ()), row.is_admin)


def member_groups(session: Session, agent_id: UUID) -> tuple[str, ...]:
    """The names of the groups the agent belongs to, sorted."""
    stmt = (
        select(AgentGroup.name)
        .join(
            GroupMember,
            (GroupMember.group_id == AgentGroup.id) & (GroupMember.tenant_id == AgentGroup.tenant_id),
        )
        .where(GroupMember.agent_id == agent_id)
        .order_by(AgentGroup.name)
    )
    return tuple(session.execute(stmt).scalars())


def authenticate(session: Session, key: str) -> Actor:
    """Resolve a Bearer key to its agent; revoked and unknown keys are refused.

    Writes nothing: `last_seen_at` is recorded outside the request's transaction (ultron/routing/auth.py).
    """
    row = session.execute(_actor_row("key"), {"key_hash": hash_key(key)}).first()
    if row is None:
        raise Unauthorized("unknown API key")
    if row.revoked_at is not None:
        raise Unauthorized("this API key has been revoked")
    return _actor(row)


def local_actor(session: Session) -> Actor:
    """The key-less agent used when the hub runs open on loopback (and by the in-process SDK): read in one
    statement with its groups; created (with its tenant) by the first call that finds it missing."""
    row = session.execute(_actor_row("local")).first()
    if row is not None:
        return replace(_actor(row), is_admin=True)
    tenant_id = ensure_tenant(session, DEFAULT_TENANT)
    stmt = (
        insert(Agent)
        .values(tenant_id=tenant_id, name=LOCAL_AGENT)
        .on_conflict_do_nothing(constraint="uq_agents_tenant_name")
    )
    session.execute(stmt)
    agent = session.execute(
        select(Agent).where(Agent.tenant_id == tenant_id, Agent.name == LOCAL_AGENT)
    ).scalar_one()
    return Actor(
        tenant_id, agent.id, agent.name, DEFAULT_TENANT, member_groups(session, agent.id), is_admin=True
    )
