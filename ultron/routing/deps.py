"""FastAPI dependencies of every route: the request's unit of work as the calling agent, and the getters
of the hub's parts (`request.app.state.hub`, never imported: a domain's router types its own getter).

A route takes `unit: UnitDep` and runs its work through it:
`unit.write(fn)` (one transaction on the primary), `unit.read(fn)` (may run on a read replica) or
`unit.prepared(prepare, fn)` (provider work with no connection held, then a short write); `fn` gets the
session and the acting agent. The agent is authenticated when the route asks, in its own short
transaction on the primary (a revoked key is refused at once), so a request's own checks (its body, its
query) answer first as before. Every transaction ends inside the route, so a failed commit never
answers 200.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Hashable
from contextlib import AbstractContextManager
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from ultron.config import Settings
from ultron.db.engine import Database, lsn_text, lsn_value
from ultron.errors import ValidationFailed
from ultron.routing.auth import AuthPolicy
from ultron.tenancy import Actor

T = TypeVar("T")
P = TypeVar("P")

# Read-your-writes across API processes (docs/operations.md#read-replicas): a write's response names the
# primary's WAL position after it; a client that sends it back on its reads is served by a replica only
# once that replica has replayed past it. The SDK's HTTP client does this by itself.
WRITTEN_HEADER = "X-Ultron-Written-LSN"
READ_AFTER_HEADER = "X-Ultron-Read-After"
_LSN = re.compile(r"[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}")


def read_after(request: Request) -> int | None:
    raw = request.headers.get(READ_AFTER_HEADER, "").strip()
    if not raw:
        return None
    if not _LSN.fullmatch(raw):
        raise ValidationFailed(
            f"{READ_AFTER_HEADER} must be a WAL position such as 16/B374D848 (as sent in {WRITTEN_HEADER})"
        )
    return lsn_value(raw)


def reader(actor: Actor) -> Hashable:
    """Whose writes a read must see (read-your-writes with replicas): the agent."""
    return (actor.tenant_id, actor.agent_id)


class RequestUnit:
    """One request's database work as the calling agent."""

    def __init__(self, request: Request):
        self.request = request
        self.db: Database = request.app.state.hub.db
        self.policy: AuthPolicy = request.app.state.auth

    def actor(self) -> Actor:
        """The calling agent, resolved by one statement in autocommit (no transaction of its own to open
        and commit: `Database.autocommit_session`)."""
        with self.db.autocommit_session() as session:
            return self.policy.actor(self.request, session)

    def session(self) -> AbstractContextManager[Session]:
        """A short transaction of the route's own on the primary (a tenant's policy read before provider
        work), outside the agent's unit of work."""
        return self.db.session()

    def write(self, fn: Callable[[Session, Actor], T]) -> T:
        """Run `fn` in one transaction on the primary; it counts as the agent's write.

        `fn`'s session takes a pooled connection only at its first statement, so provider work a
        service does before that (a search embedding its query) holds no connection while it waits."""
        actor = self.actor()
        with self.db.session() as session:
            result = fn(session, actor)
        self._written(actor)
        return result

    def read(self, fn: Callable[[Session, Actor], T]) -> T:
        """Run `fn`, which writes nothing: with read replicas configured it may run on one
        (ultron/db/engine.py), once the replica has replayed the agent's own writes."""
        actor = self.actor()
        after = read_after(self.request)
        result = self.db.read(lambda session: fn(session, actor), reader(actor), after=after)
        self.policy.last_seen.touch(self.db, actor)
        return result

    def prepared(self, prepare: Callable[[Actor], P], fn: Callable[[Session, Actor, P], T]) -> T:
        """Run `prepare` (provider calls: embed, type, summarize) with no connection held, then `fn` in
        its own short transaction. A hanging provider so holds no database connection and no lock, and a
        provider failure leaves nothing written."""
        actor = self.actor()
        prepared = prepare(actor)
        with self.db.session() as session:
            result = fn(session, actor, prepared)
        self._written(actor)
        return result

    def _written(self, actor: Actor) -> None:
        lsn = self.db.wrote(reader(actor))
        if lsn is not None:
            self.request.state.written_lsn = lsn_text(lsn)  # BodyLimit puts it in the response's headers
        self.policy.last_seen.touch(self.db, actor)


async def request_unit(request: Request) -> RequestUnit:
    # `async`: building it touches nothing, so it need not take a threadpool thread.
    return RequestUnit(request)


def hub_part(name: str) -> Callable[[Request], Awaitable[Any]]:
    """A dependency returning the hub's part `name` (`memory`, `skills`, `settings` ...)."""

    async def part(request: Request) -> Any:
        return getattr(request.app.state.hub, name)

    part.__name__ = f"hub_{name}"
    return part


UnitDep = Annotated[RequestUnit, Depends(request_unit)]
SettingsDep = Annotated[Settings, Depends(hub_part("settings"))]
DatabaseDep = Annotated[Database, Depends(hub_part("db"))]
