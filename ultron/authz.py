"""Who may change what: the contributor of a thing or an admin agent of its tenant.

Every path that changes memories goes through one of these checks: editing and deleting a memory
(MemoryService._owned), a vault import over existing memories, an import's review (discarding archives
its memories), pause and resume, reprocessing a session or a segment (re-segmentation archives the
memories of changed segments). `POST /trajectory/process` only advances work its owners queued.
"""

from __future__ import annotations

from uuid import UUID

from ultron.errors import Forbidden
from ultron.tenancy import Actor


def require_owner(actor: Actor, owner_id: UUID | None, what: str) -> None:
    """Refuse (403) unless `actor` is the agent that owns `what`, or an admin."""
    if actor.is_admin or (owner_id is not None and owner_id == actor.agent_id):
        return
    raise Forbidden(
        f"agent {actor.agent_name!r} does not own {what}; only its owner or an admin agent may change it"
    )
