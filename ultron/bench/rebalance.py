"""`ultron bench rebalance`: time the tier rebalance statement at 100k and 1M memories.

The database is loaded as a live hub would look after its previous cycle: hit counts drawn from a
Zipf-like law (a fifth never hit), last use within the TTL, tiers as the previous rebalance left them
(computed at load time with the same rule). Memories go in with COPY; a first rebalance settles the ties
at the tier boundaries; then the HNSW index is built and VACUUM ANALYZE runs, as after a restore. Timed
as "cycle": `--repeat` rebalances, each after a cycle's worth of change -- 1 % of the memories got new
hits and 0.5 % aged past the COLD TTL. A third of the memories carry an arousal (uniform 0..1), which the
statement weighs into the ranking and the TTL.
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from sqlalchemy import text
from sqlalchemy.engine import make_url

from ultron.config import Settings
from ultron.db.vectors import create_vector_index, drop_vector_index
from ultron.hub import Hub
from ultron.tenancy import ensure_tenant
from ultron.worker.rebalance import rebalance_tenant

COPY_COLUMNS = (
    "tenant_id, memory_type, content, content_hash, search_tsv, embedding, hit_count, last_hit_at, "
    "created_at, tier, arousal"
)
# Applied to the embedded server the benchmark starts (not to a server given with --database-url).
SERVER_SETTINGS = {"shared_buffers": "2GB", "max_wal_size": "4GB"}
TYPES = ("error", "security", "correction", "pattern", "preference", "life")
# Share of memories that got new hits, and share that aged past the TTL, between two rebalances.
CHURN = 0.01
AGING = 0.005


def _settings(args: argparse.Namespace) -> Iterator[Settings]:
    if args.database_url:
        name = f"ultron_rebalance_{uuid.uuid4().hex[:8]}"
        admin = make_url(args.database_url).set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        try:
            url = make_url(admin).set(database=name).render_as_string(hide_password=False)
            yield Settings(database_url=url, embedding_provider="hash", embedding_dimension=args.dimension)
        finally:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        return
    data_dir = Path(tempfile.mkdtemp(prefix="ultron-rebalance-"))
    data_dir.chmod(0o755)
    try:
        yield Settings(data_dir=data_dir, embedding_provider="hash", embedding_dimension=args.dimension)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def _population(count: int, rng: random.Random, hot_pct: float, warm_pct: float) -> list[tuple]:  # type: ignore[type-arg]
    """(hits, days since last hit or None, days since creation, tier) per memory, tiers already ranked."""
    rows = []
    for _ in range(count):
        hits = int(rng.paretovariate(1.2)) - 1 if rng.random() < 0.8 else 0
        last = rng.uniform(0, 29) if hits else None
        rows.append((hits, last, rng.uniform(0, 29) if last is None else last + rng.uniform(0, 60)))
    order = sorted(range(count), key=lambda i: (-rows[i][0], rows[i][1] if rows[i][1] is not None else 1e9))
    hot = math.ceil(count * hot_pct / 100)
    warm = math.ceil(count * warm_pct / 100)
    tiers = [""] * count
    for rank, i in enumerate(order):
        tiers[i] = "hot" if rank < hot else ("warm" if rank < hot + warm else "cold")
    return [(*row, tier) for row, tier in zip(rows, tiers, strict=True)]


def load(hub, tenant_id: uuid.UUID, count: int, rng: random.Random, dimension: int) -> float:  # type: ignore[no-untyped-def]
    """COPY `count` memories with the HNSW index dropped (rebuilt by `index`)."""

    now = datetime.now(UTC)
    st = hub.settings
    population = _population(count, rng, st.hot_percentile, st.warm_percentile)
    start = time.perf_counter()
    raw = hub.db.engine.raw_connection()
    try:
        conn = raw.driver_connection
        with conn.transaction():
            conn.execute(_sql_of(drop_vector_index))
            with conn.cursor().copy(f"COPY memories ({COPY_COLUMNS}) FROM STDIN") as copy:
                for i, (hits, last, created, tier) in enumerate(population):
                    vector = "[" + ",".join(f"{rng.uniform(-1, 1):.3f}" for _ in range(dimension)) + "]"
                    copy.write_row(
                        (
                            tenant_id,
                            TYPES[i % len(TYPES)],
                            f"bench memory {i}",
                            uuid.uuid4().hex,
                            "",
                            vector,
                            hits,
                            None if last is None else now - timedelta(days=last),
                            now - timedelta(days=created),
                            tier,
                            # A third carry an arousal (the rebalance weighs it); the rest none, as uploads
                            # without a mood and no LLM leave them.
                            round(rng.random(), 3) if i % 3 == 0 else None,
                        )
                    )
                    if i % 50_000 == 0:
                        print(f"\r  loading {i}/{count}", end="", file=sys.stderr)
            print(f"\r  loaded {count}", file=sys.stderr)
        conn.execute("ANALYZE memories")
    finally:
        raw.close()
    return time.perf_counter() - start


def index(hub, *, hnsw: bool = True) -> float:  # type: ignore[no-untyped-def]
    """Build the HNSW index, then VACUUM ANALYZE (frees the first rebalance's old row versions)."""

    start = time.perf_counter()
    raw = hub.db.engine.raw_connection()
    try:
        conn = raw.driver_connection
        conn.autocommit = True
        conn.execute("SET maintenance_work_mem = '1GB'")
        if hnsw:
            conn.execute(_sql_of(create_vector_index))
        conn.execute("VACUUM ANALYZE memories")
    finally:
        raw.close()
    return time.perf_counter() - start


def _sql_of(helper) -> str:  # type: ignore[no-untyped-def]
    """The statement a vectors.py helper would run (they take a SQLAlchemy connection)."""
    captured: list[str] = []

    class _Capture:
        def execute(self, clause, params=None):  # type: ignore[no-untyped-def]
            captured.append(str(clause))

    helper(_Capture())
    return captured[0]


def churn(hub, tenant_id: uuid.UUID) -> None:  # type: ignore[no-untyped-def]
    """A cycle's worth of change: new hits on CHURN of the memories, AGING of them now past the TTL."""
    with hub.db.session() as session:
        session.execute(
            text(
                "UPDATE memories SET hit_count = hit_count + 1 + floor(random() * 20)::int, "
                "last_hit_at = now() WHERE tenant_id = :t AND status = 'active' AND random() < :share"
            ),
            {"t": tenant_id, "share": CHURN},
        )
        session.execute(
            text(
                "UPDATE memories SET last_hit_at = last_hit_at - interval '31 days', "
                "created_at = created_at - interval '31 days' "
                "WHERE tenant_id = :t AND status = 'active' AND random() < :share"
            ),
            {"t": tenant_id, "share": AGING},
        )


def timed_rebalance(hub, tenant_id: uuid.UUID) -> tuple[float, dict[str, int]]:  # type: ignore[no-untyped-def]

    start = time.perf_counter()
    with hub.db.session() as session:
        counts = rebalance_tenant(session, hub.settings, tenant_id)
    return time.perf_counter() - start, counts


def _tuned(hub, settings: Settings):  # type: ignore[no-untyped-def]
    """The embedded server with a production-like memory setting (its default shared_buffers is 128 MB,
    smaller than a million memories), restarted to apply it."""

    raw = hub.db.engine.raw_connection()
    try:
        conn = raw.driver_connection
        conn.autocommit = True
        for name, value in SERVER_SETTINGS.items():
            conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
    finally:
        raw.close()
    hub.close()
    hub = Hub.open(settings)
    with hub.db.session() as session:
        shown = session.execute(text("SHOW shared_buffers")).scalar_one()
    print(f"  embedded server restarted with shared_buffers = {shown}", file=sys.stderr)
    return hub


def run(args: argparse.Namespace) -> int:
    sizes = sorted(int(s) for s in args.sizes.split(","))
    rng = random.Random(11)
    lines = []
    for settings in _settings(args):
        hub = Hub.open(settings)
        if not args.database_url:
            hub = _tuned(hub, settings)
        try:
            for size in sizes:
                with hub.db.session() as session:
                    tenant_id = ensure_tenant(session, f"bench-{size}")
                print(f"size {size}:", file=sys.stderr)
                load_s = load(hub, tenant_id, size, rng, args.dimension)
                first_s, first = timed_rebalance(hub, tenant_id)
                print(f"  first rebalance {first_s:.2f}s; building the HNSW index", file=sys.stderr)
                index_s = index(hub, hnsw=not args.no_hnsw)
                cycles = []
                for _ in range(args.repeat):
                    churn(hub, tenant_id)
                    cycles.append(timed_rebalance(hub, tenant_id))
                line = (
                    f"{size:>9} {load_s:>8.1f}s {index_s:>8.1f}s {first_s:>9.2f}s {first['moved']:>7} "
                    f"{statistics.median(s for s, _ in cycles):>9.2f}s "
                    f"{statistics.median(c['moved'] for _, c in cycles):>7.0f} "
                    f"{statistics.median(c['archived'] for _, c in cycles):>8.0f}"
                )
                print(line, file=sys.stderr)
                lines.append(line)
        finally:
            hub.close()
    print(
        f"ultron bench rebalance: one tenant per size, {args.dimension}-d vectors "
        f"{'without an HNSW index' if args.no_hnsw else 'under HNSW'}, "
        f"server {'as given' if args.database_url else SERVER_SETTINGS}, "
        f"hot {settings.hot_percentile}% / warm {settings.warm_percentile}%, "
        f"cold TTL {settings.cold_ttl_days} d (personal types {settings.personal_ttl_days} d)"
    )
    print(
        "first = the loaded state, before the HNSW index is built (ties at the boundaries settle); "
        f"cycle = median of {args.repeat} rebalances, each after {CHURN:.0%} "
        f"of memories got new hits and {AGING:.1%} aged past the cold TTL"
    )
    print(
        f"{'memories':>9} {'COPY':>9} {'HNSW':>9} {'first':>10} {'moved':>7} {'cycle':>10} {'moved':>7} "
        f"{'archived':>8}"
    )
    print("\n".join(lines))
    return 0
