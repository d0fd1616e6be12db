"""Real Postgres for every test: the embedded server (or ULTRON_TEST_DATABASE_URL), migrated once into a
template database; each test that needs the database gets its own clone of the template."""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from ultron.config import Settings

TEMPLATE = "ultron_test_template"
_counter = itertools.count()

pytest_plugins = ["tests.fakes.fixtures"]


def _libpq(url: str, database: str | None = None) -> str:
    u = make_url(url)
    if database is not None:
        u = u.set(database=database)
    return u.set(drivername="postgresql").render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    """A server URL (any database on it) the tests may create databases on."""
    given = os.environ.get("ULTRON_TEST_DATABASE_URL")
    if given:
        yield given
        return
    from ultron.db.embedded import start_embedded, stop_embedded

    data_dir = Path(tempfile.mkdtemp(prefix="ultron-test-"))
    os.chmod(data_dir, 0o755)
    try:
        yield start_embedded(data_dir)
    finally:
        stop_embedded(data_dir)
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def template_db(pg_server_url: str) -> str:
    """Create and migrate the template database once per run."""
    from ultron.db.engine import Database, ensure_vector_extension
    from ultron.db.migrate import upgrade_to_head

    with psycopg.connect(_libpq(pg_server_url), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {TEMPLATE}")
    db = Database(_libpq(pg_server_url, TEMPLATE), pool_size=1)
    try:
        ensure_vector_extension(db.engine)
        upgrade_to_head(db.engine)
    finally:
        db.engine.dispose()
    return TEMPLATE


@pytest.fixture()
def db_url(pg_server_url: str, template_db: str) -> Iterator[str]:
    """A fresh database cloned from the migrated template."""
    name = f"ultron_t{os.getpid()}_{next(_counter)}"
    admin = _libpq(pg_server_url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE {template_db}")
    try:
        yield _libpq(pg_server_url, name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture()
def settings(db_url: str, tmp_path: Path) -> Settings:
    return Settings(
        database_url=db_url,
        data_dir=tmp_path,
        embedding_provider="hash",
        # The tests' one-line memories share few hashed words: hash's default join threshold (0.3, set on
        # multi-field memories) would leave the skill tests' topics below five members a cluster.
        cluster_similarity_threshold=0.15,
        llm_provider="heuristic",
        llm_timeout=0.5,
        llm_max_retries=1,
        llm_retry_base_delay=0.01,
    )


@pytest.fixture()
def make_hub(settings: Settings):  # type: ignore[no-untyped-def]
    from ultron.hub import Hub

    opened: list[Hub] = []

    def _make(**overrides: object) -> Hub:
        hub = Hub.open(Settings.model_validate({**settings.model_dump(), **overrides}))
        opened.append(hub)
        return hub

    yield _make
    for hub in opened:
        hub.close()


@pytest.fixture()
def hub(make_hub):  # type: ignore[no-untyped-def]
    return make_hub()
