"""`ultron bench clusters`: what assigning one upload to a cluster costs, from 1k to 100k clusters.

Each size gets its own scratch database on one server: N clusters with random unit centroids go in by binary
COPY, then the HNSW index on the centroids is built and the table analyzed. Then every probe is one
`ClusterService.assign` in its own transaction -- one statement (`assign_cluster`): the HNSW probe for the
nearest centroids, the row lock and the re-check on the exact mean, the running-mean update, the new cluster
or the member insert -- timed up to (not including) the commit. On the same vector, each in its own
transaction, the assignment's probe alone (`nearest_clusters`: the tenant and emptiness filters, the
exact-mean score; the filters are checked during the HNSW walk, `hnsw.iterative_scan` on, so the index stays
in use) and the bare pgvector nearest-centroid kNN (`ORDER BY centroid <=> v LIMIT 4`, no filter), all three
sent the same way (a psycopg RawCursor, `$n` placeholders, the LIMIT a literal: prepared, generic plans) and
in every order in turn (ORDERS: each goes first, on pages no query has read for its vector, on a third of
the probes): the whole assignment / kNN ratio at each size is the figure the assignment is held to (<=
1.2x), the probe / kNN ratio what of it is the walk, and the assignments timed first / the kNNs timed first
the same cold against cold; joins and new clusters are also reported apart (a join updates one row, HOT; a new
cluster is inserted unindexed, `centroid` NULL, and found by the probe's exact pass over the tenant's
unindexed clusters until the worker indexes it -- no worker runs here, so they accumulate over the run,
about one per two probes, below the UNINDEXED_MAX bound past which a new cluster is indexed at once;
`--pending N` stores N of them before the probes). The bench also times the bare kNN on a fresh vector (one
nothing has probed, from another seed) before the three, and prints the assignment against that too. The
reference implementation's exact scan is timed too (the vector compared with every cluster's mean, index
scans off), which grows linearly with the clusters. Each assignment also reads its transaction's update
counters: how many cluster rows were updated, and how many of those were HOT (the indexed centroid left
alone, so no new HNSW element). Half the probe vectors lie at cosine ~0.9 from a stored centroid (they join
it), half are random (they start a cluster: the join rule's score is the average cosine to the members, 0.9
x MEAN_NORM = 0.72 for the joins, about 0 for the random ones, and the bench's threshold is 0.6). The first
1000 centroids, and so the probe vectors, are the same in every database. Probes are interleaved across the
sizes round by round, the order rotating, so a noisy machine's drift falls on every size alike; the ratio to
the smallest size, measured in the same run, is the figure to read.

The embedded server the bench starts gets shared_buffers = 1GB, as a server holding 100k clusters would
be sized: the probe reads ~3k index and heap pages, and with the 128MB default the 100k-cluster index
(~130MB) no longer fits and each probe goes to the OS cache (measured 14 ms instead of ~2 ms).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used, so building the CLI's parser stays cheap
    import numpy as np

THRESHOLD = 0.6  # joins score JOIN_COSINE x MEAN_NORM = 0.72; random vectors about 0
JOIN_COSINE = 0.9
MEAN_NORM = 0.8  # each stored cluster's mean has this length
MEMBERS = 50  # and this many members (a join at cosine 0.9 moves a 5-member mean past the drift bound)
TARGETS = 1000  # centroids shared by every size; joins aim at these
FILL_BATCH = 10_000
SEED = 11
INDEX = "ix_knowledge_clusters_centroid_hnsw"
# Applied to the embedded server the bench starts (not to a server given with --database-url).
SERVER_SETTINGS = {"shared_buffers": "1GB"}
# The three timed steps on each probe vector, in every order, one order per probe in turn.
ORDERS = list(itertools.permutations(("assign", "probe", "knn")))
STATEMENTS = {"probe": "nearest_clusters", "knn": "nearest_centroids_bare"}


def _units(rng: np.random.Generator, n: int, dimension: int) -> np.ndarray:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    import numpy as np

    v = rng.standard_normal((n, dimension)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def centroids(size: int, dimension: int, seed: int = SEED) -> Any:
    """The centroids of a database of `size`, in batches; the first TARGETS are the same for all sizes."""
    # start-up: loaded when the command runs, not when the CLI builds its parser
    import numpy as np

    rng = np.random.default_rng(seed)
    done = 0
    while done < size:
        n = min(FILL_BATCH, size - done)
        yield _units(rng, n, dimension)
        done += n


def probe_vectors(count: int, dimension: int, targets: np.ndarray, seed: int = SEED + 1) -> list[np.ndarray]:
    """Alternately a vector at cosine JOIN_COSINE from a random target centroid and a random one."""
    # start-up: loaded when the command runs, not when the CLI builds its parser
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        r = _units(rng, 1, dimension)[0]
        if i % 2:
            out.append(r)
            continue
        c = targets[rng.integers(len(targets))]
        perp = r - float(r @ c) * c
        perp /= np.linalg.norm(perp)
        out.append((JOIN_COSINE * c + np.sqrt(1 - JOIN_COSINE**2) * perp).astype(np.float32))
    return out


@dataclass
class Size:
    """One scratch database filled to `clusters` clusters, and what its assignments cost."""

    clusters: int
    db: Any
    service: Any
    tenant_id: uuid.UUID
    memory_ids: list[uuid.UUID] = field(default_factory=list)
    fill_s: float = 0.0
    index_mb: float = 0.0
    assign_ms: list[float] = field(default_factory=list)
    probe_ms: list[float] = field(default_factory=list)
    knn_ms: list[float] = field(default_factory=list)
    exact_ms: list[float] = field(default_factory=list)
    unindexed: int = 0  # clusters not in the HNSW index when the timed assignments ended
    joined: int = 0
    started: int = 0
    updates: int = 0
    hot_updates: int = 0

    join_ms: list[float] = field(default_factory=list)
    start_ms: list[float] = field(default_factory=list)
    join_knn_ms: list[float] = field(default_factory=list)  # the bare kNN on the joins' vectors
    start_knn_ms: list[float] = field(default_factory=list)  # and on the new clusters' vectors
    # The bare kNN on a vector nothing has probed before, timed just before each assignment: cold like it.
    cold_knn_ms: list[float] = field(default_factory=list)
    # The probes on which the assignment went first, and those on which the bare kNN did (ORDERS): both cold.
    assign_first_ms: list[float] = field(default_factory=list)
    knn_first_ms: list[float] = field(default_factory=list)

    def _params(self, vector: np.ndarray) -> dict[str, Any]:
        # start-up: loaded when the command runs, not when the CLI builds its parser
        from ultron.clusters.service import PROBE_CANDIDATES

        return {"tenant_id": self.tenant_id, "v": vector, "limit": PROBE_CANDIDATES}

    def _time_knn(self, which: str, vector: np.ndarray) -> float:
        """One nearest-centroid query in its own transaction, ms."""
        # start-up: loaded when the command runs, not when the CLI builds its parser
        from sqlalchemy import text

        # start-up: loaded when the command runs, not when the CLI builds its parser
        from ultron.clusters.service import run_raw

        with self.db.session() as s:
            # The connection checkout and BEGIN outside the timed statement (on a loaded box they cost
            # several ms, alike for both, and would pull the ratio towards 1).
            s.execute(text("SELECT 1"))
            # Planned as the assignment's probe is: walking the HNSW index, sorts off, where the tenant is
            # most of the table (ClusterService.walks_index; at 1k clusters the planner would sort them all).
            walk = self.service.walks_index(s, self.tenant_id)
            before = time.perf_counter()
            # Sent as the assignment sends its statement (a psycopg RawCursor, `$n` placeholders, the LIMIT
            # a literal, so a prepared generic plan): the same client path on both sides.
            run_raw(s, which, self._params(vector), walk)
            return (time.perf_counter() - before) * 1000.0

    def assign(
        self, index: int, vector: np.ndarray, record: bool, cold_vector: np.ndarray | None = None
    ) -> None:
        """One assignment as an upload makes it, the assignment's probe alone and the bare kNN, each in its
        own transaction, on the same vector, in ORDERS[index // 2 % 6] (each order on a join and on a new
        cluster: the probes alternate): each goes first (on pages no query has read for this vector) and last
        equally often, and each pair in either order equally often. Before them, the bare kNN on
        `cold_vector`, which nothing has probed either: the other cold baseline."""
        cold = self._time_knn("nearest_centroids_bare", cold_vector) if cold_vector is not None else None
        took: dict[str, float] = {}
        fresh = False
        updated = hot = 0
        order = ORDERS[index // 2 % len(ORDERS)]
        for step in order:
            if step == "assign":
                took[step], fresh, updated, hot = self._time_assign(index, vector)
            else:
                took[step] = self._time_knn(STATEMENTS[step], vector)
        if record:
            elapsed, knn = took["assign"], took["knn"]
            self.assign_ms.append(elapsed)
            (self.start_ms if fresh else self.join_ms).append(elapsed)
            (self.start_knn_ms if fresh else self.join_knn_ms).append(knn)
            self.probe_ms.append(took["probe"])
            self.knn_ms.append(knn)
            if order[0] == "assign":
                self.assign_first_ms.append(elapsed)
            elif order[0] == "knn":
                self.knn_first_ms.append(knn)
            if cold is not None:
                self.cold_knn_ms.append(cold)
            self.started += int(fresh)
            self.joined += int(not fresh)
            self.updates += updated
            self.hot_updates += hot

    def _time_assign(self, index: int, vector: np.ndarray) -> tuple[float, bool, int, int]:
        """One `ClusterService.assign` in its own transaction, timed up to (not including) the commit: ms,
        whether it started a cluster, and the cluster rows it updated and how many of those were HOT."""
        # start-up: loaded when the command runs, not when the CLI builds its parser
        from sqlalchemy import text

        # This backend's update counters (they also hold earlier transactions not yet flushed to the
        # statistics, so the difference across the assignment is what it did).
        counters = text(
            "SELECT pg_stat_get_xact_tuples_updated(CAST(:t AS regclass)), "
            "pg_stat_get_xact_tuples_hot_updated(CAST(:t AS regclass))"
        )
        with self.db.session() as s:
            updated0, hot0 = s.execute(counters, {"t": "knowledge_clusters"}).one()
            before = time.perf_counter()
            cluster_id = self.service.assign(s, self.tenant_id, self.memory_ids[index], vector)
            elapsed = (time.perf_counter() - before) * 1000.0
            updated, hot = s.execute(counters, {"t": "knowledge_clusters"}).one()
            fresh = s.execute(
                text("SELECT member_count = 1 FROM knowledge_clusters WHERE id = :id"), {"id": cluster_id}
            ).scalar_one()
        return elapsed, bool(fresh), int(updated - updated0), int(hot - hot0)

    def exact_scan(self, vector: np.ndarray) -> None:
        """The reference implementation: every cluster's mean compared with the vector, no index. Timed in
        a pass of its own, after the assignments: a scan of 100k rows would evict from the CPU caches what
        the next assignment reads, and charge the index for the reference's cost."""
        # start-up: loaded when the command runs, not when the CLI builds its parser
        from sqlalchemy import text

        # start-up: loaded when the command runs, not when the CLI builds its parser
        from ultron.db.queries import q

        with self.db.session() as s:
            s.execute(text("SET LOCAL enable_indexscan = off"))
            before = time.perf_counter()
            s.execute(q("nearest_clusters_exact"), self._params(vector)).first()
            self.exact_ms.append((time.perf_counter() - before) * 1000.0)


