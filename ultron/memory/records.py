"""A memory's record: built from its ORM row or a query row, loaded by id for an agent, projected for a
search (l0/l1), and who may see it (visible_to)."""

from __future__ import annotations

from typing import Any, TypeVar
from uuid import UUID

from pydantic import BaseModel
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ultron.db.models import Agent, Memory, MemoryContribution
from ultron.memory.schemas import MemoryRecord
from ultron.tenancy import Actor


def to_record(m: Memory | Any, agent: str | None, contributions: int) -> MemoryRecord:
    """A memory's record, from its ORM row or a query row with the same column names (the search's)."""
    return MemoryRecord(**_record_fields(m, agent, contributions))


_Model = TypeVar("_Model", bound=BaseModel)
_RECORD_FIELDS = frozenset(MemoryRecord.model_fields)
# A search result's fields as SearchResult(...) set them before: serendipity is left at its default.
_RESULT_FIELDS_SET = frozenset({"record", "similarity_score", "score", "explain", "confidence"})


def _trusted(model: type[_Model], values: dict[str, Any], fields_set: frozenset[str]) -> _Model:
    """The model of `values` that our own database row gave: every field, in the model's order, each of its
    field's type already (what validation would return); built as pydantic's model_construct builds one,
    without its per-field pass. 0.7 us a record against 3.8 us validated (model_construct: 7.8 us). Only for
    models with no validators, aliases, extra or private attributes (MemoryRecord, SearchResult);
    tests/memory/test_search.py holds a search record equal to the validated one, field types included."""
    built = model.__new__(model)
    object.__setattr__(built, "__dict__", values)
    object.__setattr__(built, "__pydantic_fields_set__", set(fields_set))
    object.__setattr__(built, "__pydantic_extra__", None)
    object.__setattr__(built, "__pydantic_private__", None)
    return built


def _record_fields(m: Memory | Any, agent: str | None, contributions: int) -> dict[str, Any]:
    """The fields of a memory's record (to_record), from its ORM row or a query row, in the record's order."""
    return {
        "id": m.id,
        "memory_type": m.memory_type,
        "content": m.content,
        "context": m.context,
        "resolution": m.resolution,
        "tags": list(m.tags),
        "summary_l0": m.summary_l0,
        "overview_l1": m.overview_l1,
        "tier": m.tier,
        "status": m.status,
        "scope": m.scope,
        "group": m.group_name,
        "pinned": m.pinned,
        "hit_count": m.hit_count,
        "last_hit_at": m.last_hit_at,
        "created_at": m.created_at,
        "updated_at": m.updated_at,
        "agent": agent,
        "redacted_entities": dict(m.redacted_entities or {}),
        "contributions": int(contributions),
        "valence": m.valence,
        "arousal": m.arousal,
        "thread": m.thread,
        "position": m.position,
        "occurred_at": m.occurred_at,
        "importance": m.importance,
        "resolved_at": m.resolved_at,
        "superseded_by": getattr(m, "superseded_by_id", None),
    }


def visible_to(actor: Actor):  # type: ignore[no-untyped-def]
    """The memories an agent may see: shared ones, its own private ones, its groups' ones."""
    return (
        (Memory.scope == "shared")
        | ((Memory.scope == "private") & (Memory.agent_id == actor.agent_id))
        | ((Memory.scope == "group") & Memory.group_name.in_(list(actor.groups) or [""]))
    )


def load_records(session: Session, ids: list[UUID], actor: Actor) -> dict[UUID, MemoryRecord]:
    """The full records of those of `ids` the agent may see (no hit counted)."""
    if not ids:
        return {}
    contributions = (
        select(func.count())
        .where(MemoryContribution.memory_id == Memory.id)
        .correlate(Memory)
        .scalar_subquery()
    )
    stmt = (
        select(Memory, Agent.name, contributions)
        .outerjoin(Agent, Agent.id == Memory.agent_id)
        .where(Memory.id.in_(ids))
        .where(Memory.tenant_id == actor.tenant_id, visible_to(actor))
        .execution_options(populate_existing=True)
    )
    return {m.id: to_record(m, agent, n) for m, agent, n in session.execute(stmt)}


# Search projections: l0 keeps only the one-line summary; l1 adds the overview and context.
_PROJECTION_BLANKS: dict[str, dict[str, str]] = {
    "l0": {"content": "", "context": "", "resolution": "", "overview_l1": ""},
    "l1": {"content": "", "resolution": ""},
}


def project(record: MemoryRecord, detail_level: str) -> MemoryRecord:
    """Search projections: l0 keeps only the one-line summary; l1 adds the overview and context."""
    return record.model_copy(update=_blanks(detail_level))


def _blanks(detail_level: str) -> dict[str, str]:
    return _PROJECTION_BLANKS["l0" if detail_level == "l0" else "l1"]
