"""Bearer API keys. On loopback, on a database that never had a key, the hub may run open as `local`.

Open mode is decided from keys ever issued, revoked ones included: revoking the last key locks the
hub (every request needs a key), it never reopens it. Once a policy has seen a key it stays closed for
the life of the process. Serving open is logged as a warning.

`last_seen_at` is not written in the request's transaction (an UPDATE there held the agent's row lock
for the whole request, so one agent's concurrent requests queued behind each other): it is written at
most once a minute per agent, in its own autocommit statement that skips a locked row.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
import time
from uuid import UUID

from fastapi import Request
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from ultron.errors import Unauthorized
from ultron.tenancy import Actor, authenticate, count_issued_keys, local_actor

log = logging.getLogger(__name__)

# How long the "were keys ever issued?" answer is trusted before asking the database again.
_KEY_COUNT_TTL_SECONDS = 5.0
# last_seen_at is written at most this often per agent.
LAST_SEEN_INTERVAL_S = 60.0

_TOUCH = text(
    "UPDATE agents SET last_seen_at = now() "
    "WHERE id = (SELECT id FROM agents WHERE id = :id FOR UPDATE SKIP LOCKED)"
)


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class LastSeen:
    """Records agents' last_seen_at off the request transaction, rate-limited; never waits on a lock."""

    def __init__(self, interval_s: float = LAST_SEEN_INTERVAL_S):
        self.interval_s = interval_s
        self._written: dict[UUID, float] = {}
        self._lock = threading.Lock()

    def due(self, agent_id: UUID) -> bool:
        now = time.monotonic()
        with self._lock:
            if now - self._written.get(agent_id, float("-inf")) < self.interval_s:
                return False
            self._written[agent_id] = now
            return True

    def touch(self, db: object, actor: Actor) -> None:
        if actor.agent_id is None or not self.due(actor.agent_id):
            return
        try:
            engine = db.engine  # type: ignore[attr-defined]
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(_TOUCH, {"id": actor.agent_id})
        except SQLAlchemyError as exc:  # bookkeeping only: never fail a request over it
            log.debug("last_seen_at not recorded: %s", type(exc).__name__)


class AuthPolicy:
    def __init__(self, allow_open: bool):
        self.allow_open = allow_open
        self._lock = threading.Lock()
        self._checked_at = 0.0
        self._open = allow_open
        self._warned = False
        self.last_seen = LastSeen()

    def runs_open(self, session: Session) -> bool:
        """Open only while no key was ever issued; the first `ultron agents create` closes it for good."""
        if not self.allow_open:
            return False
        with self._lock:
            if self._open and time.monotonic() - self._checked_at > _KEY_COUNT_TTL_SECONDS:
                self._open = count_issued_keys(session) == 0
                self._checked_at = time.monotonic()
                if not self._open:
                    log.warning("an API key exists: open mode is off for good, every request needs a key")
            if self._open and not self._warned:
                self._warned = True
                log.warning(
                    "SERVING OPEN: no API key was ever created, so key-less requests on loopback act as "
                    "the admin agent 'local'. Create a key with `ultron agents create NAME` to close it."
                )
            return self._open

    def actor(self, request: Request, session: Session) -> Actor:
        header = request.headers.get("authorization", "")
        scheme, _, key = header.partition(" ")
        if header and (scheme.lower() != "bearer" or not key.strip()):
            raise Unauthorized("Authorization header must be 'Bearer <api key>'")
        if key.strip():
            return authenticate(session, key.strip())
        if self.runs_open(session):
            return local_actor(session)
        raise Unauthorized(
            "missing API key: send 'Authorization: Bearer <key>' (create one with "
            "`ultron agents create NAME`)"
        )
