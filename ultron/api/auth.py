"""Bearer API keys. On loopback with no key created yet, the hub may run open as the local agent."""

from __future__ import annotations

import ipaddress
import threading
import time

from fastapi import Request
from sqlalchemy.orm import Session

from ultron.errors import Unauthorized
from ultron.tenancy import Actor, authenticate, count_active_keys, local_actor

# How long the "are there any keys?" answer is trusted before asking the database again.
_KEY_COUNT_TTL_SECONDS = 5.0


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class AuthPolicy:
    def __init__(self, allow_open: bool):
        self.allow_open = allow_open
        self._lock = threading.Lock()
        self._checked_at = 0.0
        self._open = allow_open

    def runs_open(self, session: Session) -> bool:
        """Open only while no agent key exists; the first `ultron agents create` closes it."""
        if not self.allow_open:
            return False
        with self._lock:
            if time.monotonic() - self._checked_at > _KEY_COUNT_TTL_SECONDS:
                self._open = count_active_keys(session) == 0
                self._checked_at = time.monotonic()
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
