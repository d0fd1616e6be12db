"""Engine, session scope, read replicas and start-up checks.

Reads and writes: `Database.session()` is the primary (every write, the dedup probe, authentication,
the worker). `Database.read(fn, key)` runs a read-only `fn` on a streaming replica when one is configured
and able to serve it (docs/operations.md#read-replicas):

- replicas are taken in turn (round robin); one whose connection fails is skipped for
  `database_replica_cooldown_seconds` (logged), and the read runs again on the primary, so the caller
  sees no error;
- read-your-writes: after a write transaction `Database.wrote(key)` records the primary's WAL position
  (`pg_current_wal_lsn()`, after the commit) for the writer. Until a replica has replayed past that
  position (`pg_last_wal_replay_lsn()`, asked of the replica in the read's own transaction only while the
  last replay position seen there is behind), that writer's reads go to the primary. Everyone else may
  read a replica's slightly older snapshot.
"""

from __future__ import annotations

import itertools
import logging
import select
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from ultron.config import Settings
from ultron.db.queries import all_queries, q
from ultron.errors import DatabaseSetupError
from ultron.observability.metrics import DB_READS, register_queue_probe

log = logging.getLogger(__name__)

T = TypeVar("T")

# Seconds a replica's connection attempt may take before the read goes to the primary.
REPLICA_CONNECT_TIMEOUT_S = 3
# Writers whose position is remembered for read-your-writes; past it the oldest entries are dropped
# (their reads then go to a replica that may not have replayed their last write yet).
MAX_TRACKED_WRITERS = 100_000
# A pooled connection back in use within this many seconds of its last use, whose socket has nothing to
# read, is not pinged at checkout (_ping_when_stale).
PING_AFTER_IDLE_S = 5.0
_RETURNED = "ultron_returned_at"


def _normalize_url(url: str) -> str:
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def _register_vector(dbapi_conn: psycopg.Connection[Any], _record: object) -> None:
    # start-up: pgvector's psycopg adapter (numpy) loads with the first connection
    from pgvector.psycopg import register_vector

    try:
        register_vector(dbapi_conn)
    except Exception:  # noqa: BLE001 - the extension is created by the first migration
        log.debug("vector type not registered yet on this connection")


def _unread(dbapi_conn: psycopg.Connection[Any]) -> bool:
    """Whether an idle connection's socket has something to read: the server ended the session (restart,
    shutdown, pg_terminate_backend, idle_session_timeout: it sends its FATAL message and closes, or the
    socket is at end of file). A healthy idle session has nothing to say: every reply was read with its
    query. One poll with a zero timeout, no round trip."""
    try:
        fd = dbapi_conn.fileno()
    except psycopg.Error:
        return True
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
        return bool(poller.poll(0))
    return bool(select.select([fd], [], [], 0)[0])  # pragma: no cover - platforms without poll()


