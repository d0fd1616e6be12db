"""Entity islands for the dashboard's map: the people, places and projects the map's memories name.

Read from `memory_entities` for the memories the map sample shows (primary-key probes of at most
3 x per_tier ids), so the cost follows the sample, not the tenant's size.
"""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from pydantic import BaseModel, Field
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ultron.db.models import MemoryEntity
from ultron.tenancy import Actor

MAX_ISLANDS = 60


class Island(BaseModel):
    kind: Literal["person", "place", "project"]
    name: str
    memory_ids: list[UUID] = Field(description="The map's memories that name it")


class Islands(BaseModel):
    islands: list[Island] = Field(description="Entities two or more of the map's memories name, most first")
    total: int = Field(description="Entities named by two or more of the map's memories, in all")


def entity_islands(session: Session, actor: Actor, memory_ids: list[UUID], limit: int) -> Islands:
    """Entities linked to two or more of `memory_ids` (already visible to the actor), largest first."""
    if not memory_ids:
        return Islands(islands=[], total=0)
    members = func.array_agg(MemoryEntity.memory_id)
    stmt = (
        select(MemoryEntity.kind, MemoryEntity.name, members.label("ids"), func.count().over().label("total"))
        .where(MemoryEntity.tenant_id == actor.tenant_id, MemoryEntity.memory_id.in_(memory_ids))
        .group_by(MemoryEntity.kind, MemoryEntity.name)
        .having(func.count() >= 2)
        .order_by(func.count().desc(), MemoryEntity.name, MemoryEntity.kind)
        .limit(limit)
    )
    rows = session.execute(stmt).all()
    islands = [Island(kind=r.kind, name=r.name, memory_ids=sorted(r.ids, key=str)) for r in rows]
    return Islands(islands=islands, total=int(rows[0].total) if rows else 0)
