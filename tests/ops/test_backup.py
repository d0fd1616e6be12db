"""`ultron backup` / `ultron restore`: a populated database survives the round trip row for row."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.conftest import _libpq
from ultron.memory.schemas import UploadRequest
from ultron.tenancy import create_agent, local_actor

FACTS = [
    ("ModuleNotFoundError: No module named 'pandas'", "pip install pandas"),
    ("psql: FATAL too many connections for role", "put pgbouncer in front; lower the pool size"),
    ("git push rejected: non-fast-forward", "git pull --rebase, then push"),
    ("容器内时区错误导致日志时间偏移八小时", "设置 TZ=Asia/Shanghai 并重建镜像"),
]


def _cli(db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ULTRON_DATABASE_URL": db_url, "ULTRON_EMBEDDING_PROVIDER": "hash"}
    return subprocess.run(
        [sys.executable, "-m", "ultron.cli", *args], env=env, capture_output=True, text=True, timeout=120
    )


def _tables(conn: psycopg.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
    ).fetchall()
    return [r[0] for r in rows]


def _fingerprint(url: str) -> dict[str, tuple[int, str]]:
    """Row count and an order-independent digest of every row of every table."""
    out = {}
    with psycopg.connect(url) as conn:
        for table in _tables(conn):
            digest = "md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), ''))"
            count, digest = conn.execute(f'SELECT count(*), {digest} FROM "{table}" t').fetchone()  # type: ignore[misc]
            out[table] = (count, digest)
    return out


@pytest.fixture()
def empty_db(pg_server_url: str) -> Iterator[str]:
    name = f"ultron_restore_{os.getpid()}"
    admin = _libpq(pg_server_url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield _libpq(pg_server_url, name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture()
def populated(hub, db_url: str) -> str:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        create_agent(s, "ci-bot", "acme")
        actor = local_actor(s)
        for content, resolution in FACTS:
            hub.memory.upload(s, actor, UploadRequest(content=content, resolution=resolution, tags=["ops"]))
        # A second copy merges: the round trip must keep contributions and hit counts too.
        hub.memory.upload(s, actor, UploadRequest(content=FACTS[0][0], resolution=FACTS[0][1]))
    hub.hits.flush()
    return db_url


def test_backup_then_restore_into_an_empty_database_keeps_every_row(populated, empty_db, tmp_path):
    dump = tmp_path / "ultron.dump"
    backed = _cli(populated, "db", "backup", str(dump))
    assert backed.returncode == 0, backed.stderr
    assert "4 memories" in backed.stdout and dump.stat().st_size > 0
    assert not list(tmp_path.glob("*.partial"))

    restored = _cli(empty_db, "db", "restore", str(dump))
    assert restored.returncode == 0, restored.stderr
    assert "4 memories" in restored.stdout and "db upgrade" not in restored.stdout

    before, after = _fingerprint(populated), _fingerprint(empty_db)
    assert before["memories"][0] == 4 and before["memory_contributions"][0] == 5
    assert after == before


def test_restored_database_serves_search(populated, empty_db, tmp_path, settings):
    from ultron.config import Settings
    from ultron.hub import Hub

    dump = tmp_path / "ultron.dump"
    assert _cli(populated, "db", "backup", str(dump)).returncode == 0
    assert _cli(empty_db, "db", "restore", str(dump)).returncode == 0
    hub = Hub.open(Settings.model_validate({**settings.model_dump(), "database_url": empty_db}))
    try:
        with hub.db.session() as s:
            results = hub.memory.search(s, local_actor(s), "too many connections pgbouncer")
        assert results and "too many connections" in results[0].record.summary_l0
    finally:
        hub.close()


def test_restore_refuses_a_database_that_already_holds_ultron_unless_clean(populated, tmp_path):
    dump = tmp_path / "ultron.dump"
    assert _cli(populated, "db", "backup", str(dump)).returncode == 0
    before = _fingerprint(populated)
    with psycopg.connect(populated) as conn:
        conn.execute("DELETE FROM memory_contributions")
        conn.execute("DELETE FROM memories WHERE content LIKE 'git push%'")

    refused = _cli(populated, "db", "restore", str(dump))
    assert refused.returncode == 1 and "--clean" in refused.stderr
    assert _fingerprint(populated)["memories"][0] == 3

    replaced = _cli(populated, "db", "restore", "--clean", str(dump))
    assert replaced.returncode == 0, replaced.stderr
    assert _fingerprint(populated) == before


def test_restore_of_a_file_that_is_not_a_dump_changes_nothing(populated, tmp_path):
    junk = tmp_path / "junk.dump"
    junk.write_text("not a dump")
    before = _fingerprint(populated)
    failed = _cli(populated, "db", "restore", "--clean", str(junk))
    assert failed.returncode == 1 and "pg_restore failed" in failed.stderr
    assert _fingerprint(populated) == before
    missing = _cli(populated, "db", "restore", str(Path(tmp_path / "nope.dump")))
    assert missing.returncode == 2 and "no backup" in missing.stderr