def _fill(
    db: Any,
    tenant_id: uuid.UUID,
    size: int,
    dimension: int,
    memories: int,
    members: int = MEMBERS,
    pending: int = 0,
) -> float:
    """COPY `size` clusters in, then build the HNSW index and analyze; insert the probes' memories.
    `pending` more clusters (random means, from another seed) go in unindexed (centroid NULL), as new
    clusters wait for the worker: the probe's exact pass then starts at that many."""
    # start-up: loaded when the command runs, not when the CLI builds its parser
    import numpy as np

    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.db.vectors import HNSW_EF_CONSTRUCTION, HNSW_M

    start = time.perf_counter()
    raw = db.engine.raw_connection()
    try:
        conn = raw.driver_connection
        with conn.transaction():
            conn.execute(f"DROP INDEX IF EXISTS {INDEX}")
            with conn.cursor().copy(
                "COPY knowledge_clusters (tenant_id, centroid, mean, centroid_norm, member_count) "
                "FROM STDIN WITH (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["uuid", "vector", "vector", "float8", "int4"])
                for batch in centroids(size, dimension):
                    for c in batch:
                        copy.write_row((tenant_id, c, c * np.float32(MEAN_NORM), MEAN_NORM, members))
                for batch in centroids(pending, dimension, seed=SEED + 3):
                    for c in batch:
                        copy.write_row((tenant_id, None, c * np.float32(MEAN_NORM), MEAN_NORM, members))
            conn.execute("SET LOCAL maintenance_work_mem = '512MB'")
            conn.execute(
                f"CREATE INDEX {INDEX} ON knowledge_clusters USING hnsw (centroid vector_cosine_ops) "
                f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})"
            )
            conn.execute(
                "INSERT INTO memories (tenant_id, memory_type, content, content_hash, search_tsv) "
                "SELECT %s, 'pattern', 'bench ' || g, md5(g::text), to_tsvector('simple', 'bench') "
                "FROM generate_series(1, %s) g",
                (tenant_id, memories),
            )
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE knowledge_clusters")
        conn.execute("VACUUM ANALYZE memories")
        conn.autocommit = False
    finally:
        raw.close()
    return time.perf_counter() - start


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _p50(values: list[float]) -> float | None:
    return round(_pct(values, 0.5), 3) if values else None


