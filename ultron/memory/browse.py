"""Browsing memories without counting hits: filtered pages, hit history, the map sample, activity.

Reading here is not adoption, so nothing in this module records a hit. Lists page by keyset (no OFFSET
scans at 100k) and every query is scoped by tenant and by what the calling agent may see.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field
from sqlalchemy import func, select, text, tuple_
from sqlalchemy.orm import Session

from ultron.db.models import Agent, HitEvent, Memory, MemoryContribution
from ultron.db.queries import q
from ultron.errors import NotFound, ValidationFailed
from ultron.memory import fulltext
from ultron.memory.records import visible_to
from ultron.memory.schemas import MemoryStats, MemoryType, Scope, Status, Tier
from ultron.tenancy import Actor

Sort = Literal["created", "updated", "hits"]
MAX_PAGE = 200
MAX_MAP_PER_TIER = 2000
MAX_MAP_CLUSTERS = 500
# A cluster is drawn when it links memories: a singleton is just a dot.
MAP_CLUSTER_MIN_MEMBERS = 2
COUNT_CAP = 10_000


class MemoryFilter(BaseModel):
    memory_type: MemoryType | None = None
    tier: Tier | None = None
    status: Status | None = None
    scope: Scope | None = None
    agent: str | None = Field(None, max_length=100, description="name of the contributing agent")
    pinned: bool | None = None
    q: str | None = Field(None, max_length=500, description="full-text filter: every term must match")


class MemoryRow(BaseModel):
    """A memory as a list shows it: the one-line summary, no full text."""

    id: UUID
    memory_type: MemoryType
    summary_l0: str
    tags: list[str]
    tier: Tier
    status: Status
    scope: Scope
    pinned: bool
    hit_count: int
    last_hit_at: datetime | None
    created_at: datetime
    updated_at: datetime
    agent: str | None


class MemoryPage(BaseModel):
    items: list[MemoryRow]
    total: int = Field(..., description="memories matching the filter, counted up to 10,000")
    total_capped: bool = Field(False, description="true when more than `total` match")
    next_cursor: str | None = Field(None, description="pass back as `cursor` for the next page")


class HitDay(BaseModel):
    day: date
    signal: str
    events: int
    counted_weight: int


class HitEventRow(BaseModel):
    at: datetime
    agent: str | None
    signal: str
    weight: int
    counted: bool


class HitHistory(BaseModel):
    memory_id: UUID
    days: list[HitDay]
    recent: list[HitEventRow]


class MapNode(BaseModel):
    id: UUID
    tier: Tier
    memory_type: MemoryType
    hit_count: int
    pinned: bool
    label: str
    scope: Scope
    cluster_id: UUID | None = Field(None, description="the knowledge cluster this memory belongs to")


class MapCluster(BaseModel):
    """A knowledge cluster with members among the map's sample."""

    id: UUID
    topic: str
    member_count: int = Field(..., description="all its members, not only the sampled ones")
    skill_slug: str | None
    skill_name: str | None
    skill_version: str | None


class MapCell(BaseModel):
    tier: Tier
    memory_type: MemoryType
    memories: int
    hits: int


class MemoryMap(BaseModel):
    nodes: list[MapNode]
    totals: list[MapCell]
    sampled: bool = Field(..., description="true when the nodes are a sample of the totals")
    clusters: list[MapCluster] = Field(
        default_factory=list, description="clusters of the sampled memories with 2+ members, largest first"
    )
    clusters_total: int = Field(0, description="the tenant's clusters with 2+ members")


class ActivityDay(BaseModel):
    day: date
    kind: str
    events: int


def _sort_columns(sort: Sort) -> tuple[Any, Any]:
    key = {"created": Memory.created_at, "updated": Memory.updated_at, "hits": Memory.hit_count}[sort]
    return key, Memory.id


def encode_cursor(sort: Sort, value: Any, memory_id: UUID) -> str:
    raw = json.dumps([sort, value.isoformat() if isinstance(value, datetime) else value, str(memory_id)])
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, sort: Sort) -> tuple[Any, UUID]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        kind, value, memory_id = json.loads(base64.urlsafe_b64decode(padded))
        if kind != sort:
            raise ValueError("cursor of another sort order")
        key = datetime.fromisoformat(value) if sort != "hits" else int(value)
        return key, UUID(memory_id)
    except (ValueError, TypeError, json.JSONDecodeError) as exc:
        raise ValidationFailed(f"invalid cursor: {exc}") from None


def _conditions(actor: Actor, f: MemoryFilter) -> list[Any]:
    where = [Memory.tenant_id == actor.tenant_id, visible_to(actor)]
    for column, value in (
        (Memory.memory_type, f.memory_type),
        (Memory.tier, f.tier),
        (Memory.status, f.status),
        (Memory.scope, f.scope),
        (Memory.pinned, f.pinned),
    ):
        if value is not None:
            where.append(column == value)
    if f.agent:
        agent_ids = select(Agent.id).where(Agent.tenant_id == actor.tenant_id, Agent.name == f.agent)
        where.append(Memory.agent_id.in_(agent_ids.scalar_subquery()))
    if f.q and f.q.strip():
        # Browsing narrows: every informative term must match (search ranks with OR instead).
        terms = fulltext.query_text(f.q).replace(" | ", " & ")
        if not terms:
            raise ValidationFailed("the text filter has no searchable terms")
        where.append(Memory.search_tsv.bool_op("@@")(func.to_tsquery("simple", terms)))
    return where


