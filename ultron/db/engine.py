"""Engine, session scope and start-up checks."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.orm import Session, sessionmaker

from ultron.config import Settings
from ultron.errors import DatabaseSetupError

log = logging.getLogger(__name__)


def _normalize_url(url: str) -> str:
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def _register_vector(dbapi_conn: object, _record: object) -> None:
    from pgvector.psycopg import register_vector

    try:
        register_vector(dbapi_conn)
    except Exception:  # noqa: BLE001 - the extension is created by the first migration
        log.debug("vector type not registered yet on this connection")


class Database:
    """One engine per process; sessions are scoped to a request or a worker job."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        embedded_dir: Path | None = None,
        ef_search: int = 100,
        pool_timeout: float = 5.0,
        idle_session_timeout: float = 60.0,
    ):
        self.url = _normalize_url(url)
        self.embedded_dir = embedded_dir
        self.engine: Engine = create_engine(
            self.url,
            pool_size=pool_size,
            max_overflow=pool_size,
            # Waiting longer for a free connection only queues requests: past it they answer 503.
            pool_timeout=pool_timeout,
            pool_pre_ping=True,
            # A pooled connection lives at most this long (then it is replaced at its next checkout): a
            # smart shutdown of Postgres waits for every session to end, busy ones included.
            pool_recycle=max(1.0, idle_session_timeout) if idle_session_timeout > 0 else 1800,
            # HNSW: look at more neighbours than the default 40 and keep scanning past filtered-out rows.
            # idle_session_timeout: the server closes a pooled connection idle this long, so a smart
            # shutdown (SIGTERM) of Postgres completes instead of waiting on the pool forever; the pool's
            # pre-ping replaces a closed connection on its next use (and fails, as 503, while the server
            # is shutting down).
            connect_args={
                "options": f"-c hnsw.ef_search={ef_search} -c hnsw.iterative_scan=relaxed_order"
                f" -c idle_session_timeout={int(idle_session_timeout * 1000)}"
            },
        )
        event.listen(self.engine, "connect", _register_vector)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """The transaction scope: commit on success, roll back on error. Services never commit."""
        session = self._sessions()
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    def display_url(self) -> str:
        return make_url(self.url).render_as_string(hide_password=True)

    def dispose(self) -> None:
        self.engine.dispose()
        if self.embedded_dir is not None:
            from ultron.db.embedded import stop_embedded

            stop_embedded(self.embedded_dir)


def resolve_url(settings: Settings) -> tuple[str, Path | None]:
    if settings.database_url is not None:
        return settings.database_url.get_secret_value(), None
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
    )
    try:
        ensure_vector_extension(db.engine)
        if migrate:
            from ultron.db.migrate import upgrade_to_head

            upgrade_to_head(db.engine)
    except BaseException:
        db.dispose()
        raise
    return db
