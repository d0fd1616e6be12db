"""Short ids: the memories whose id starts with a prefix, among those the agent may see.

People copy the first 8 characters of an id from a search line (`ultron memory show dc066691`); the CLI
resolves them here, through the hub, so a prefix never reaches another tenant's or agent's memories.
"""

from __future__ import annotations

import re
from uuid import UUID

from sqlalchemy import String, cast, func, select
from sqlalchemy.orm import Session

from ultron.db.models import Memory
from ultron.errors import ValidationFailed
from ultron.memory.records import visible_to
from ultron.tenancy import Actor

MIN_PREFIX = 6
# Enough to name the ambiguity; a prefix matching more is too short to be meant.
MAX_CANDIDATES = 10
_PREFIX = re.compile(rf"[0-9a-f]{{{MIN_PREFIX},32}}")


def normalize(prefix: str) -> str:
    """The prefix as bare lower-case hex; ValidationFailed when it is not one of at least 6 characters."""
    bare = prefix.strip().lower().replace("-", "")
    if not _PREFIX.fullmatch(bare):
        raise ValidationFailed(
            f"{prefix!r} is not a memory id: give the full id or at least {MIN_PREFIX} hex characters of it"
        )
    return bare


def ids_with_prefix(session: Session, actor: Actor, prefix: str) -> list[UUID]:
    """Up to MAX_CANDIDATES ids (in id order) of the memories this agent may see starting with `prefix`."""
    bare = normalize(prefix)
    stmt = (
        select(Memory.id)
        .where(
            Memory.tenant_id == actor.tenant_id,
            visible_to(actor),
            func.replace(cast(Memory.id, String), "-", "").like(bare + "%"),
        )
        .order_by(Memory.id)
        .limit(MAX_CANDIDATES)
    )
    return list(session.execute(stmt).scalars())