def list_memories(
    session: Session,
    actor: Actor,
    f: MemoryFilter,
    *,
    sort: Sort = "created",
    limit: int = 50,
    cursor: str | None = None,
) -> MemoryPage:
    """One page of memories, newest (or most used) first, with the total that match."""
    if not 1 <= limit <= MAX_PAGE:
        raise ValidationFailed(f"limit must be between 1 and {MAX_PAGE}")
    where = _conditions(actor, f)
    # Counting every match of a broad filter would scan the table; past COUNT_CAP the list says "10,000+".
    capped = select(Memory.id).where(*where).limit(COUNT_CAP + 1).subquery()
    total = session.execute(select(func.count()).select_from(capped)).scalar_one()
    key, tie = _sort_columns(sort)
    stmt = (
        select(Memory, Agent.name)
        .outerjoin(Agent, Agent.id == Memory.agent_id)
        .where(*where)
        .order_by(key.desc(), tie.desc())
        .limit(limit + 1)
    )
    if cursor:
        value, memory_id = decode_cursor(cursor, sort)
        stmt = stmt.where(tuple_(key, tie) < tuple_(value, memory_id))
    rows = session.execute(stmt).all()
    items = [_row(m, agent) for m, agent in rows[:limit]]
    next_cursor = None
    if len(rows) > limit:
        last = rows[limit - 1][0]
        next_cursor = encode_cursor(sort, getattr(last, key.key), last.id)
    return MemoryPage(
        items=items, total=min(int(total), COUNT_CAP), total_capped=total > COUNT_CAP, next_cursor=next_cursor
    )


def _row(m: Memory, agent: str | None) -> MemoryRow:
    return MemoryRow(
        id=m.id,
        memory_type=m.memory_type,  # type: ignore[arg-type]
        summary_l0=m.summary_l0 or m.content[:160],
        tags=list(m.tags),
        tier=m.tier,  # type: ignore[arg-type]
        status=m.status,  # type: ignore[arg-type]
        scope=m.scope,  # type: ignore[arg-type]
        pinned=m.pinned,
        hit_count=m.hit_count,
        last_hit_at=m.last_hit_at,
        created_at=m.created_at,
        updated_at=m.updated_at,
        agent=agent,
    )


def _check_visible(session: Session, actor: Actor, memory_id: UUID) -> None:
    found = session.execute(
        select(Memory.id).where(
            Memory.id == memory_id, Memory.tenant_id == actor.tenant_id, visible_to(actor)
        )
    ).first()
    if found is None:
        raise NotFound(f"memory {memory_id} not found")


def hit_history(
    session: Session, actor: Actor, memory_id: UUID, *, days: int = 90, recent: int = 50
) -> HitHistory:
    """Hits per day and signal, and the latest individual hits, of one memory."""
    if not 1 <= days <= 3650:
        raise ValidationFailed("days must be between 1 and 3650")
    _check_visible(session, actor, memory_id)
    per_day = session.execute(
        q("memory_hit_days"), {"tenant_id": actor.tenant_id, "memory_id": memory_id, "days": days}
    ).all()
    events = session.execute(
        select(HitEvent, Agent.name)
        .outerjoin(Agent, Agent.id == HitEvent.agent_id)
        .where(HitEvent.tenant_id == actor.tenant_id, HitEvent.memory_id == memory_id)
        .order_by(HitEvent.created_at.desc(), HitEvent.id.desc())
        .limit(recent)
    ).all()
    return HitHistory(
        memory_id=memory_id,
        days=[
            HitDay(day=r.day, signal=r.signal, events=r.events, counted_weight=r.counted_weight)
            for r in per_day
        ],
        recent=[
            HitEventRow(at=h.created_at, agent=name, signal=h.signal, weight=h.weight, counted=h.counted)
            for h, name in events
        ],
    )


def memory_map(session: Session, actor: Actor, *, per_tier: int = 400, max_clusters: int = 100) -> MemoryMap:
    """The most used memories of each tier, the per tier/type totals they stand for (one scan), and the
    knowledge clusters those memories belong to."""
    if not 1 <= per_tier <= MAX_MAP_PER_TIER:
        raise ValidationFailed(f"per_tier must be between 1 and {MAX_MAP_PER_TIER}")
    if not 0 <= max_clusters <= MAX_MAP_CLUSTERS:
        raise ValidationFailed(f"max_clusters must be between 0 and {MAX_MAP_CLUSTERS}")
    nodes: list[MapNode] = []
    totals: list[MapCell] = []
    for r in session.execute(q("map_sample"), {**actor.visibility(), "per_tier": per_tier}):
        if r.kind == "node":
            nodes.append(
                MapNode(
                    id=r.id,
                    tier=r.tier,
                    memory_type=r.memory_type,
                    hit_count=r.hits,
                    pinned=r.pinned,
                    label=r.label,
                    scope=r.scope,
                    cluster_id=r.cluster_id,
                )
            )
        else:
            totals.append(MapCell(tier=r.tier, memory_type=r.memory_type, memories=r.memories, hits=r.hits))
    clusters, clusters_total = map_clusters(session, actor, nodes, max_clusters)
    return MemoryMap(
        nodes=nodes,
        totals=totals,
        sampled=sum(t.memories for t in totals) > len(nodes),
        clusters=clusters,
        clusters_total=clusters_total,
    )


