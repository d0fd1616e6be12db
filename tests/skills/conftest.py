"""Shared fixtures of the Skill Hub tests: 30 memories about three topics (docker build caching,
postgres locks, pytest fixtures), enough for one evolution cycle to publish three skills."""

from __future__ import annotations

import pytest

from ultron.hub import build_worker
from ultron.sdk import Ultron
from ultron.worker.evolution import run_evolution_cycle

DOCKER = [
    "docker build slow because the pip install layer cache is invalidated on every build",
    "docker image build reruns pip install each time: copy requirements.txt before the source",
    "docker layer cache misses after COPY of the whole repo; split COPY so pip install is cached",
    "CI docker build takes 10 minutes; enable BuildKit cache mounts for pip in the Dockerfile",
    "docker build cache busted by a changing .git folder; add .dockerignore for .git and venv",
    "multi-stage docker build: install pip wheels in a builder stage to keep the cache warm",
    "docker build on CI never hits the cache; pass --cache-from the previous image tag",
    "docker pip install layer rebuilt after touching README; order Dockerfile COPY steps by change rate",
    "docker buildx cache export to the registry makes pip install layers reusable across CI runners",
    "docker build cache invalidated by ARG with a timestamp; move the ARG below the pip install step",
]
POSTGRES = [
    "postgres ALTER TABLE hangs waiting for an ACCESS EXCLUSIVE lock behind a long transaction",
    "postgres migration blocked: set lock_timeout so ALTER TABLE fails fast instead of queueing",
    "postgres VACUUM FULL takes an exclusive lock on the table; use pg_repack on busy tables",
    "postgres CREATE INDEX locks writes; use CREATE INDEX CONCURRENTLY on production tables",
    "postgres lock queue: find the blocking pid with pg_blocking_pids and pg_stat_activity",
    "postgres idle in transaction sessions hold locks; set idle_in_transaction_session_timeout",
    "postgres deadlock detected between two updates; always lock rows in the same order",
    "postgres adding a column with a volatile default rewrites the table under an exclusive lock",
    "postgres long running analytics query blocks a migration's lock; cancel it with pg_cancel_backend",
    "postgres foreign key validation locks both tables; add the constraint NOT VALID then VALIDATE",
]
PYTEST = [
    "pytest fixture with scope=session leaks database state between tests; use function scope",
    "pytest tests pass alone but fail together: a module-scoped fixture mutates shared state",
    "pytest fixture teardown never runs because the fixture returns instead of yielding",
    "pytest parametrize ids unreadable; pass ids= to pytest.mark.parametrize for clear test names",
    "pytest conftest fixture not found from a sibling folder; move it to the shared conftest.py",
    "pytest monkeypatch of an environment variable leaks when set at import time; use the fixture",
    "pytest tmp_path fixture gives each test its own directory; stop writing to a shared /tmp path",
    "pytest xdist runs fail randomly: tests depend on execution order through a global fixture",
    "pytest capsys fixture shows nothing because the logger writes to stderr through a handler",
    "pytest autouse fixture slows the whole test suite; narrow it to the tests that need it",
]


@pytest.fixture()
def hub(make_hub):  # type: ignore[no-untyped-def]
    # Thirty distinct memories: near-duplicate merging (tested in tests/memory/) is kept out of the way.
    return make_hub(dedup_similarity_threshold=0.99, dedup_soft_threshold=0.99)


@pytest.fixture()
def stocked(hub):  # type: ignore[no-untyped-def]
    alice = Ultron(hub=hub, agent="alice")
    for text in DOCKER + POSTGRES + PYTEST:
        alice.upload_memory(text)
    build_worker(hub).run_cycle(("cluster",), quiet=True)  # the worker's tick: the uploads' clusters
    return alice


@pytest.fixture()
def published(hub, stocked):  # type: ignore[no-untyped-def]
    """Three skills, published by one evolution cycle (tenant 'default', agent alice uploaded)."""
    assert run_evolution_cycle(hub.db, hub.skills)["published"] == 3
    return stocked