def _ratio(values: list[float], base: list[float]) -> float | None:
    """The p50 of `values` over the p50 of `base` (the smallest size's, or the bare kNN's at the same
    size); None when either was not measured."""
    return round(_pct(values, 0.5) / _pct(base, 0.5), 3) if values and base else None


def report_rows(sizes: list[Size]) -> list[dict[str, Any]]:
    """Per size: p50/p95/mean per assignment (ms), and the ratio of each to the smallest size."""
    base = sizes[0]
    rows = []
    for z in sizes:
        p50, p95 = _pct(z.assign_ms, 0.5), _pct(z.assign_ms, 0.95)
        rows.append(
            {
                "clusters": z.clusters,
                "fill_s": round(z.fill_s, 2),
                "index_mb": round(z.index_mb, 3),
                "probes": len(z.assign_ms),
                "joined": z.joined,
                "started": z.started,
                "p50_ms": round(p50, 3),
                "p95_ms": round(p95, 3),
                "mean_ms": round(statistics.fmean(z.assign_ms), 3),
                "p50_ratio": _ratio(z.assign_ms, base.assign_ms),
                "p95_ratio": round(p95 / _pct(base.assign_ms, 0.95), 3),
                "join_p50_ms": _p50(z.join_ms),
                "join_p50_ratio": _ratio(z.join_ms, base.join_ms),
                "start_p50_ms": _p50(z.start_ms),
                "start_p50_ratio": _ratio(z.start_ms, base.start_ms),
                "probe_p50_ms": _p50(z.probe_ms),
                "probe_p50_ratio": _ratio(z.probe_ms, base.probe_ms),
                "knn_p50_ms": _p50(z.knn_ms),
                "knn_p95_ms": round(_pct(z.knn_ms, 0.95), 3),
                # The assignment against the bare kNN at the same size (the Done-when's ratio).
                "probe_vs_knn": _ratio(z.probe_ms, z.knn_ms),
                "probe_p95_vs_knn": round(_pct(z.probe_ms, 0.95) / _pct(z.knn_ms, 0.95), 3),
                "assign_vs_knn": _ratio(z.assign_ms, z.knn_ms),
                # Apart: a join updates a row (HOT); a new cluster also inserts its centroid into the HNSW
                # index, an index insertion the bare kNN does not do.
                "join_vs_knn": _ratio(z.join_ms, z.join_knn_ms),
                "start_vs_knn": _ratio(z.start_ms, z.start_knn_ms),
                # Against the bare kNN timed cold, like the assignment (a fresh vector, just before it).
                "cold_knn_p50_ms": _p50(z.cold_knn_ms),
                "assign_vs_cold_knn": _ratio(z.assign_ms, z.cold_knn_ms),
                # Cold against cold, the same vector order: the assignments timed first on their vector
                # over the bare kNNs timed first on theirs (a third of the probes each).
                "assign_first_p50_ms": _p50(z.assign_first_ms),
                "knn_first_p50_ms": _p50(z.knn_first_ms),
                "assign_first_vs_knn_first": _ratio(z.assign_first_ms, z.knn_first_ms),
                "join_vs_cold_knn": _ratio(z.join_ms, z.cold_knn_ms),
                "start_vs_cold_knn": _ratio(z.start_ms, z.cold_knn_ms),
                "exact_p50_ms": _p50(z.exact_ms),
                "exact_p50_ratio": _ratio(z.exact_ms, base.exact_ms),
                "updates": z.updates,
                "hot_updates": z.hot_updates,
                "unindexed": z.unindexed,
            }
        )
    return rows


