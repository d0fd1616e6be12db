"""Search hits are written off the request path.

A search returns as soon as it has ranked; its hits (+1 per returned memory) and its activity record go
into an in-process buffer that a background thread writes every `hit_flush_seconds` through the same SQL
function as every other hit (`ultron_record_hits`, which applies the once-per-agent-per-window rule), and
at shutdown. A crash can lose at most one interval of search telemetry; memories are never at risk.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from uuid import UUID

from sqlalchemy import text

from ultron.db.engine import Database
from ultron.db.queries import q

log = logging.getLogger(__name__)

# Past this many buffered searches (database down for long), the oldest are dropped with a warning.
MAX_PENDING_SEARCHES = 100_000


@dataclass(frozen=True)
class SearchUse:
    tenant_id: UUID
    agent_id: UUID | None
    memory_ids: tuple[UUID, ...]


class HitBuffer:
    def __init__(self, db: Database, window_seconds: float, flush_seconds: float = 1.0):
        self.db = db
        self.window_seconds = window_seconds
        self.flush_seconds = flush_seconds
        self._pending: list[SearchUse] = []
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, use: SearchUse) -> None:
        with self._lock:
            self._pending.append(use)
            if len(self._pending) > MAX_PENDING_SEARCHES:
                dropped = len(self._pending) - MAX_PENDING_SEARCHES
                del self._pending[:dropped]
                log.warning("search-hit buffer full: dropped the %d oldest searches", dropped)

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def flush(self) -> int:
        """Write every buffered search; returns how many. On failure they stay buffered for the next try."""
        with self._flush_lock:
            with self._lock:
                batch, self._pending = self._pending, []
            if not batch:
                return 0
            try:
                self._write(batch)
            except Exception:
                log.exception("writing %d buffered searches failed; will retry", len(batch))
                with self._lock:
                    self._pending[:0] = batch
                return 0
            return len(batch)

    def _write(self, batch: list[SearchUse]) -> None:
        with self.db.session() as session:
            for use in batch:
                if use.memory_ids:
                    session.execute(
                        q("record_hits"),
                        {
                            "tenant_id": use.tenant_id,
                            "agent_id": use.agent_id,
                            "memory_ids": list(use.memory_ids),
                            "signal": "search",
                            "weight": 1,
                            "window_seconds": self.window_seconds,
                        },
                    )
            session.execute(
                text(
                    "INSERT INTO activity_events (tenant_id, agent_id, kind, detail) "
                    "VALUES (:tenant_id, :agent_id, 'search', jsonb_build_object('results', :results))"
                ),
                [
                    {"tenant_id": u.tenant_id, "agent_id": u.agent_id, "results": len(u.memory_ids)}
                    for u in batch
                ],
            )

    def start(self) -> None:
        if self._thread is None and self.flush_seconds > 0:
            self._thread = threading.Thread(target=self._run, name="ultron-hit-flush", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.flush_seconds):
            self.flush()

    def stop(self) -> None:
        """Stop the flusher and write what is left."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self.flush()
