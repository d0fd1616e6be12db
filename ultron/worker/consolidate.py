"""Consolidation: merge near-duplicate memories of one type, found through the HNSW index.

Memories are walked in keyset pages of their id; each brings its nearest active neighbour of the same
type and visibility (sql/worker.sql: consolidation_candidates). A pair at or above the hard dedup
threshold merges if the two state the same fact (the upload path's automatic gate); one in the soft band,
or above HARD but refused by that gate, merges if the judge agrees and the offline content checks do not
veto it (`faithful.may_merge_judged`). It never merges a reflection, nor two memories a split separated
(a split is a person or agent saying "these differ"); a pinned memory never loses and, as on upload, a
merge into it never rewrites its text. The winner is the pinned one, else the more used one, else the
older one; the loser is archived with `merged_into_id` set (never deleted).
Each merge is its own transaction; at most `consolidate_max_merges` per cycle.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from uuid import UUID

from sqlalchemy.orm import Session

from ultron.db.engine import Database
from ultron.db.models import Memory
from ultron.db.queries import q
from ultron.memory.faithful import may_merge_automatically, may_merge_judged
from ultron.memory.service import MemoryService
from ultron.memory.text import REFLECTION_TYPE
from ultron.tenancy import Actor

log = logging.getLogger(__name__)

# Memories per keyset page (each costs one HNSW probe).
PAGE_SIZE = 200
WORKER_AGENT = "worker"


@dataclass
class ConsolidationCounts:
    examined: int = 0
    candidates: int = 0
    judged: int = 0
    merged: int = 0
    skipped: int = 0
    touched: set[UUID] = field(default_factory=set)

    def as_dict(self) -> dict[str, int]:
        return {
            "examined": self.examined,
            "candidates": self.candidates,
            "judged": self.judged,
            "merged": self.merged,
            "skipped": self.skipped,
        }


def _fields(m: Memory) -> dict[str, str]:
    return {"content": m.content, "context": m.context, "resolution": m.resolution}


def pick_winner(a: Memory, b: Memory) -> tuple[Memory, Memory] | None:
    """(winner, loser); None when both are pinned (a pinned memory never loses)."""
    if a.pinned and b.pinned:
        return None
    if a.pinned != b.pinned:
        return (a, b) if a.pinned else (b, a)
    key_a = (-a.hit_count, a.created_at, str(a.id))
    key_b = (-b.hit_count, b.created_at, str(b.id))
    return (a, b) if key_a <= key_b else (b, a)


def _actor(tenant_id: UUID, loser: Memory) -> Actor:
    # Acts as the loser's contributor for private memories, so the merge sees what that agent sees.
    agent = loser.agent_id if loser.scope == "private" else None
    groups = (loser.group_name,) if loser.group_name else ()
    return Actor(tenant_id, agent, WORKER_AGENT, groups=groups, is_admin=True)


class Consolidator:
    def __init__(self, db: Database, memory: MemoryService, max_merges: int):
        self.db = db
        self.memory = memory
        self.max_merges = max_merges
        self.hard, self.soft = memory.hard_threshold, memory.soft_threshold

    def run_tenant(
        self, tenant_id: UUID, counts: ConsolidationCounts, should_stop: Callable[[], bool]
    ) -> None:
        after = UUID(int=0)
        while counts.merged < self.max_merges and not should_stop():
            with self.db.session() as session:
                rows = session.execute(
                    q("consolidation_candidates"),
                    {"tenant_id": tenant_id, "after": after, "batch": PAGE_SIZE},
                ).all()
            if not rows:
                return
            after = rows[-1].a_id
            counts.examined += len(rows)
            for row in rows:
                if counts.merged >= self.max_merges or should_stop():
                    return
                if row.b_id is None or row.similarity < self.soft:
                    continue
                if row.a_id in counts.touched or row.b_id in counts.touched:
                    continue
                counts.candidates += 1
                self._merge_pair(tenant_id, row.a_id, row.b_id, float(row.similarity), counts)

    def _merge_pair(
        self, tenant_id: UUID, a_id: UUID, b_id: UUID, sim: float, counts: ConsolidationCounts
    ) -> None:
        with self.db.session() as session:
            pair = self._load(session, tenant_id, a_id, b_id)
            if pair is None:
                counts.skipped += 1
                return
            winner, loser = pair
            if sim < self.hard or not may_merge_automatically(_fields(winner), _fields(loser)):
                counts.judged += 1
                if not may_merge_judged(_fields(winner), _fields(loser)):
                    return
                if not self.memory.intelligence.judge_same(_fields(winner), _fields(loser)):
                    return
            if self.memory.absorb(session, _actor(tenant_id, loser), winner.id, loser.id, sim):
                counts.merged += 1
                counts.touched.update((winner.id, loser.id))
            else:
                counts.skipped += 1

    def _load(
        self, session: Session, tenant_id: UUID, a_id: UUID, b_id: UUID
    ) -> tuple[Memory, Memory] | None:
        a, b = session.get(Memory, (a_id, tenant_id)), session.get(Memory, (b_id, tenant_id))
        if a is None or b is None or a.tenant_id != tenant_id or b.tenant_id != tenant_id:
            return None
        if a.status != "active" or b.status != "active":
            return None
        if REFLECTION_TYPE in (a.memory_type, b.memory_type):
            return None
        split = session.execute(
            q("split_apart"), {"tenant_id": tenant_id, "a_id": a_id, "b_id": b_id}
        ).scalar_one()
        return None if split else pick_winner(a, b)