def _ping_when_stale(engine: Engine) -> None:
    """The pool's pre-ping, only where it can find something: a `SELECT 1` at checkout costs a round trip
    (~0.3 ms of a 5-10 ms search or upload). A connection is pinged when it is new to this check, was
    idle PING_AFTER_IDLE_S or more, is closed or broken, or its socket has something to read (the server
    ended the session: _unread). A failed ping raises DisconnectionError, and the pool replaces the
    connection (up to three tries), as SQLAlchemy's own pre-ping does. Not caught: a server that vanished
    without closing its end (a network partition) within the idle window; the statement then fails and
    the pool's disconnect handling replaces every idle connection."""

    @event.listens_for(engine, "checkout")
    def _checkout(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        returned = record.info.get(_RETURNED)
        fresh = returned is not None and time.monotonic() - returned < PING_AFTER_IDLE_S
        if fresh and not dbapi_conn.closed and not dbapi_conn.broken and not _unread(dbapi_conn):
            return
        try:
            engine.dialect.do_ping(dbapi_conn)
        except Exception as exc:  # noqa: BLE001 - any failure of the ping means a connection to replace
            raise DisconnectionError(f"pooled connection failed its ping: {exc}") from exc

    @event.listens_for(engine, "checkin")
    def _checkin(_dbapi_conn: Any, record: Any) -> None:
        record.info[_RETURNED] = time.monotonic()


def lsn_value(lsn: str | None) -> int | None:
    """A pg_lsn's text ('16/B374D848') as a comparable integer."""
    if lsn is None:
        return None
    high, _, low = lsn.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


def lsn_text(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def _make_engine(
    url: str,
    *,
    pool_size: int,
    pool_timeout: float,
    idle_session_timeout: float,
    ef_search: int,
    connect_timeout: int | None = None,
) -> Engine:
    connect_args: dict[str, object] = {
        "options": f"-c hnsw.ef_search={ef_search} -c hnsw.iterative_scan=relaxed_order"
        f" -c idle_session_timeout={int(idle_session_timeout * 1000)}"
    }
    if connect_timeout is not None:
        connect_args["connect_timeout"] = connect_timeout
    engine = create_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        # Waiting longer for a free connection only queues requests: past it they answer 503.
        pool_timeout=pool_timeout,
        # Pre-ping only a connection that may be stale (_ping_when_stale), not every checkout.
        pool_pre_ping=False,
        # A pooled connection lives at most this long (then it is replaced at its next checkout): a
        # smart shutdown of Postgres waits for every session to end, busy ones included.
        pool_recycle=max(1.0, idle_session_timeout) if idle_session_timeout > 0 else 1800,
        # HNSW: look at more neighbours than the default 40 and keep scanning past filtered-out rows.
        # idle_session_timeout: the server closes a pooled connection idle this long, so a smart
        # shutdown (SIGTERM) of Postgres completes instead of waiting on the pool forever; the checkout's
        # ping (_ping_when_stale) replaces a closed connection on its next use (and fails, as 503, while
        # the server is shutting down).
        connect_args=connect_args,
    )
    event.listen(engine, "connect", _register_vector)
    _ping_when_stale(engine)
    return engine


@contextmanager
def _scope(sessions: sessionmaker[Session]) -> Iterator[Session]:
    session = sessions()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


class _Behind(Exception):
    """The replica has not replayed the reader's last write yet."""


class Replica:
    """One streaming replica: its engine, its health and the last replay position seen there."""

    def __init__(self, index: int, engine: Engine):
        self.index = index
        self.engine = engine
        self.sessions = sessionmaker(engine, expire_on_commit=False)
        self.down_until = 0.0  # time.monotonic() before which reads skip it
        self.replayed = -1  # pg_last_wal_replay_lsn() as last seen, as an integer
        self.reads = 0  # reads it served (tests, /metrics)
        self.failures = 0

    def display_url(self) -> str:
        return make_url(self.engine.url).render_as_string(hide_password=True)


class Database:
    """One engine per process (plus one per read replica); sessions are scoped to a request or a job."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        embedded_dir: Path | None = None,
        ef_search: int = 100,
        pool_timeout: float = 5.0,
        idle_session_timeout: float = 60.0,
        replica_urls: list[str] | tuple[str, ...] = (),
        replica_cooldown: float = 30.0,
    ):
        self.url = _normalize_url(url)
        self.embedded_dir = embedded_dir
        options = {
            "pool_size": pool_size,
            "pool_timeout": pool_timeout,
            "idle_session_timeout": idle_session_timeout,
            "ef_search": ef_search,
        }
        self.engine: Engine = _make_engine(self.url, **options)  # type: ignore[arg-type]
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self.replicas = [
            Replica(i, _make_engine(_normalize_url(u), connect_timeout=REPLICA_CONNECT_TIMEOUT_S, **options))  # type: ignore[arg-type]
            for i, u in enumerate(replica_urls)
        ]
        self.replica_cooldown = replica_cooldown
        self.primary_reads = 0  # reads the primary served (no replica, a writer's own, a fallback)
        self._turn = itertools.count()
        self._written: dict[Hashable, int] = {}  # writer -> primary WAL position after its last write
        self._lock = threading.Lock()

    @contextmanager
    def session(self) -> Iterator[Session]:
        """The transaction scope on the primary: commit on success, roll back on error. Services never
        commit."""
        with _scope(self._sessions) as session:
            yield session

    @contextmanager
    def autocommit_session(self) -> Iterator[Session]:
        """A session on the primary whose statements each commit on their own: no BEGIN and no COMMIT,
        so a one-statement read (a request's authentication) is one round trip instead of three. For reads
        and idempotent writes only: there is no transaction to roll back."""
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            session = Session(bind=conn, expire_on_commit=False)
            try:
                yield session
            finally:
                session.close()

    # --- read replicas -------------------------------------------------------------------------

    def wrote(self, key: Hashable) -> int | None:
        """After `key` (an agent) committed a write: its reads stay on the primary until a replica has
        replayed this far. One round trip on the primary, and only when replicas are configured.
        Returns the position (None without replicas): an HTTP client carries it to other API processes."""
        if not self.replicas:
            return None
        lsn: int | None = None
        try:
            with self.engine.connect() as conn:
                lsn = lsn_value(conn.execute(text("SELECT pg_current_wal_lsn()::text")).scalar_one())
        except (OperationalError, InterfaceError):
            log.warning("could not read the primary's WAL position; this writer's reads stay on the primary")
        with self._lock:
            self._written.pop(key, None)  # re-inserted last: the dict's order is the order of writes
            # Unknown: a position no replica reaches, until the writer's next write replaces it.
            self._written[key] = (1 << 64) if lsn is None else lsn
            while len(self._written) > MAX_TRACKED_WRITERS:
                del self._written[next(iter(self._written))]
        return lsn

    def _pick(self) -> Replica | None:
        now = time.monotonic()
        n = len(self.replicas)
        for _ in range(n):
            replica = self.replicas[next(self._turn) % n]
            if replica.down_until <= now:
                return replica
        return None

    def _down(self, replica: Replica, exc: BaseException) -> None:
        replica.failures += 1
        replica.down_until = time.monotonic() + self.replica_cooldown
        log.warning(
            "read replica %d (%s) failed (%s); reads go to the primary for %.0fs",
            replica.index,
            replica.display_url(),
            type(getattr(exc, "orig", None) or exc).__name__,
            self.replica_cooldown,
        )

    def _forget_replayed(self) -> None:
        """Drop writers every replica has replayed past (their reads need the primary no more)."""
        floor = min(r.replayed for r in self.replicas)
        with self._lock:
            done = [k for k, lsn in self._written.items() if lsn <= floor]
            for k in done:
                del self._written[k]

    def read(self, fn: Callable[[Session], T], key: Hashable | None = None, *, after: int | None = None) -> T:
        """Run the read-only `fn` on a replica that can serve `key` (the reading agent) and has replayed
        past `after` (a WAL position the client saw after its write, maybe on another API process), else
        on the primary. A replica that fails is skipped for a while and `fn` runs again on the primary."""
        replica = self._pick() if self.replicas else None
        reason = "no_replica" if replica is None else "own_write"
        if replica is not None:
            with self._lock:
                needed = self._written.get(key) if key is not None else None
            if after is not None:
                needed = after if needed is None else max(needed, after)
            try:
                with _scope(replica.sessions) as session:
                    if needed is not None and replica.replayed < needed:
                        # Ask the replica itself, in the transaction that will serve the read: what this
                        # snapshot sees was replayed by then.
                        replayed = session.execute(text("SELECT pg_last_wal_replay_lsn()::text")).scalar()
                        replica.replayed = max(replica.replayed, lsn_value(replayed) or -1)
                        if replica.replayed < needed:
                            raise _Behind
                        self._forget_replayed()
                    result = fn(session)
            except _Behind:
                pass
            except (OperationalError, InterfaceError) as exc:
                self._down(replica, exc)
                reason = "replica_failed"
            except BaseException:
                replica.reads += 1  # the replica answered: a 404, a validation error
                DB_READS.labels("replica", "").inc()
                raise
            else:
                replica.reads += 1
                DB_READS.labels("replica", "").inc()
                return result
        self.primary_reads += 1
        DB_READS.labels("primary", reason).inc()
        with self.session() as session:
            return fn(session)

    def check_replicas(self) -> None:
        """At start-up: say which replicas answer and warn about one that is not a standby."""
        for replica in self.replicas:
            try:
                with replica.engine.connect() as conn:
                    standby = conn.execute(text("SELECT pg_is_in_recovery()")).scalar()
            except (OperationalError, InterfaceError) as exc:
                self._down(replica, exc)
                continue
            if standby:
                log.info("read replica %d: %s", replica.index, replica.display_url())
            else:
                log.warning(
                    "read replica %d (%s) is not in recovery (a primary, or promoted): it does not follow "
                    "this database's writes; reads of recent writers will skip it",
                    replica.index,
                    replica.display_url(),
                )

    def display_url(self) -> str:
        return make_url(self.url).render_as_string(hide_password=True)

    def dispose(self) -> None:
        self.engine.dispose()
        for replica in self.replicas:
            replica.engine.dispose()
        if self.embedded_dir is not None:
            # start-up: the embedded server's module only when this database runs one
            from ultron.db.embedded import stop_embedded

            stop_embedded(self.embedded_dir)


def resolve_url(settings: Settings) -> tuple[str, Path | None]:
    if settings.database_url is not None:
        return settings.database_url.get_secret_value(), None
    # start-up: the embedded server's module only when no database URL is given
    from ultron.db.embedded import start_embedded

    return (
        start_embedded(settings.data_dir, shared_buffers=settings.embedded_shared_buffers),
        settings.data_dir,
    )


def ensure_vector_extension(engine: Engine, extension: str = "vector") -> None:
    with engine.begin() as conn:
        have = conn.execute(
            text("SELECT 1 FROM pg_available_extensions WHERE name = :e"), {"e": extension}
        ).first()
        if have is None:
            raise DatabaseSetupError(
                f"the PostgreSQL server has no {extension!r} extension (pgvector). Install pgvector on that "
                "server (https://github.com/pgvector/pgvector), use an image such as pgvector/pgvector, "
                "or unset ULTRON_DATABASE_URL to use the embedded server."
            )
        conn.execute(text(f'CREATE EXTENSION IF NOT EXISTS "{extension}"'))
    # Connections opened before the extension existed have no vector adapter.
    engine.dispose()


def open_database(settings: Settings, *, migrate: bool = True) -> Database:
    """Connect (starting the embedded server if no URL is set), check pgvector, migrate to head."""
    url, embedded_dir = resolve_url(settings)
    db = Database(
        url,
        pool_size=settings.db_pool_size,
        embedded_dir=embedded_dir,
        ef_search=settings.hnsw_ef_search,
        pool_timeout=settings.db_pool_timeout,
        idle_session_timeout=settings.db_idle_session_timeout,
        replica_urls=settings.replica_urls(),
        replica_cooldown=settings.database_replica_cooldown_seconds,
    )
    try:
        ensure_vector_extension(db.engine)
        if migrate:
            # start-up: alembic loads only when this process migrates
            from ultron.db.migrate import upgrade_to_head

            upgrade_to_head(db.engine)
        db.check_replicas()
    except BaseException:
        db.dispose()
        raise
    return db


def worker_queue_depths(session: Session) -> dict[str, int]:
    """Items of each worker queue not yet done and not parked: ready, backing off or leased."""
    depths: dict[str, int] = {}
    for row in session.execute(q("queue_depths"), {"tenant_id": None}):
        depths[row.queue] = depths.get(row.queue, 0) + row.ready + row.waiting + row.leased
    return depths


if "queue_depths" in all_queries():  # the worker's SQL ships with the package: `/metrics` reports its queues
    register_queue_probe("worker", worker_queue_depths)
