"""Demo data for the dashboard's browser tests and screenshots: a few agents, memories, uses and edits.

Everything goes through the real services (upload, search, details, edit), so the pages show what a hub
in use shows. `spread_days` then moves the rows' timestamps back over recent days, so the charts have a
history to draw; it is for demo databases only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import text

from ultron.hub import build_worker
from ultron.memory.schemas import MemoryPatch, UploadRequest
from ultron.tenancy import Actor, authenticate, create_agent
from ultron.worker.evolution import run_evolution_cycle

DEMO_MEMORIES: list[dict[str, Any]] = [
    {
        "content": "pip install failed with 'externally-managed-environment' on Debian 12",
        "context": "fresh python3.11 container, system pip",
        "resolution": "create a venv first: python3 -m venv .venv && . .venv/bin/activate",
        "tags": ["python", "pip", "debian"],
    },
    {
        "content": "Postgres connection refused after docker compose up: the app started before the database",
        "context": "docker compose with api and postgres services",
        "resolution": "add a healthcheck with pg_isready and depends_on condition: service_healthy",
        "tags": ["docker", "postgres"],
    },
    {
        "content": "Never commit .env files: an AWS key leaked through a pushed .env in a public repo",
        "context": "repository hygiene review",
        "resolution": "add .env to .gitignore, rotate the key, scan history with gitleaks",
        "tags": ["security", "git"],
    },
    {
        "content": "The user prefers answers in short bullet points with the command first",
        "context": "chat preferences",
        "resolution": "lead with the command, then at most three bullets",
        "tags": ["style"],
    },
    {
        "content": "Correction: the staging database is on port 5433, not 5432",
        "context": "deploy notes were wrong",
        "resolution": "use DATABASE_URL from the staging secret, port 5433",
        "tags": ["staging", "postgres"],
    },
    {
        "content": "Kubernetes pod CrashLoopBackOff caused by a missing ConfigMap key",
        "context": "deployment of the worker to the staging cluster",
        "resolution": "kubectl describe pod shows the missing key; add it to the ConfigMap and roll out",
        "tags": ["kubernetes", "deploy"],
    },
    {
        "content": "Pattern: retry HTTP 429 and 503 with exponential backoff and jitter, never 400",
        "context": "calling rate-limited model APIs",
        "resolution": "cap the backoff at 30 s and honour Retry-After",
        "tags": ["http", "retry"],
    },
    {
        "content": "npm ci fails with EINTEGRITY after switching registries",
        "context": "CI cache restored from another registry",
        "resolution": "delete node_modules and the npm cache, regenerate package-lock.json",
        "tags": ["npm", "ci"],
    },
    {
        "content": "SQL injection risk: string-formatted query built from a request parameter",
        "context": "code review of the reporting endpoint",
        "resolution": "use bound parameters; never f-strings for SQL",
        "tags": ["security", "sql"],
    },
    {
        "content": "Redis timeouts under load were the default pool of 10 connections",
        "context": "load test at 500 rps",
        "resolution": "raise max_connections to 100 and reuse one client per process",
        "tags": ["redis", "performance"],
    },
    {
        "content": "Team prefers squash merges and conventional commit titles",
        "context": "git workflow",
        "resolution": "use 'feat:', 'fix:', 'docs:' prefixes; squash on merge",
        "tags": ["git", "style"],
    },
    {
        "content": "Memory leak in the image worker: PIL images kept in a module-level cache",
        "context": "worker RSS grew 2 GB per day",
        "resolution": "bound the cache with functools.lru_cache(maxsize=256)",
        "tags": ["python", "memory-leak"],
    },
    {
        "content": "TLS handshake failed: certificate chain missing the intermediate",
        "context": "nginx in front of the API after renewing the certificate",
        "resolution": "serve fullchain.pem, not cert.pem",
        "tags": ["tls", "nginx"],
    },
    {
        "content": "Alembic autogenerate missed a server_default change",
        "context": "migration review",
        "resolution": "set compare_server_default=True and review the diff by hand",
        "tags": ["alembic", "migration"],
    },
    {
        "content": "Weekly running plan: long run on Sunday mornings, rest on Mondays",
        "context": "personal schedule shared with the assistant",
        "resolution": "do not book meetings before 10 on Sundays",
        "tags": ["life", "schedule"],
    },
    {
        "content": "Deadlock between two transactions updating accounts in different orders",
        "context": "payment batch job",
        "resolution": "always lock rows in primary-key order; retry on deadlock_detected",
        "tags": ["postgres", "deadlock"],
    },
    {
        "content": "GitHub Actions cache key must include the lock file hash",
        "context": "stale dependencies restored in CI",
        "resolution": "key: deps-${{ hashFiles('**/poetry.lock') }}",
        "tags": ["ci", "cache"],
    },
    {
        "content": "Deploy script printed the token: export "
        "GITHUB_TOKEN=ghp_4f8Kq2ZxY7mN1pL0aB3cD5eF6gH7iJ8kL9mN and paged ops at ops-oncall@example.com",
        "context": "CI log of the release job",
        "resolution": "mask secrets in CI logs (::add-mask::) and rotate the token",
        "tags": ["ci", "security"],
    },
    {
        "content": "Disk full on the build runner: docker images never pruned",
        "context": "self-hosted runner at 100% disk",
        "resolution": "nightly docker system prune -af --filter until=72h",
        "tags": ["docker", "disk"],
    },
]

# Three topics with enough memories each to crystallize into a skill on the first evolution cycle; the
# follow-ups then grow the docker cluster past the recrystallization delta, so its skill gets a 1.1.0.
DEMO_SKILL_MEMORIES: list[dict[str, Any]] = [
    {
        "content": "Docker build cache: CI build failed its time limit, every Python dependency reinstalled",
        "context": "docker build, Dockerfile copies the whole repository first",
        "resolution": "COPY requirements.txt and run pip install before copying the application code",
        "tags": ["docker"],
    },
    {
        "content": "Docker build cache: CI image builds take twelve minutes on every push",
        "context": "docker build, ephemeral GitHub Actions runners start with an empty layer cache",
        "resolution": "buildx with --cache-from and --cache-to type=gha shares layers between runs",
        "tags": ["docker", "ci"],
    },
    {
        "content": "Docker build cache busted by each commit",
        "context": "docker build, the .git folder is part of the build context",
        "resolution": "list .git, .venv and node_modules in .dockerignore",
        "tags": ["docker"],
    },
    {
        "content": "Docker build: all wheels downloaded again although requirements are unchanged",
        "context": "docker build, BuildKit enabled on the build host",
        "resolution": "RUN --mount=type=cache,target=/root/.cache/pip keeps downloaded packages "
        "between builds",
        "tags": ["docker"],
    },
    {
        "content": "Docker build cache: the dependency layer is rebuilt after editing README",
        "context": "docker build, single-stage Dockerfile",
        "resolution": "COPY requirements.txt and run pip install before copying the application code",
        "tags": ["docker"],
    },
    {
        "content": "Postgres schema migration: ALTER TABLE hung for minutes",
        "context": "postgres schema migration, a long report query held its table open during the deploy",
        "resolution": "SET lock_timeout = '5s' so the statement fails fast; retry it later",
        "tags": ["postgres"],
    },
    {
        "content": "Postgres schema migration: CREATE INDEX blocked writes to the orders table",
        "context": "postgres schema migration, busy production database",
        "resolution": "build it CONCURRENTLY, outside a transaction block",
        "tags": ["postgres"],
    },
    {
        "content": "Postgres schema migration: adding a foreign key stalled both tables",
        "context": "postgres schema migration, validation of forty million existing rows",
        "resolution": "ADD CONSTRAINT ... NOT VALID now, VALIDATE CONSTRAINT in a later step",
        "tags": ["postgres"],
    },
    {
        "content": "Postgres schema migration: waited forever behind an idle session",
        "context": "postgres schema migration, pgbouncer left a connection idle in transaction",
        "resolution": "find the blocker via pg_blocking_pids() and pg_stat_activity, then "
        "pg_terminate_backend",
        "tags": ["postgres"],
    },
    {
        "content": "Postgres schema migration: ADD COLUMN with a volatile default rewrote the table",
        "context": "postgres schema migration, large events table, deploy window exceeded",
        "resolution": "add the column bare, backfill in batches of 10k rows, set the default afterwards",
        "tags": ["postgres"],
    },
    {
        "content": "pytest fixture scope: cases pass alone but fail together",
        "context": "pytest fixture, a module-scoped fixture hands out a mutable dict",
        "resolution": 'use scope="function" or return a fresh copy each time',
        "tags": ["pytest"],
    },
    {
        "content": "pytest fixture teardown never ran",
        "context": "pytest fixture, the fixture used return instead of yield",
        "resolution": "`yield` the resource and put the cleanup code after it",
        "tags": ["pytest"],
    },
    {
        "content": "pytest fixture not found from a sibling test folder",
        "context": "pytest fixture, defined in one package's conftest.py",
        "resolution": "move it to the nearest conftest.py both folders share",
        "tags": ["pytest"],
    },
    {
        "content": "pytest fixture scope: an environment variable leaked into later cases",
        "context": "pytest fixture, one case wrote os.environ directly",
        "resolution": "`monkeypatch.setenv` undoes the change automatically",
        "tags": ["pytest"],
    },
    {
        "content": "pytest fixture scope: parallel workers collide on a shared /tmp path",
        "context": "pytest fixture, pytest -n auto with cases that write files",
        "resolution": "tmp_path gives every test its own directory",
        "tags": ["pytest"],
    },
]
DEMO_SKILL_FOLLOWUPS: list[dict[str, Any]] = [
    {
        "content": "Docker build cache: an ARG with a timestamp invalidates every later layer",
        "context": "docker build, ARG BUILD_DATE declared at the top of the Dockerfile",
        "resolution": "declare ARG BUILD_DATE as late as possible, just before the step that uses it",
        "tags": ["docker"],
    },
    {
        "content": "Docker build: the image is 1.8 GB because compilers ship with it",
        "context": "docker build, gcc needed for native wheels",
        "resolution": "multi-stage: compile in a builder stage, COPY --from=builder only the artifacts into "
        "a slim runtime",
        "tags": ["docker"],
    },
    {
        "content": "Docker build cache lost whenever the self-hosted runner is recycled",
        "context": "docker build, autoscaled build machines",
        "resolution": "export it to the registry with --cache-to type=registry,mode=max",
        "tags": ["docker", "ci"],
    },
]

DEMO_AGENTS = ("claude-code", "cursor-agent", "ops-bot")
DEMO_SEARCHES = (
    "pip install error in a container",
    "postgres connection refused docker",
    "leaked key in git",
    "retry rate limit 429",
    "kubernetes crash loop",
    "redis timeout under load",
    "deadlock postgres transactions",
    "tls certificate chain nginx",
)


DEMO_CHATS = """User: The CI job fails with 'No space left on device' while building the image.
Assistant: The runner's docker cache is full. Run docker system prune -af, then rebuild.
User: Pruned 41 GB, the build passes now.
---
User: How do I make pytest stop at the first failure and show locals?
Assistant: Use pytest -x -l; add --pdb to drop into the debugger on failure.
User: Perfect, -x -l is what I needed.
---
User: Our nginx returns 413 on file uploads over 1 MB.
Assistant: Raise client_max_body_size in the server block, e.g. client_max_body_size 50m; then reload nginx.
User: Fixed, uploads of 20 MB work.
"""


@dataclass
class DemoData:
    keys: dict[str, str]
    memory_ids: list[Any]


def seed_demo(
    hub: Any, *, admin_key: bool = True, with_import: bool = False, with_skills: bool = False
) -> DemoData:
    """Create demo agents (keys returned), upload the demo memories, search, read, pin and archive;
    with `with_import`, also import a small chat export (its extracted memories add to the count); with
    `with_skills`, also the skill memories and two evolution cycles (see `seed_skills`)."""
    keys: dict[str, str] = {}
    with hub.db.session() as s:
        for i, name in enumerate(DEMO_AGENTS):
            _, keys[name] = create_agent(s, name, admin=admin_key and i == 0)
    actors: list[Actor] = []
    with hub.db.session() as s:
        actors = [authenticate(s, keys[name]) for name in DEMO_AGENTS]
    ids = []
    for i, fields in enumerate(DEMO_MEMORIES):
        with hub.db.session() as s:
            ids.append(hub.memory.upload(s, actors[i % len(actors)], UploadRequest(**fields)).record.id)
    # A near-duplicate from another agent merges, so contributions show more than one author. It states
    # the same fact in other words (a merge is only for the same fact: see memory/faithful.py).
    same_fact = {**DEMO_MEMORIES[0], "context": "in a fresh python3.11 container, with the system pip"}
    with hub.db.session() as s:
        hub.memory.upload(s, actors[1], UploadRequest(**same_fact))
    # The new memories' clusters, as the worker's next tick would assign them (`ultron serve` runs it every
    # few seconds; no worker run recorded): the dashboard's map and skills pages show them at once.
    with hub.db.session() as s:
        hub.clusters.run_initial_clustering(s, actors[0].tenant_id)
    for round_ in range(3):
        for j, query in enumerate(DEMO_SEARCHES[: len(DEMO_SEARCHES) - round_ * 2]):
            with hub.db.session() as s:
                hub.memory.search(s, actors[(j + round_) % len(actors)], query, limit=5)
    hub.hits.flush()
    with hub.db.session() as s:
        hub.memory.details(s, actors[0], ids[:4])
        hub.memory.details(s, actors[2], ids[1:3])
    with hub.db.session() as s:
        hub.memory.edit(s, actors[0], ids[2], MemoryPatch(pinned=True, tier="hot"))
        hub.memory.edit(s, actors[0], ids[1], MemoryPatch(tier="hot"))
        hub.memory.edit(s, actors[0], ids[13], MemoryPatch(tier="cold"))
        hub.memory.edit(s, actors[0], ids[18], MemoryPatch(status="archived"))
    if with_import:
        _seed_import(hub, actors[0])
    if with_skills:
        seed_skills(hub, actors)
    return DemoData(keys=keys, memory_ids=ids)


def seed_skills(hub: Any, actors: list[Actor]) -> dict[str, int]:
    """Upload the skill memories, run an evolution cycle (three skills at 1.0.0), upload the follow-ups
    and run another (the docker skill is recrystallized); returns the second cycle's counts."""
    for i, fields in enumerate(DEMO_SKILL_MEMORIES):
        with hub.db.session() as s:
            hub.memory.upload(s, actors[i % len(actors)], UploadRequest(**fields))
    run_evolution_cycle(hub.db, hub.skills)
    for i, fields in enumerate(DEMO_SKILL_FOLLOWUPS):
        with hub.db.session() as s:
            hub.memory.upload(s, actors[(i + 1) % len(actors)], UploadRequest(**fields))
    return run_evolution_cycle(hub.db, hub.skills)


def _seed_import(hub: Any, actor: Actor) -> None:
    """One finished chat-export import, segmented and scored, when this hub has the ingestion service."""
    ingestion = getattr(hub, "ingestion", None)
    if ingestion is None:
        return
    with hub.db.session() as s:
        job = ingestion.imports.start(s, actor, "text", "team-chats.txt", DEMO_CHATS.encode())
    ingestion.imports.run(actor, job.id)
    build_worker(hub).process_due(actor.tenant_id)


def spread_days(hub: Any, days: int = 14) -> None:
    """Move demo rows back over the last `days` days (deterministically), so charts show a history."""
    with hub.db.session() as s:
        for table in ("activity_events", "hit_events", "memory_contributions"):
            s.execute(
                text(
                    # Skewed towards recent days, as a hub that is being adopted looks.
                    f"UPDATE {table} SET created_at = created_at - make_interval(days => "
                    "floor(:days * power((abs(hashtext(id::text)) % 1000) / 1000.0, 1.6))::int)"
                ),
                {"days": days},
            )
        s.execute(
            text(
                "UPDATE memories SET created_at = created_at - make_interval(days => "
                "(abs(hashtext(id::text)) % :days)::int)"
            ),
            {"days": days},
        )
