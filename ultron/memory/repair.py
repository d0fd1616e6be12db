"""`ultron memory split` and `ultron memory repair-merges`: undo merges the dedup rules would not make today.

Before issue 14 the offline hub merged far too much (a clock time, a year and a speaker's name were
"shared words"; pandas and numpy were one memory). `repair-merges` walks every merged contribution of
every tenant, in every scope (keyset pages, never the whole table at once), asks the upload path's current
rules (`MemoryService.merge_verdict`) whether the merge would be made today -- comparing the upload with the
memory's first upload at the cosine recorded when it merged -- and prints those it would not. With
`--apply` it splits each of them back into a memory of its own (`MemoryService.split`), one transaction
per split, acting as the memory's owner (private and group memories are visible to it alone or its
group), with an admin's rights.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from sqlalchemy import select
from sqlalchemy.orm import Session

from ultron.db.engine import Database
from ultron.db.models import Memory, MemoryContribution, Tenant
from ultron.errors import NotFound, UltronError
from ultron.memory.service import MemoryService
from ultron.tenancy import Actor

PAGE = 500
MERGED = ("merged", "merged_judge")


@dataclass(frozen=True)
class Finding:
    memory_id: UUID
    contribution_id: int
    decision: str
    similarity: float | None
    reason: str
    memory_text: str
    contribution_text: str
    tenant_id: UUID | None = None


def _fields(row: Any) -> dict[str, str]:
    return {"content": row.content, "context": row.context, "resolution": row.resolution}


def _short(fields: dict[str, str], width: int = 70) -> str:
    text = " / ".join(" ".join(v.split()) for v in fields.values() if v.strip())
    return text if len(text) <= width else text[: width - 1] + "…"


def review(service: MemoryService, session: Session, actor: Actor, *, page: int = PAGE) -> Iterator[Finding]:
    """Merged contributions of the actor's tenant that today's rules would have kept as memories."""
    last = 0
    while True:
        rows = (
            session.execute(
                select(MemoryContribution)
                .where(
                    MemoryContribution.tenant_id == actor.tenant_id,
                    MemoryContribution.decision.in_(MERGED),
                    MemoryContribution.id > last,
                )
                .order_by(MemoryContribution.id)
                .limit(page)
            )
            .scalars()
            .all()
        )
        if not rows:
            return
        for c in rows:
            last = c.id
            first = session.execute(
                select(MemoryContribution)
                .where(
                    MemoryContribution.memory_id == c.memory_id,
                    MemoryContribution.tenant_id == actor.tenant_id,
                    MemoryContribution.decision.in_(("created", "split")),
                )
                .order_by(MemoryContribution.created_at, MemoryContribution.id)
                .limit(1)
            ).scalar_one_or_none()
            original = first if first is not None else session.get(Memory, (c.memory_id, actor.tenant_id))
            if original is None:
                continue
            sim = float(c.similarity) if c.similarity is not None else 0.0
            verdict, reason = service.merge_verdict(_fields(original), _fields(c), sim)
            if verdict is None:
                yield Finding(
                    memory_id=c.memory_id,
                    contribution_id=c.id,
                    decision=c.decision,
                    similarity=c.similarity,
                    reason=reason,
                    memory_text=_short(_fields(original)),
                    contribution_text=_short(_fields(c)),
                    tenant_id=actor.tenant_id,
                )


def repair(
    db: Database, memory: MemoryService, *, apply: bool = False, out: Callable[[str], None] = print
) -> tuple[int, int]:
    """Print (and with `apply` split back) the merges today's rules would not make: (found, split)."""
    with db.session() as session:
        tenants = session.execute(select(Tenant.id, Tenant.name).order_by(Tenant.name)).all()
        findings = [
            f
            for t in tenants
            for f in review(memory, session, Actor(t.id, None, "repair-merges", t.name, is_admin=True))
        ]
    for f in findings:
        sim = "-" if f.similarity is None else f"{f.similarity:.4f}"
        out(f"{f.memory_id}  contribution {f.contribution_id}  {f.decision} {sim}: {f.reason}")
        out(f"    memory:      {f.memory_text}")
        out(f"    contributed: {f.contribution_text}")
    done = 0
    if apply:
        for f in findings:
            try:
                with db.session() as session:
                    owner = _owner(session, f)
                    result = memory.split(session, owner, f.memory_id, f.contribution_id)
                done += 1
                out(f"split contribution {f.contribution_id} into memory {result.split.id}")
            except UltronError as exc:
                out(f"skipped contribution {f.contribution_id}: {exc}")
    verb = "split back" if apply else "would split back (dry run; --apply to do it)"
    out(f"{len(findings)} merges the current rules would not make; {done if apply else len(findings)} {verb}")
    return len(findings), done


def _owner(session: Session, f: Finding) -> Actor:
    """An admin actor that sees the memory: its owner's identity (a private memory is visible to its
    author only) in its group."""
    assert f.tenant_id is not None
    m = session.get(Memory, (f.memory_id, f.tenant_id))
    if m is None:
        raise NotFound(f"memory {f.memory_id} is gone")
    groups = (m.group_name,) if m.group_name else ()
    return Actor(f.tenant_id, m.agent_id, "repair-merges", groups=groups, is_admin=True)
