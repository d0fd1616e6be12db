"""Reading memories: hits (a use logged), one memory, details (an adoption), a thread's turns, a memory's
contributions, and the store's stats. `AccessMixin` is this half of MemoryService
(ultron/memory/service.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any
from uuid import UUID

from sqlalchemy import BigInteger, cast, func, select, text, true
from sqlalchemy.orm import Session

from ultron.config import Settings
from ultron.db.models import Agent, Memory, MemoryContribution
from ultron.db.queries import q
from ultron.errors import NotFound, ValidationFailed
from ultron.memory.records import load_records, visible_to
from ultron.memory.schemas import Contribution, MemoryRecord, MemoryStats
from ultron.tenancy import Actor

HIT_WEIGHTS = {"search": 1, "details": 2, "merge": 1}


class AccessMixin:
    """MemoryService's reads (see the module's docstring); its attributes are the service's."""

    settings: Settings
    companion: Any

    # --- hits ----------------------------------------------------------------------------------

    def record_hits(
        self, session: Session, actor: Actor, memory_ids: Iterable[UUID], signal: str
    ) -> set[UUID]:
        """Log a use of each memory; returns the ids whose hit_count actually rose (see docs/ranking.md)."""
        ids = list(memory_ids)
        if not ids:
            return set()
        rows = session.execute(q("record_hits"), self._hit_params(actor, ids, signal)).all()
        return {row.id for row in rows}

    def _hit_params(self, actor: Actor, ids: list[UUID], signal: str) -> dict[str, Any]:
        """`record_hits`' parameters: a use of each memory by this agent, counted once per window."""
        return {
            "tenant_id": actor.tenant_id,
            "agent_id": actor.agent_id,
            "memory_ids": ids,
            "signal": signal,
            "weight": HIT_WEIGHTS[signal],
            "window_seconds": self.settings.hit_window_hours * 3600.0,
        }

    # --- reads ---------------------------------------------------------------------------------

    def get(self, session: Session, actor: Actor, memory_id: UUID) -> MemoryRecord:
        """One memory, full text, without counting a hit (browsing is not adoption)."""
        found = load_records(session, [memory_id], actor)
        if memory_id not in found:
            raise NotFound(f"memory {memory_id} not found")
        return found[memory_id]

    def details(self, session: Session, actor: Actor, ids: Sequence[UUID]) -> list[MemoryRecord]:
        """Full records; each counts as a strong adoption signal (+2)."""
        if not ids:
            raise ValidationFailed("ids must not be empty")
        if len(ids) > 100:
            raise ValidationFailed("at most 100 ids per call")
        ids = list(dict.fromkeys(ids))
        found = load_records(session, ids, actor)
        missing = [str(i) for i in ids if i not in found]
        if missing:
            raise NotFound(f"memories not found: {', '.join(missing)}")
        self.record_hits(session, actor, ids, "details")
        if self.companion is not None:
            self.companion.after_details(session, actor, ids)
        fresh = load_records(session, ids, actor)
        return [fresh[i] for i in ids]

    def thread(self, session: Session, actor: Actor, memory_id: UUID, span: int = 2) -> list[MemoryRecord]:
        """The memory with its neighbouring turns (same thread, position within span), in order; the memory
        alone when it has no thread. Like get, counts no hit."""
        if not 0 <= span <= 50:
            raise ValidationFailed("span must be between 0 and 50")
        memory = self.get(session, actor, memory_id)
        if memory.thread is None or memory.position is None:
            return [memory]
        stmt = (
            select(Memory.id)
            .where(
                Memory.tenant_id == actor.tenant_id,
                Memory.thread == memory.thread,
                Memory.status == "active",
                Memory.position.between(memory.position - span, memory.position + span),
                visible_to(actor),
            )
            .order_by(Memory.position, Memory.created_at)
        )
        ids = list(session.execute(stmt).scalars())
        records = load_records(session, ids, actor)
        return [records[i] for i in ids if i in records]

    def contributions(self, session: Session, actor: Actor, memory_id: UUID) -> list[Contribution]:
        self.get(session, actor, memory_id)
        stmt = (
            select(MemoryContribution, Agent.name)
            .outerjoin(Agent, Agent.id == MemoryContribution.agent_id)
            .where(MemoryContribution.memory_id == memory_id, MemoryContribution.tenant_id == actor.tenant_id)
            .order_by(MemoryContribution.created_at, MemoryContribution.id)
        )
        return [
            Contribution(
                id=c.id,
                agent=name,
                decision=c.decision,
                similarity=c.similarity,
                content=c.content,
                context=c.context,
                resolution=c.resolution,
                tags=c.tags,
                created_at=c.created_at,
            )
            for c, name in session.execute(stmt)
        ]

    # --- stats ---------------------------------------------------------------------------------

    def stats(self, session: Session, actor: Actor) -> MemoryStats:
        def grouped(column) -> dict[str, int]:  # type: ignore[no-untyped-def]
            stmt = (
                select(column, func.count())
                .where(Memory.tenant_id == actor.tenant_id, visible_to(actor))
                .group_by(column)
            )
            return {str(k): int(v) for k, v in session.execute(stmt)}

        by_status = grouped(Memory.status)
        # Entity counts and contributions of the memories this agent may see: another agent's private
        # memories are not counted (how many secrets its diary held is about that diary).
        entities = func.jsonb_each_text(Memory.redacted_entities).table_valued("key", "value").alias("e")
        entity_stmt = (
            select(entities.c.key, func.sum(cast(entities.c.value, BigInteger)))
            .select_from(Memory)
            .join(entities, true())
            .where(Memory.tenant_id == actor.tenant_id, visible_to(actor))
            .group_by(entities.c.key)
        )
        redacted = {str(key): int(total) for key, total in session.execute(entity_stmt)}
        contributions = session.execute(
            select(func.count())
            .select_from(MemoryContribution)
            .join(Memory, Memory.id == MemoryContribution.memory_id)
            .where(
                MemoryContribution.tenant_id == actor.tenant_id,
                Memory.tenant_id == actor.tenant_id,
                visible_to(actor),
            )
        ).scalar_one()
        profile = session.execute(text("SELECT model_name FROM embedding_profile WHERE id = 1")).scalar()
        return MemoryStats(
            total=sum(by_status.values()),
            by_tier=grouped(Memory.tier),
            by_type=grouped(Memory.memory_type),
            by_status=by_status,
            by_scope=grouped(Memory.scope),
            redacted_entities=redacted,
            contributions=int(contributions),
            embedding_model=profile,
        )
