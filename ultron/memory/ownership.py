"""What a merge, a split, an edit and a delete may do to a memory its owner set (issue 33, found 2, 3, 5, 6).

A memory's owner is the agent whose upload created it; that upload is its *base* contribution (decision
`created`, or `split` for a memory split out of another). Other agents' uploads merged into it are kept
(lossless merges), but they never change what the owner set, and the owner's edits are what the memory
holds:

* the base contribution follows the owner's edits (`follow_edit`), so text the owner edited out stops
  being indexed and a later split restores what the owner set, not what it uploaded first;
* a split gives back the resolution the memory had without the split contribution (`resolution_after_split`);
* a merged upload sets importance and mood only on a memory of its own uploader that is not pinned
  (`may_set_fields`);
* deleting a memory keeps other agents' merged uploads, as memories of their own (`others_uploads`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from ultron.db.models import Memory, MemoryContribution
from ultron.tenancy import Actor

BASE_DECISIONS = ("created", "split")
MERGED_DECISIONS = ("merged", "merged_judge")


def may_set_fields(actor: Actor, memory: Memory) -> bool:
    """Whether an upload merged into `memory` may set its importance, valence and arousal: only its owner's
    upload, and never on a pinned memory (a pinned memory gains contributions, never fields)."""
    return not memory.pinned and memory.agent_id is not None and memory.agent_id == actor.agent_id


def follow_edit(session: Session, memory: Memory, changed: Sequence[str]) -> None:
    """The memory's base contribution takes the memory's current value of each field in `changed`."""
    values: dict[str, Any] = {name: getattr(memory, name) for name in changed}
    if not values:
        return
    session.execute(
        update(MemoryContribution)
        .where(
            MemoryContribution.memory_id == memory.id,
            MemoryContribution.tenant_id == memory.tenant_id,
            MemoryContribution.decision.in_(BASE_DECISIONS),
        )
        .values(**values)
        .execution_options(synchronize_session="fetch")
    )


def _norm(text: str) -> str:
    return " ".join(text.split())


def resolution_after_split(current: str, theirs: str, remaining: Sequence[Any]) -> str:
    """The memory's resolution once a contribution whose resolution is `theirs` is split out of it, when
    the memory's resolution is that same text: the base contribution's (what the owner set, which may be
    the same words), else that text if another remaining upload brought it too, else empty."""
    base = next((row.resolution for row in remaining if row.decision in BASE_DECISIONS), "")
    if _norm(base):
        return str(base)
    if any(_norm(row.resolution) == _norm(theirs) for row in remaining if row.decision in MERGED_DECISIONS):
        return current
    return ""


def others_uploads(session: Session, memory: Memory) -> list[MemoryContribution]:
    """The merged contributions of agents other than the memory's owner, oldest first."""
    return list(
        session.scalars(
            select(MemoryContribution)
            .where(
                MemoryContribution.memory_id == memory.id,
                MemoryContribution.tenant_id == memory.tenant_id,
                MemoryContribution.decision.in_(MERGED_DECISIONS),
                MemoryContribution.agent_id.is_not(None),
                MemoryContribution.agent_id != memory.agent_id
                if memory.agent_id is not None
                else MemoryContribution.agent_id.is_not(None),
            )
            .order_by(MemoryContribution.created_at, MemoryContribution.id)
            .with_for_update()
        )
    )
