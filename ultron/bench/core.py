"""`ultron bench core`: upload throughput and search latency at growing sizes, against raw pgvector kNN.

The store is filled to each size with a bulk loader (COPY, then index, then ANALYZE); then, at that size,
a probe of real uploads goes through the whole upload path (redact, type, summarize, embed, dedup under
the advisory lock, insert) and a probe of searches goes through the whole search path (embed, hybrid
SQL, fusion, hits). The same query vectors are then run as a bare HNSW `ORDER BY embedding <=> q LIMIT k`
on the same pool: the baseline. Ratios, not absolute times, are the trustworthy figures on a noisy box.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from sqlalchemy import text
from sqlalchemy.engine import make_url

from ultron.bench.progress import progress_bar
from ultron.config import Settings
from ultron.db.embedded import start_embedded, stop_embedded
from ultron.db.queries import q
from ultron.db.vectors import create_vector_index, drop_vector_index
from ultron.hub import Hub
from ultron.memory import fulltext, indexing
from ultron.memory.schemas import UploadRequest
from ultron.memory.service import content_hash
from ultron.memory.text import MEMORY_TYPES, embedding_text
from ultron.tenancy import local_actor

SEARCH_LIMIT = 10
# Stored memories whose five-word phrases probe exact-phrase findability, per size.
PHRASE_SAMPLE = 200
# Word-frequency skew of the synthetic corpus: realistic enough that full text meets common and rare
# terms, flat enough that two random memories are not near-duplicates under the hash thresholds.
ZIPF_EXPONENT = 0.8
FILL_BATCH = 5000
_SYLLABLES = "ka lo mi ne ru ta po si ve du ja xo qi ze bu fa go hu wy ly".split()
_TECH = """error timeout failed docker kubernetes python pip npm cache redis postgres index query deploy build
memory leak thread lock deadlock retry network dns tls certificate config yaml json parser import module
version upgrade rollback migration schema token auth permission denied disk space volume""".split()


def _vocabulary(size: int, rng: random.Random) -> list[str]:
    words = set(_TECH)
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


class Corpus:
    """Deterministic synthetic memories: Zipf-distributed words, so full text has common and rare terms."""

    def __init__(self, seed: int = 7, vocabulary: int = 20_000):
        self.rng = random.Random(seed)
        self.words = _vocabulary(vocabulary, self.rng)
        ranks = np.arange(1, len(self.words) + 1)
        weights = 1.0 / ranks**ZIPF_EXPONENT
        self.cdf = np.cumsum(weights / weights.sum())

    def _phrase(self, n: int) -> str:
        picks = np.searchsorted(self.cdf, [self.rng.random() for _ in range(n)])
        return " ".join(self.words[min(i, len(self.words) - 1)] for i in picks)

    def memory(self) -> dict[str, str]:
        return {"content": self._phrase(14), "context": self._phrase(8), "resolution": self._phrase(10)}

    def query(self, fields: dict[str, str]) -> str:
        words = fields["content"].split()
        start = self.rng.randrange(0, max(1, len(words) - 5))
        return " ".join(words[start : start + 5])


@dataclass
class Row:
    size: int
    fill_rate: float
    upload_ms_p50: float
    upload_ms_mean: float
    uploads_per_s: float
    search_ms_p50: float
    search_ms_p95: float
    knn_ms_p50: float
    knn_ms_p95: float


def _pct(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def bulk_fill(  # type: ignore[no-untyped-def]
    hub,
    tenant_id: uuid.UUID,
    agent_id: uuid.UUID | None,
    corpus: Corpus,
    count: int,
    keep: list | None = None,
) -> float:
    """Insert `count` synthetic memories with binary COPY; drop and rebuild the HNSW index around it.

    `keep`, when given, receives (content_hash, content) of an evenly spread sample of what was stored."""
    stride = max(1, count // PHRASE_SAMPLE)

    start = time.perf_counter()
    raw = hub.db.engine.raw_connection()
    try:
        conn = raw.driver_connection
        with conn.transaction():
            drop_vector_index(_SQLA(conn))
            conn.execute(
                "CREATE TEMP TABLE bench_fill (tenant_id uuid, agent_id uuid, memory_type text, "
                "content text, context text, resolution text, summary_l0 text, overview_l1 text, "
                "embedding vector, content_hash text, index_text text) ON COMMIT DROP"
            )
            done = 0
            while done < count:
                n = min(FILL_BATCH, count - done)
                batch = [corpus.memory() for _ in range(n)]
                vectors = hub.embedder.embed([embedding_text(**m) for m in batch])
                with conn.cursor().copy("COPY bench_fill FROM STDIN WITH (FORMAT BINARY)") as copy:
                    copy.set_types(
                        [
                            "uuid",
                            "uuid",
                            "text",
                            "text",
                            "text",
                            "text",
                            "text",
                            "text",
                            "vector",
                            "text",
                            "text",
                        ]
                    )
                    for j, (m, v) in enumerate(zip(batch, vectors, strict=True)):
                        if keep is not None and (done + j) % stride == 0:
                            keep.append((content_hash(**m), m["content"]))
                        copy.write_row(
                            (
                                tenant_id,
                                agent_id,
                                corpus.rng.choice(MEMORY_TYPES),
                                m["content"],
                                m["context"],
                                m["resolution"],
                                m["content"][:80],
                                m["content"],
                                np.asarray(v, dtype=np.float32),
                                content_hash(**m),
                                fulltext.index_text(*m.values()),
                            )
                        )
                done += n
                print(f"\r  filling: {done}/{count}", end="", file=sys.stderr)
            print(file=sys.stderr)
            conn.execute(
                "INSERT INTO memories (tenant_id, agent_id, memory_type, content, context, resolution, "
                "summary_l0, overview_l1, embedding, content_hash, search_tsv) "
                "SELECT tenant_id, agent_id, memory_type, content, context, resolution, summary_l0, "
                "overview_l1, embedding, content_hash, to_tsvector('simple', index_text) FROM bench_fill"
            )
            conn.execute("SET LOCAL maintenance_work_mem = '512MB'")
            create_vector_index(_SQLA(conn))
        conn.commit()
        # What autovacuum would do next: flush the GIN pending list and refresh the statistics.
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE memories")
        # And what the worker does after it: the lexical ranker's term statistics.
        conn.execute("SELECT ultron_refresh_term_stats(%s)", (tenant_id,))
        conn.autocommit = False
    finally:
        raw.close()
    return count / (time.perf_counter() - start)


class _SQLA:
    """Lets the helpers that take a SQLAlchemy connection run on the raw psycopg one."""

    def __init__(self, conn):  # type: ignore[no-untyped-def]
        self.conn = conn

    def execute(self, clause, params=None):  # type: ignore[no-untyped-def]
        return self.conn.execute(str(clause), params)


@dataclass
class Probe:
    """One database filled to one size, and what was measured on it."""

    size: int
    hub: Any
    actor: Any
    fill_rate: float = 0.0
    upload_ms: list[float] = field(default_factory=list)
    search_ms: list[float] = field(default_factory=list)
    knn_ms: list[float] = field(default_factory=list)
    decisions: dict[str, int] = field(default_factory=dict)
    stored: list[tuple[str, str]] = field(default_factory=list)
    phrase_found: int = 0
    phrase_unique: int = 0
    phrase_asked: int = 0
    redact_ms: list[float] = field(default_factory=list)
    redact_bytes: int = 0

    def upload(self, req: UploadRequest) -> None:
        if self.hub.redactor is not None:  # the redaction an upload does, timed on its own
            fields = {"content": req.content, "context": req.context, "resolution": req.resolution}
            start = time.perf_counter()
            self.hub.redactor.redact_fields(fields)
            self.redact_ms.append((time.perf_counter() - start) * 1000.0)
            self.redact_bytes += sum(len(v.encode()) for v in fields.values())
            # The redactor caches findings per text: forget these, so the upload pays its own redaction.
            getattr(self.hub.redactor, "_cache", {}).clear()
        start = time.perf_counter()
        with self.hub.db.session() as s:
            decision = self.hub.memory.upload(s, self.actor, req).decision
        self.upload_ms.append((time.perf_counter() - start) * 1000.0)
        self.decisions[decision] = self.decisions.get(decision, 0) + 1

    def search(self, query: str) -> None:
        start = time.perf_counter()
        with self.hub.db.session() as s:
            self.hub.memory.search(s, self.actor, query, limit=SEARCH_LIMIT)
        self.search_ms.append((time.perf_counter() - start) * 1000.0)

    def phrases(self, corpus: Corpus, count: int) -> None:
        """Exact-phrase findability: five consecutive words of a stored memory, searched; is it in the top
        10? Counted over the phrases that memory alone holds (most; a phrase of common words may recur)."""

        for content_hash_, content in self.stored[:count]:
            words = content.split()
            start = corpus.rng.randrange(0, max(1, len(words) - 5))
            query = " ".join(words[start : start + 5])
            phrase = fulltext.lexical_query(query).phrase_q
            with self.hub.db.session() as s:
                ids = (
                    s.execute(
                        text("SELECT id FROM memories WHERE tenant_id = :t AND content_hash = :h"),
                        {"t": self.actor.tenant_id, "h": content_hash_},
                    )
                    .scalars()
                    .all()
                )
                holders = (
                    s.execute(
                        text(
                            "SELECT count(*) FROM memories WHERE tenant_id = :t "
                            "AND search_tsv @@ to_tsquery('simple', :q)"
                        ),
                        {"t": self.actor.tenant_id, "q": phrase},
                    ).scalar_one()
                    if phrase
                    else 0
                )
                found = {
                    r.record.id for r in self.hub.memory.search(s, self.actor, query, limit=SEARCH_LIMIT)
                }
            if holders != 1 or len(ids) != 1:
                continue
            self.phrase_unique += 1
            self.phrase_found += ids[0] in found
        self.phrase_asked += min(count, len(self.stored))

    def knn(self, query: str) -> None:
        start = time.perf_counter()
        vector = np.asarray(self.hub.embedder.embed([query], kind="query")[0], dtype=np.float32)
        with self.hub.db.session() as s:
            # The HNSW candidate list the search's dense leg walks with (`search_ef_search`), set in the
            # same round trip as the search sets it: the baseline walks as far as the search does.
            raw = s.connection().connection.driver_connection
            assert raw is not None  # a checked-out connection always has one; SQLAlchemy types it Optional
            ef = int(self.hub.settings.search_ef_search)
            with raw.pipeline():
                raw.execute(f"SELECT set_config('hnsw.ef_search', '{ef}', true)")
                sql = str(q("raw_knn").compile(dialect=s.get_bind().dialect))
                params = {"tenant_id": self.actor.tenant_id, "embedding": vector, "k": SEARCH_LIMIT}
                cursor = raw.execute(sql, params)
            cursor.fetchall()
        self.knn_ms.append((time.perf_counter() - start) * 1000.0)

    def row(self) -> Row:
        mean_upload = statistics.fmean(self.upload_ms)
        return Row(
            size=self.size,
            fill_rate=self.fill_rate,
            upload_ms_p50=_pct(self.upload_ms, 0.5),
            upload_ms_mean=mean_upload,
            uploads_per_s=1000.0 / mean_upload,
            search_ms_p50=_pct(self.search_ms, 0.5),
            search_ms_p95=_pct(self.search_ms, 0.95),
            knn_ms_p50=_pct(self.knn_ms, 0.5),
            knn_ms_p95=_pct(self.knn_ms, 0.95),
        )


def measure(probes: list[Probe], corpus: Corpus, uploads: int, queries: int, progress: Any = None) -> None:
    """Interleave every measurement across the sizes (and search with kNN), so that a noisy machine's
    load drifts over all of them alike and the ratios stay meaningful."""
    # What the hub's worker does within seconds (its `index` step, every `worker_cluster_poll_seconds`):
    # the uploads' vectors into the HNSW graph (ultron/memory/indexing.py), between two uploads at that
    # cadence and once more before the searches; not part of any timed upload or search.
    poll = probes[0].hub.settings.worker_cluster_poll_seconds if probes else 2.0
    next_index = time.monotonic() + poll
    for n in range(uploads):
        fields = corpus.memory()
        for p in probes:
            p.upload(UploadRequest(**fields))
        if time.monotonic() >= next_index:
            for p in probes:
                indexing.index_all(p.hub.db)
            next_index = time.monotonic() + poll
        if progress:
            progress(n + 1, uploads, "uploads")
    for p in probes:
        indexing.index_all(p.hub.db)
    for i in range(queries):
        if progress:
            progress(i + 1, queries, "searches")
        query = corpus.query(corpus.memory())
        for p in probes:
            # Whichever runs second finds the pages the first one read in the cache (past shared_buffers,
            # the HNSW walk of one query vector is most of the cost): alternate which one goes first.
            if i % 2:
                p.search(query)
                p.knn(query)
            else:
                p.knn(query)
                p.search(query)


def report(rows: list[Row]) -> str:
    lines = [
        f"{'stored':>8} {'fill/s':>8} {'upload p50':>11} {'upload/s':>9} {'search p50':>11} "
        f"{'search p95':>11} {'kNN p50':>8} {'kNN p95':>8} {'p95 ratio':>9}",
    ]
    for r in rows:
        lines.append(
            f"{r.size:>8} {r.fill_rate:>8.0f} {r.upload_ms_p50:>9.2f}ms {r.uploads_per_s:>9.1f} "
            f"{r.search_ms_p50:>9.2f}ms {r.search_ms_p95:>9.2f}ms "
            f"{r.knn_ms_p50:>6.2f}ms {r.knn_ms_p95:>6.2f}ms {r.search_ms_p95 / r.knn_ms_p95:>8.2f}x"
        )
    first, last = rows[0], rows[-1]
    lines.append("")
    lines.append(
        f"search p95 / raw kNN p95 at {last.size}: {last.search_ms_p95 / last.knn_ms_p95:.2f}x (target <= 2x)"
    )
    lines.append(
        f"upload cost at {last.size} / at {first.size} (mean latency): "
        f"{last.upload_ms_mean / first.upload_ms_mean:.2f}x (target <= 1.5x)"
    )
    return "\n".join(lines)


@contextmanager
def _server(database_url: str | None, *, shared_buffers: str | None = None) -> Iterator[str]:
    """A Postgres server URL to create the benchmark databases on: the given one or a fresh embedded one
    (its shared_buffers as given, else sized to the machine)."""
    if database_url:
        yield database_url
        return

    data_dir = Path(tempfile.mkdtemp(prefix="ultron-bench-"))
    data_dir.chmod(0o755)
    try:
        yield start_embedded(data_dir, shared_buffers=shared_buffers)
    finally:
        stop_embedded(data_dir)
        shutil.rmtree(data_dir, ignore_errors=True)


def _admin_url(url: str, database: str | None = None) -> str:
    u = make_url(url).set(drivername="postgresql")
    if database:
        u = u.set(database=database)
    return u.render_as_string(hide_password=False)


def run_benchmark(args: argparse.Namespace) -> int:
    sizes = sorted(int(s) for s in args.sizes.split(","))
    corpus = Corpus()
    run_id = uuid.uuid4().hex[:8]
    names = [f"ultron_bench_{run_id}_{size}" for size in sizes]
    probes: list[Probe] = []
    with _server(args.database_url) as server:
        admin = _admin_url(server)
        try:
            for size, name in zip(sizes, names, strict=True):
                with psycopg.connect(admin, autocommit=True) as conn:
                    conn.execute(f"CREATE DATABASE {name}")
                settings = Settings(
                    database_url=_admin_url(server, name),
                    embedding_provider="hash",
                    embedding_dimension=args.dimension,
                    hit_flush_seconds=0,  # the buffered search hits are written once, after the probes
                )
                hub = Hub.open(settings)
                with hub.db.session() as s:
                    actor = local_actor(s)
                probe = Probe(size, hub, actor)
                probes.append(probe)
                print(f"size {size}:", file=sys.stderr)
                probe.fill_rate = bulk_fill(hub, actor.tenant_id, actor.agent_id, corpus, size, probe.stored)
            print("measuring (interleaved across sizes)...", file=sys.stderr)
            with progress_bar() as bar:
                measure(probes, corpus, args.upload_probe, args.queries, progress=bar)
            print("exact phrases...", file=sys.stderr)
            for p in probes:
                p.phrases(corpus, PHRASE_SAMPLE)
        finally:
            for p in probes:
                p.hub.close()
            with psycopg.connect(admin, autocommit=True) as conn:
                for name in names:
                    conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    decisions = {k: sum(p.decisions.get(k, 0) for p in probes) for k in ("created", "merged", "merged_judge")}
    print(
        f"ultron bench core: hash embedder ({args.dimension}-d), heuristic LLM, redaction "
        f"{'on' if Settings().redaction_enabled else 'off'}; per size {args.upload_probe} uploads "
        f"(decisions over all sizes: {decisions}) and {args.queries} searches, limit {SEARCH_LIMIT}; "
        "measurements interleaved across sizes"
    )
    print(report([p.row() for p in probes]))
    for p in probes:
        share = p.phrase_found / max(p.phrase_unique, 1)
        print(
            f"exact-phrase findability at {p.size}: {p.phrase_found}/{p.phrase_unique} five-word phrases "
            f"unique to one memory put it in the top {SEARCH_LIMIT} ({share:.1%}; target >= 99%; "
            f"{p.phrase_asked - p.phrase_unique} of {p.phrase_asked} not unique, not counted)"
        )
    redact_ms = [ms for p in probes for ms in p.redact_ms]
    if redact_ms:
        upload_ms = [ms for p in probes for ms in p.upload_ms]
        kb = sum(p.redact_bytes for p in probes) / 1024
        print(
            f"redaction: {statistics.fmean(redact_ms):.2f} ms per upload, "
            f"{kb / (sum(redact_ms) / 1000):.0f} KB/s, "
            f"{100 * statistics.fmean(redact_ms) / statistics.fmean(upload_ms):.0f}% of mean upload latency"
        )
    return 0