def map_clusters(
    session: Session, actor: Actor, nodes: list[MapNode], limit: int
) -> tuple[list[MapCluster], int]:
    """The clusters of the sampled memories (largest first, at most `limit`), and the tenant's count."""
    ids = sorted({str(n.cluster_id) for n in nodes if n.cluster_id is not None})
    counts = session.execute(
        q("cluster_counts"), {"tenant_id": actor.tenant_id, "min_members": MAP_CLUSTER_MIN_MEMBERS}
    ).one()
    if not ids or not limit:
        return [], int(counts.shown_min)
    rows = session.execute(
        q("map_clusters"),
        {"tenant_id": actor.tenant_id, "ids": ids, "min_members": MAP_CLUSTER_MIN_MEMBERS, "limit": limit},
    )
    clusters = [
        MapCluster(
            id=r.id,
            topic=r.topic,
            member_count=r.member_count,
            skill_slug=r.skill_slug,
            skill_name=r.skill_name,
            skill_version=(
                f"{r.version_major}.{r.version_minor}.{r.version_patch}" if r.skill_name is not None else None
            ),
        )
        for r in rows
    ]
    return clusters, int(counts.shown_min)


def memory_stats(session: Session, actor: Actor) -> tuple[MemoryStats, int]:
    """Counts by tier, type, status and scope and redactions in one scan; and how many are pinned."""
    dims: dict[str, dict[str, int]] = {
        d: {} for d in ("tier", "type", "status", "scope", "pinned", "redacted")
    }
    for r in session.execute(q("memory_counts"), actor.visibility()):
        if r.dimension == "redacted":
            dims["redacted"][r.key] = int(r.n)
            continue
        keys = (("tier", r.tier), ("type", r.memory_type), ("status", r.status), ("scope", r.scope))
        for dim, key in (*keys, ("pinned", str(r.pinned).lower())):
            dims[dim][key] = dims[dim].get(key, 0) + int(r.n)
    contributions = session.execute(
        select(func.count())
        .select_from(MemoryContribution)
        .where(MemoryContribution.tenant_id == actor.tenant_id)
    ).scalar_one()
    model = session.execute(text("SELECT model_name FROM embedding_profile WHERE id = 1")).scalar()
    stats = MemoryStats(
        total=sum(dims["status"].values()),
        by_tier=dims["tier"],
        by_type=dims["type"],
        by_status=dims["status"],
        by_scope=dims["scope"],
        redacted_entities=dims["redacted"],
        contributions=int(contributions),
        embedding_model=model,
    )
    return stats, dims["pinned"].get("true", 0)


def activity(session: Session, actor: Actor, *, days: int = 30) -> list[ActivityDay]:
    """Events per UTC day and kind (upload, merge, search, edit, delete), oldest first."""
    if not 1 <= days <= 366:
        raise ValidationFailed("days must be between 1 and 366")
    rows = session.execute(q("activity_by_day"), {"tenant_id": actor.tenant_id, "days": days})
    return [ActivityDay(day=r.day, kind=r.kind, events=r.events) for r in rows]


def day_range(days: int, today: date | None = None) -> list[date]:
    """The UTC days an activity chart covers, oldest first."""
    end = today or datetime.now(UTC).date()
    return [end - timedelta(days=n) for n in range(days - 1, -1, -1)]


class WorkerStepRun(BaseModel):
    step: str
    status: str
    started_at: datetime
    finished_at: datetime | None
    counts: dict[str, Any]
    errors: int


class WorkerOutcome(BaseModel):
    step: str
    status: str
    runs: int
    last_started_at: datetime


class WorkerSummary(BaseModel):
    recent: list[WorkerStepRun]
    outcomes: list[WorkerOutcome]


def worker_summary(session: Session, *, days: int = 30, recent: int = 20) -> WorkerSummary | None:
    """The worker's recent step runs and outcomes; None while no worker has been installed."""
    if session.execute(text("SELECT to_regclass('worker_runs')")).scalar() is None:
        return None
    return WorkerSummary(
        recent=[
            WorkerStepRun(**r._mapping) for r in session.execute(q("worker_runs_recent"), {"limit": recent})
        ],
        outcomes=[
            WorkerOutcome(**r._mapping) for r in session.execute(q("worker_runs_by_status"), {"days": days})
        ],
    )