def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def _ms(value: float | None, ratio: float | None) -> str:
    return f"{'-':>9} {'-':>6}" if value is None or ratio is None else f"{value:>7.3f}ms {ratio:>5.2f}x"


def format_report(rows: list[dict[str, Any]], dimension: int, shared_buffers: str) -> str:
    lines = [
        f"ultron bench clusters: {dimension}-d centroids, HNSW, shared_buffers {shared_buffers}; one "
        "ClusterService.assign per probe (one statement: nearest-centroid probe, row lock, running mean, "
        "new cluster or member insert), commit excluded; probes interleaved across sizes",
        f"{'clusters':>9} {'fill s':>7} {'index':>8} {'probes':>6} {'joined':>6} {'started':>7} "
        f"{'p50':>9} {'p95':>9} {'mean':>9} {'p50 x':>6} {'p95 x':>6} {'join p50':>9} {'x':>6} "
        f"{'start p50':>9} {'x':>6} {'probe p50':>10} {'x':>6} {'kNN p50':>10} {'probe/kNN':>9} "
        f"{'assign/kNN':>10} {'exact p50':>10} {'x':>7} {'upd/HOT':>9}",
    ]
    for r in rows:
        exact = (
            f"{r['exact_p50_ms']:>8.3f}ms {r['exact_p50_ratio']:>6.2f}x"
            if r["exact_p50_ms"] is not None
            else f"{'-':>10} {'-':>7}"
        )
        lines.append(
            f"{r['clusters']:>9} {r['fill_s']:>7.1f} {r['index_mb']:>6.1f}MB {r['probes']:>6} "
            f"{r['joined']:>6} {r['started']:>7} "
            f"{r['p50_ms']:>7.3f}ms {r['p95_ms']:>7.3f}ms {r['mean_ms']:>7.3f}ms "
            f"{r['p50_ratio']:>5.2f}x {r['p95_ratio']:>5.2f}x "
            f"{_ms(r['join_p50_ms'], r['join_p50_ratio'])} {_ms(r['start_p50_ms'], r['start_p50_ratio'])} "
            f"{r['probe_p50_ms']:>8.3f}ms {r['probe_p50_ratio']:>5.2f}x "
            f"{r['knn_p50_ms']:>8.3f}ms {r['probe_vs_knn']:>8.2f}x {r['assign_vs_knn']:>9.2f}x "
            f"{exact} {r['updates']:>4}/{r['hot_updates']:<4}"
        )
    first, last = rows[0], rows[-1]
    lines += [
        "",
        f"assignment at {last['clusters']} clusters / at {first['clusters']}: p50 {last['p50_ratio']:.2f}x, "
        f"p95 {last['p95_ratio']:.2f}x (joins {_x(last['join_p50_ratio'])}, new clusters "
        f"{_x(last['start_p50_ratio'])}; the HNSW probe alone: p50 {last['probe_p50_ratio']:.2f}x)",
    ]
    lines.append(
        "the assignment's nearest-centroid probe (tenant and emptiness filters, exact-mean score) / the bare "
        "pgvector kNN (ORDER BY centroid <=> v LIMIT 4), same size, same vectors, this run (target <= 1.2x): "
        + ", ".join(
            f"{r['clusters']}: p50 {r['probe_vs_knn']:.2f}x, p95 {r['probe_p95_vs_knn']:.2f}x" for r in rows
        )
    )
    lines.append(
        "the whole assignment (one statement: probe, row lock, running mean, new cluster or member insert) / "
        "the bare kNN, same vectors, the order of the two alternating (target <= 1.2x): "
        + ", ".join(
            f"{r['clusters']}: {r['assign_vs_knn']:.2f}x (joins {_x(r['join_vs_knn'])}, "
            f"new clusters {_x(r['start_vs_knn'])})"
            for r in rows
        )
    )
    if rows[0]["assign_vs_cold_knn"] is not None:
        lines.append(
            "the whole assignment / the bare kNN on a fresh vector timed just before it (both walk pages no "
            "query has just read): "
            + ", ".join(
                f"{r['clusters']}: {r['assign_vs_cold_knn']:.2f}x (joins {_x(r['join_vs_cold_knn'])}, "
                f"new clusters {_x(r['start_vs_cold_knn'])}; cold kNN p50 {r['cold_knn_p50_ms']:.3f} ms)"
                for r in rows
            )
        )
    if rows[0]["assign_first_vs_knn_first"] is not None:
        lines.append(
            "cold against cold: the assignments timed first on their vector / the bare kNNs timed first on "
            "theirs: "
            + ", ".join(
                f"{r['clusters']}: {_x(r['assign_first_vs_knn_first'])} ({r['assign_first_p50_ms']:.3f} / "
                f"{r['knn_first_p50_ms']:.3f} ms)"
                for r in rows
            )
        )
    if last["exact_p50_ratio"] is not None:
        lines.append(
            f"an exact scan over every cluster's mean (the reference implementation, index scans off): "
            f"p50 {last['exact_p50_ratio']:.2f}x"
        )
    lines.append(
        "upd/HOT: cluster row updates by the timed joins, and how many were HOT (no index entry: the "
        "indexed centroid was left alone)"
    )
    lines.append(
        "new clusters wait for the worker to enter the HNSW index (the probe's exact pass covers them; no "
        "worker runs here): unindexed clusters at the end, "
        + ", ".join(f"{r['clusters']}: {r['unindexed']}" for r in rows)
    )
    return "\n".join(lines)


