"""Keeps each tenant's term statistics (the lexical ranker's IDF, term_stats / term_totals) fresh.

The statistics are rebuilt per tenant by one SQL function (ultron_refresh_term_stats, migration 0010,
ts_stat over the tenant's active memories). The worker's cycle rebuilds every tenant; between cycles this
keeper counts the memories a hub process creates or rewrites and, once a tenant has changed by
`max(MIN_CHANGES, SHARE x its size at the last rebuild)`, rebuilds it on a background thread, off the
request path (a process that has not rebuilt a tenant yet counts its size as 0: the first rebuild comes
after MIN_CHANGES uploads, so a handful of uploads never triggers a background write). Stale statistics
only blur IDF (a new term counts as rare); with none yet every term weighs the same. They never hide a
memory.

The same pass keeps the planner's own statistics from falling far behind a bulk load: autovacuum analyzes
a table at most once a minute, and a table analyzed while it held a few rows is estimated near that size,
so an upload's probes planned from it sort every row instead of walking the HNSW index (a 500-item batch
into 3k memories: 41 ms a memory instead of 9.5; docs/benchmarks.md, stop 20). When one tenant alone holds
more than STALE_FACTOR times the table's row estimate, the keeper analyzes the tables the probes read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from uuid import UUID

from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from ultron.db.engine import Database
from ultron.db.queries import q

log = logging.getLogger(__name__)

MIN_CHANGES = 20
SHARE = 0.05
# The planner's statistics are refreshed (ANALYZE) when a tenant holds this many times the table's row
# estimate, and at least STALE_MIN memories (below that any plan is cheap).
STALE_FACTOR = 2.0
STALE_MIN = 200
ANALYZE_LOCK_TIMEOUT = "2s"
LOCK_NOT_AVAILABLE = "55P03"


class TermStatsKeeper:
    def __init__(self, db: Database):
        self.db = db
        self._changes: dict[UUID, int] = {}
        self._size: dict[UUID, int] = {}
        self._dirty: set[UUID] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._analyze = True  # off for good once the server refuses (a role that does not own the tables)
        self.analyzed = 0
        # called with a tenant's id once its statistics were rebuilt, with None once the tables were analyzed
        self._listeners: list[Callable[[UUID | None], None]] = []

    def listen(self, listener: Callable[[UUID | None], None]) -> None:
        """Call `listener(tenant_id)` after each rebuild of a tenant's statistics and `listener(None)` after
        each ANALYZE: what was decided from the old statistics (whether a tenant's probes walk the HNSW
        index, ultron/db/plans.py) is read again. Without it a tenant whose first upload found no statistics
        kept probing by sorting all its rows for 10 s: a 500-item batch into 1.5k memories spent 4.2 ms an
        item on its probes instead of 0.4."""
        self._listeners.append(listener)

    def _tell(self, tenant_id: UUID | None) -> None:
        for listener in self._listeners:
            listener(tenant_id)

    def analyze(self) -> None:
        """ANALYZE the tables an upload's probes read, in a transaction of its own. It waits at most
        ANALYZE_LOCK_TIMEOUT for a VACUUM or ANALYZE already running on them (autovacuum's: then the next
        rebuild tries again); a server that refuses it for good (a role that does not own the tables) is
        not asked again."""
        try:
            with self.db.session() as session:
                session.execute(text(f"SET LOCAL lock_timeout = '{ANALYZE_LOCK_TIMEOUT}'"))
                session.execute(q("analyze_probed_tables"))
        except Exception as exc:
            if (
                isinstance(exc, OperationalError)
                and getattr(exc.orig, "sqlstate", None) == LOCK_NOT_AVAILABLE
            ):
                log.info("ANALYZE of the memory tables waited too long for another; the next rebuild retries")
                return
            log.warning("ANALYZE of the memory tables failed; leaving it to autovacuum", exc_info=True)
            self._analyze = False
            return
        self.analyzed += 1
        self._tell(None)

    def changed(self, tenant_id: UUID, n: int = 1) -> None:
        """Called after a memory of the tenant was created or its text rewritten."""
        with self._lock:
            self._changes[tenant_id] = self._changes.get(tenant_id, 0) + n
            size = self._size.get(tenant_id, 0)
            due = self._changes[tenant_id] >= max(MIN_CHANGES, SHARE * size)
            if due:
                self._dirty.add(tenant_id)
        if due:
            self._wake.set()

    def refresh(self, tenant_id: UUID) -> int:
        """Rebuild one tenant's statistics now, in its own transaction; returns the number of lexemes."""
        with self.db.session() as session:
            lexemes = int(
                session.execute(q("refresh_term_stats"), {"tenant_id": tenant_id}).scalar_one() or 0
            )
            # its count as just rebuilt, and the planner's row estimate of the table
            share = session.execute(q("tenant_share"), {"tenant_id": tenant_id}).one()
        docs = int(share.docs or 0)
        if self._analyze and docs >= STALE_MIN and docs > STALE_FACTOR * max(float(share.rows), 1.0):
            self.analyze()
        with self._lock:
            self._changes[tenant_id] = 0
            self._size[tenant_id] = docs
        self._tell(tenant_id)
        return lexemes

    def flush(self) -> None:
        with self._lock:
            dirty, self._dirty = self._dirty, set()
        for tenant_id in dirty:
            try:
                self.refresh(tenant_id)
            except Exception:  # the next change retries; search keeps the old statistics meanwhile
                log.exception("refreshing term statistics of tenant %s failed", tenant_id)
                with self._lock:
                    self._dirty.add(tenant_id)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="ultron-term-stats", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(timeout=5.0)
            self._wake.clear()
            # Let the upload that asked commit first (the rebuild reads committed memories only).
            self._stop.wait(0.5)
            if self._dirty:
                self.flush()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
