"""`ultron eval retrieval`: retrieval quality on the shipped set, so ranking changes are judged by numbers.

The set (data/retrieval_eval.jsonl) holds 160 memories and 207 queries in English and Chinese, each with
the id of the memory it should find; `note` says what kind of query it is (keyword, paraphrase,
distractor-heavy, cross-lingual). The runner loads the memories into a scratch database (created on the
given server, or on a fresh embedded one, and dropped afterwards) through the upload pipeline without
dedup (so every expected id exists), runs every query through the hub's own search, and prints
recall@1/@3/@10 and MRR (over the top 10), overall and per query kind and language.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ultron.bench.progress import progress_bar

if TYPE_CHECKING:  # loaded by the command, not by the CLI's parser
    from ultron.config import Settings

DEFAULT_SET = Path(__file__).parent / "data" / "retrieval_eval.jsonl"
KS = (1, 3, 10)
SEARCH_LIMIT = 10


@dataclass(frozen=True)
class Query:
    id: str
    lang: str
    kind: str
    text: str
    expected: tuple[str, ...]


@dataclass
class EvalSet:
    memories: list[dict[str, Any]]
    queries: list[Query]


def load_set(path: Path = DEFAULT_SET) -> EvalSet:
    memories, queries = [], []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if row["kind"] == "memory":
            memories.append(row)
        elif row["kind"] == "query":
            queries.append(
                Query(row["id"], row["lang"], row.get("note", "?"), row["query"], tuple(row["expected"]))
            )
        else:
            raise ValueError(f"{path}:{number}: unknown kind {row['kind']!r}")
    return EvalSet(memories, queries)


def rank_of(found: Sequence[str], expected: Sequence[str]) -> int | None:
    """1-based rank of the first expected id among the results; None when none is there."""
    for position, memory_id in enumerate(found, 1):
        if memory_id in expected:
            return position
    return None


@dataclass
class Scores:
    n: int = 0
    hits: dict[int, int] = dataclasses.field(default_factory=lambda: dict.fromkeys(KS, 0))
    reciprocal: float = 0.0

    def add(self, rank: int | None) -> None:
        self.n += 1
        if rank is not None:
            for k in KS:
                self.hits[k] += rank <= k
            self.reciprocal += 1.0 / rank

    def recall(self, k: int) -> float:
        return self.hits[k] / self.n if self.n else 0.0

    @property
    def mrr(self) -> float:
        return self.reciprocal / self.n if self.n else 0.0


def score(queries: Sequence[Query], ranks: dict[str, int | None]) -> dict[str, Scores]:
    """Scores overall, per query kind, per language, and per kind x language."""
    groups: dict[str, Scores] = defaultdict(Scores)
    for query in queries:
        rank = ranks[query.id]
        for group in ("overall", f"kind={query.kind}", f"lang={query.lang}", f"{query.kind}/{query.lang}"):
            groups[group].add(rank)
    return dict(groups)


def format_table(groups: dict[str, Scores]) -> str:
    def order(name: str) -> tuple[int, str]:
        return (
            0
            if name == "overall"
            else 1
            if name.startswith("kind=")
            else 2
            if name.startswith("lang=")
            else 3,
            name,
        )

    lines = [f"{'group':<28} {'n':>4} {'R@1':>6} {'R@3':>6} {'R@10':>6} {'MRR':>6}"]
    for name in sorted(groups, key=order):
        s = groups[name]
        lines.append(
            f"{name:<28} {s.n:>4} {s.recall(1):>6.3f} {s.recall(3):>6.3f} {s.recall(10):>6.3f} {s.mrr:>6.3f}"
        )
    return "\n".join(lines)


@contextmanager
def scratch_database(database_url: str | None) -> Iterator[str]:
    """A new database for one run, on the given server or a fresh embedded one; dropped afterwards."""
    # start-up: loaded when the command runs, not when the CLI builds its parser
    import psycopg
    from sqlalchemy.engine import make_url

    data_dir: Path | None = None
    if database_url:
        server = database_url
    else:
        # start-up: loaded when the command runs, not when the CLI builds its parser
        from ultron.db.embedded import start_embedded

        data_dir = Path(tempfile.mkdtemp(prefix="ultron-eval-"))
        data_dir.chmod(0o755)
        server = start_embedded(data_dir)
    admin = make_url(server).set(drivername="postgresql")
    name = f"ultron_eval_{uuid.uuid4().hex[:8]}"
    try:
        with psycopg.connect(admin.render_as_string(hide_password=False), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        try:
            yield admin.set(database=name).render_as_string(hide_password=False)
        finally:
            with psycopg.connect(admin.render_as_string(hide_password=False), autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    finally:
        if data_dir is not None:
            # start-up: loaded when the command runs, not when the CLI builds its parser
            from ultron.db.embedded import stop_embedded

            stop_embedded(data_dir)
            shutil.rmtree(data_dir, ignore_errors=True)


def load_memories(
    hub: Any, actor: Any, memories: Sequence[dict[str, Any]], progress: Any = None
) -> dict[UUID, str]:
    """Each memory through the upload pipeline (redaction, type, summaries, embedding), never merged."""
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.memory.schemas import UploadRequest

    ids: dict[UUID, str] = {}
    for start in range(0, len(memories), 50):
        with hub.db.session() as session:
            for row in memories[start : start + 50]:
                req = UploadRequest(
                    content=row["content"],
                    context=row.get("context", ""),
                    resolution=row.get("resolution", ""),
                    tags=row.get("tags", []),
                )
                prepared = hub.memory._prepare(req, actor)
                ids[hub.memory._create(session, actor, prepared).record.id] = row["id"]
        if progress:
            progress(len(ids), len(memories), "load memories")
    return ids


def run_eval(
    settings: Settings, data: EvalSet, progress: Any = None
) -> tuple[dict[str, Scores], dict[str, Any]]:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.hub import Hub
    from ultron.tenancy import local_actor

    hub = Hub.open(settings)
    try:
        with hub.db.session() as session:
            actor = local_actor(session)
        started = time.perf_counter()
        ids = load_memories(hub, actor, data.memories, progress)
        with hub.db.session() as session:  # what the worker (or the hub's own keeper) does after uploads
            hub.memory.refresh_term_stats(session, actor.tenant_id)
        loaded = time.perf_counter() - started
        ranks: dict[str, int | None] = {}
        started = time.perf_counter()
        for n, query in enumerate(data.queries, 1):
            with hub.db.session() as session:
                results = hub.memory.search(session, actor, query.text, limit=SEARCH_LIMIT)
            ranks[query.id] = rank_of([ids.get(r.record.id, "?") for r in results], query.expected)
            if progress:
                progress(n, len(data.queries), "queries")
        searched = time.perf_counter() - started
        embedder = hub.embedder
        info = {
            "embedder": f"{settings.embedding_provider} ({embedder.model_name}, {embedder.dimension}-d)",
            "memories": len(ids),
            "queries": len(data.queries),
            "load_seconds": round(loaded, 2),
            "search_ms": round(1000 * searched / max(len(data.queries), 1), 1),
            "misses": sorted(q for q, r in ranks.items() if r is None),
        }
        return score(data.queries, ranks), info
    finally:
        hub.close()


def main(args: argparse.Namespace) -> int:
    if getattr(args, "suite", "developer") == "conversations":
        # start-up: loaded when the command runs, not when the CLI builds its parser
        from ultron.bench.evaluation.conversations import main as conversations_main

        return conversations_main(args)
    if getattr(args, "suite", "developer") == "sweep":
        # start-up: loaded when the command runs, not when the CLI builds its parser
        from ultron.bench.evaluation.sweep import main as sweep_main

        return sweep_main(args)
    from ultron.config import Settings  # start-up: pydantic-settings loads when the command runs

    data = load_set(Path(args.set) if args.set else DEFAULT_SET)
    with scratch_database(args.database_url) as url:
        settings = Settings(
            database_url=url,
            data_dir=Path(tempfile.gettempdir()),
            embedding_provider=args.embedding_provider or "local",
            llm_provider="heuristic",
            # The set holds no secrets; redaction would only slow the load down.
            redaction_enabled=False,
            hit_flush_seconds=0,  # no hit is written during the run: every query sees the same ranking
        )
        with progress_bar() as bar:
            groups, info = run_eval(settings, data, progress=bar)
    if args.json:
        out = {
            name: {"n": s.n, **{f"recall@{k}": round(s.recall(k), 4) for k in KS}, "mrr": round(s.mrr, 4)}
            for name, s in groups.items()
        }
        print(json.dumps({"info": info, "groups": out}, ensure_ascii=False, indent=2))
        return 0
    print(
        f"ultron eval retrieval: {info['queries']} queries over {info['memories']} memories; "
        f"embedder {info['embedder']}; heuristic LLM; search limit {SEARCH_LIMIT}; "
        f"load {info['load_seconds']} s, {info['search_ms']} ms/query"
    )
    print(format_table(groups))
    if args.misses:
        print(f"missed (not in top {SEARCH_LIMIT}): {', '.join(info['misses']) or 'none'}")
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("eval", help="retrieval quality: recall@1/@3/@10 and MRR on the shipped en/zh set")
    p.add_argument(
        "--embedding-provider",
        dest="embedding_provider",
        choices=["local", "hash", "dashscope", "openai"],
        help="embedder to evaluate (default local)",
    )
    p.add_argument(
        "--suite",
        choices=["developer", "conversations", "sweep"],
        default="developer",
        help="developer: the 207-query en/zh set; conversations: long chats beside BM25 and dense-only; "
        "sweep: both under each candidate fusion setting (docs/ranking.md)",
    )
    p.add_argument("--database-url", dest="database_url", help="run on this server (a scratch database)")
    p.add_argument(
        "--set", default=None, help=f"evaluation JSONL (default {DEFAULT_SET.name} or conversations.jsonl)"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--dump", default=None, help="conversations: write every hub result's explain to this JSON"
    )
    p.add_argument(
        "--relevance-only",
        dest="relevance_only",
        action="store_true",
        help="sweep: only fit the relevance weights and floor, on the settings in force",
    )
    p.add_argument("--misses", action="store_true", help="list the queries whose memory is not in the top 10")
    p.set_defaults(func=main)