def _open(server: str, name: str, dimension: int) -> tuple[Any, Any, uuid.UUID]:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.bench.core import _admin_url
    from ultron.clusters.service import ClusterService
    from ultron.config import Settings
    from ultron.db.engine import open_database
    from ultron.db.vectors import Profile, ensure_profile
    from ultron.hub import build_embedder
    from ultron.tenancy import local_actor

    settings = Settings(
        database_url=_admin_url(server, name),
        embedding_provider="hash",
        embedding_dimension=dimension,
        cluster_similarity_threshold=THRESHOLD,
    )
    embedder = build_embedder(settings)
    db = open_database(settings)
    ensure_profile(db.engine, Profile("hash", embedder.model_name, embedder.dimension))
    with db.session() as s:
        tenant_id = local_actor(s).tenant_id
    return db, ClusterService(settings), tenant_id


def run(
    server: str,
    sizes: list[int],
    probes: int,
    dimension: int,
    warmup: int | None = None,
    exact: bool = True,
    members: int = MEMBERS,
    pending: int = 0,
) -> list[dict[str, Any]]:
    """Fill one scratch database per size on `server`, run the interleaved probes, drop the databases."""
    # start-up: loaded when the command runs, not when the CLI builds its parser
    import psycopg
    from sqlalchemy import text

    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.bench.core import _admin_url

    sizes = sorted(sizes)
    warmup = max(5, probes // 10) if warmup is None else warmup
    admin = _admin_url(server)
    names = [f"ultron_bench_clusters_{uuid.uuid4().hex[:8]}_{n}" for n in sizes]
    opened: list[Size] = []
    try:
        for n, name in zip(sizes, names, strict=True):
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE {name}")
            db, service, tenant_id = _open(server, name, dimension)
            size = Size(n, db, service, tenant_id)
            opened.append(size)
            print(f"filling {n} clusters...", file=sys.stderr)
            size.fill_s = _fill(db, tenant_id, n, dimension, warmup + probes, members, pending)
            with db.session() as s:
                size.memory_ids = list(
                    s.execute(text("SELECT id FROM memories ORDER BY id")).scalars()  # probe i uses row i
                )
                size.index_mb = s.execute(text(f"SELECT pg_relation_size('{INDEX}')")).scalar_one() / 2**20
        targets = next(centroids(min(TARGETS, sizes[0]), dimension))
        vectors = probe_vectors(warmup + probes, dimension, targets)
        cold = probe_vectors(warmup + probes, dimension, targets, seed=SEED + 2)  # the cold kNN's vectors
        print(f"measuring {probes} assignments per size (interleaved)...", file=sys.stderr)
        for i, vector in enumerate(vectors):
            shift = i % len(opened)
            for size in opened[shift:] + opened[:shift]:
                size.assign(i, vector, record=i >= warmup, cold_vector=cold[i])
        for size in opened:
            with size.db.session() as s:
                size.unindexed = s.execute(
                    text(
                        "SELECT count(*) FROM knowledge_clusters WHERE centroid IS NULL AND mean IS NOT NULL"
                    )
                ).scalar_one()
        if exact:
            print("timing the exact scan (interleaved)...", file=sys.stderr)
            for i, vector in enumerate(vectors[warmup:]):
                shift = i % len(opened)
                for size in opened[shift:] + opened[:shift]:
                    size.exact_scan(vector)
    finally:
        for size in opened:
            size.db.dispose()
        with psycopg.connect(admin, autocommit=True) as conn:
            for name in names:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    return report_rows(opened)


def run_command(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    import psycopg

    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.bench.core import _admin_url

    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if not sizes or min(sizes) < 1 or args.probes < 1 or args.members < 1 or args.pending < 0:
        raise ValueError(
            "--sizes needs positive cluster counts, --probes and --members positive numbers, --pending >= 0"
        )
    from ultron.bench.core import _server  # start-up: loaded when the command runs

    with _server(args.database_url, shared_buffers=SERVER_SETTINGS["shared_buffers"]) as server:
        with psycopg.connect(_admin_url(server)) as conn:
            shared_buffers = str(conn.execute("SHOW shared_buffers").fetchone()[0])  # type: ignore[index]
        rows = run(
            server,
            sizes,
            args.probes,
            args.dimension,
            exact=not args.no_exact,
            members=args.members,
            pending=args.pending,
        )
    print(json.dumps(rows, indent=2) if args.json else format_report(rows, args.dimension, shared_buffers))
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("bench-clusters", help="cluster assignment cost per upload at 1k to 100k clusters")
    p.add_argument("--database-url", dest="database_url", help="benchmark on this server (new databases)")
    p.add_argument("--sizes", default="1000,10000,100000", help="cluster counts to measure at")
    p.add_argument("--probes", type=int, default=300, help="timed assignments per size")
    p.add_argument("--dimension", type=int, default=256, help="centroid dimension")
    p.add_argument(
        "--members",
        type=int,
        default=MEMBERS,
        help="members of each stored cluster (small clusters refresh their indexed centroid at every join)",
    )
    p.add_argument(
        "--pending",
        type=int,
        default=0,
        help="clusters stored unindexed before the probes (new clusters the worker has not indexed yet)",
    )
    p.add_argument(
        "--no-exact", action="store_true", help="skip timing the exact scan over every cluster's mean"
    )
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=run_command)
