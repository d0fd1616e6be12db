"""Tier rebalance and COLD-TTL archive: one SQL statement per tenant (sql/worker.sql: rebalance_tiers)."""

from __future__ import annotations

from uuid import UUID

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from ultron.config import Settings
from ultron.db.models import Tenant
from ultron.db.queries import q
from ultron.memory.text import PERSONAL_TYPES

# The window sort of a large tenant fits in memory instead of spilling to disk.
REBALANCE_WORK_MEM = "256MB"
COUNT_KEYS = ("ranked", "hot", "warm", "cold", "moved", "newly_hot", "archived")


def tenant_ids(session: Session) -> list[UUID]:
    return list(session.execute(select(Tenant.id).order_by(Tenant.id)).scalars())


def rebalance_tenant(session: Session, settings: Settings, tenant_id: UUID) -> dict[str, int]:
    """Re-tier one tenant's active memories and archive its expired COLD ones; returns the counts."""
    session.execute(text(f"SET LOCAL work_mem = '{REBALANCE_WORK_MEM}'"))
    # The changed rows are fetched by primary key (`= ANY` of their ids) and joined to the ranking's
    # output by hashing: a nested loop here would rescan the materialized changes per row (quadratic;
    # the planner cannot know how many rows the array holds).
    session.execute(text("SET LOCAL enable_nestloop = off"))
    row = session.execute(
        q("rebalance_tiers"),
        {
            "tenant_id": tenant_id,
            "hot_pct": settings.hot_percentile,
            "warm_pct": settings.warm_percentile,
            "ttl_days": settings.cold_ttl_days,
            "personal_ttl_days": settings.personal_ttl_days,
            "personal_types": list(PERSONAL_TYPES),
            "arousal_weight": settings.arousal_tier_weight,
            "arousal_ttl": settings.arousal_ttl_factor,
        },
    ).one()
    # The archive changed the active set: rebuild the lexical ranker's term statistics (IDF) too.
    session.execute(q("refresh_term_stats"), {"tenant_id": tenant_id})
    return {key: int(getattr(row, key)) for key in COUNT_KEYS}


def add_counts(total: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    return {key: total.get(key, 0) + more.get(key, 0) for key in {*total, *more}}
