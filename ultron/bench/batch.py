"""`ultron bench batch`: batch upload throughput against single uploads measured in the same run.

Two fresh databases on one embedded server, the same synthetic corpus (ultron.bench.core.Corpus) for both:
`--items` memories go in through `Ultron.upload_batch` (500 per call) into one, and a sample of
`--single` of them through `Ultron.upload`, one call each, into the other, the two interleaved chunk by
chunk so that the machine's load drifts over both alike. The rest of each chunk goes into the second
database too, by an untimed batch, so that both stores hold the same memories whenever a timed upload
runs: an upload's cost grows with the store (the HNSW inserts, the dedup probe, the clusters), and a
single-upload store of only `--single` memories made single uploads look cheaper than they are at 10k.
Both go through the in-process SDK (the whole service path: redaction, type, summaries, embedding, dedup
under its lock, cluster assignment, contribution), so HTTP's own cost, which favours batches further, is
left out.

`--corpus real` uses texts a person wrote instead of the synthetic word lists: the pairs of the dedup
calibration set (half of them duplicates of each other, so a batch merges and re-probes), the topic sets of
the cluster calibration and the turns of the conversation suite (ultron/bench/data, evaluation/data; each
distinct item once, shuffled with a fixed seed). Capitalised words run the NER model, and with the local
embedder the texts are what e5 was trained on; the synthetic words read to e5 as one topic (57 % of them
merged).
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Iterable
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("bench-batch", help="batch upload throughput against single uploads (same run)")
    p.add_argument("--database-url", dest="database_url", help="benchmark on this server (new databases)")
    p.add_argument("--items", type=int, default=10_000, help="memories uploaded in batches")
    p.add_argument("--single", type=int, default=400, help="of them, how many also go one by one")
    p.add_argument("--batch-size", type=int, default=500, help="items per batch call (at most 500)")
    p.add_argument(
        "--embedder", choices=("hash", "local"), default="hash", help="hash (256-d) or the local e5 model"
    )
    p.add_argument(
        "--corpus",
        choices=("synthetic", "real"),
        default="synthetic",
        help="synthetic word lists, or the shipped human-written texts (833 distinct; --items at most 831)",
    )
    p.set_defaults(func=run)


def _forget_texts(hubs: Iterable[Any]) -> None:
    """Empty the process-wide memories of per-text results (the redactor's findings, the NER model's
    entities, jieba's tags): the two stores share them, so a single upload of a text the batch store has
    just uploaded would skip its redaction's model pass. Each timed upload pays its own, as a new text's."""
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.privacy.nlp import ENTITY_MEMO
    from ultron.privacy.personal import ChineseNameRecognizer

    for hub in hubs:
        if hub.redactor is not None:
            hub.redactor.forget()
    ENTITY_MEMO.forget()
    ChineseNameRecognizer.forget()


def real_items() -> list[dict[str, str]]:
    """The shipped human-written memories and turns (`--corpus real`), shuffled with a fixed seed."""
    # start-up: loaded when the command runs, not when the CLI builds its parser
    import json
    import random
    from pathlib import Path

    root = Path(__file__).parent
    fields = ("content", "context", "resolution")
    out: list[dict[str, str]] = []
    for line in (root / "data" / "dedup_calibration.jsonl").read_text(encoding="utf-8").splitlines():
        pair = json.loads(line)
        out += [{f: pair[k][f] for f in fields if pair[k].get(f)} for k in ("a", "b")]
    for name in ("cluster_topics.jsonl", "cluster_topics_heldout.jsonl"):
        for line in (root / "data" / name).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            out.append({f: row[f] for f in fields if row.get(f)})
    for line in (
        (root / "evaluation" / "data" / "conversations.jsonl").read_text(encoding="utf-8").splitlines()
    ):
        row = json.loads(line)
        if row.get("kind") == "turn":
            out.append({"content": row["text"]})
    # The calibration pairs reuse a memory in several pairs, and chats repeat "See you.": each text once.
    out = list({tuple(sorted(item.items())): item for item in out}.values())
    random.Random(3).shuffle(out)
    return out


def run(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    import psycopg

    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.bench.core import Corpus, _admin_url, _server
    from ultron.config import Settings
    from ultron.hub import Hub
    from ultron.memory import indexing
    from ultron.memory.schemas import MAX_BATCH_ITEMS
    from ultron.sdk import Ultron
    from ultron.sdk._local import LocalBackend

    size = min(args.batch_size, MAX_BATCH_ITEMS)
    items: list[dict[str, Any]]
    if args.corpus == "real":
        items = real_items()
        if args.items > len(items) - 2:
            raise ValueError(f"--corpus real has {len(items)} items: ask for at most {len(items) - 2}")
        items = items[: args.items + 2]
    else:
        corpus = Corpus()
        items = [corpus.memory() for _ in range(args.items + 2)]
    warm, items = items[:2], items[2:]
    chunks = [items[i : i + size] for i in range(0, len(items), size)]
    per_chunk = max(1, args.single // len(chunks))
    names = {kind: f"ultron_bbench_{uuid.uuid4().hex[:8]}_{kind}" for kind in ("batch", "single")}
    hubs: dict[str, Any] = {}
    timings = {"batch": 0.0, "single": 0.0}
    counts = {"batch": 0, "single": 0}
    decisions: dict[str, dict[str, int]] = {"batch": {}, "single": {}}
    with _server(args.database_url) as server:
        admin = _admin_url(server)
        try:
            for kind, name in names.items():
                with psycopg.connect(admin, autocommit=True) as conn:
                    conn.execute(f"CREATE DATABASE {name}")
                dimension: dict[str, Any] = {"embedding_dimension": 256} if args.embedder == "hash" else {}
                settings = Settings(
                    database_url=_admin_url(server, name),
                    embedding_provider=args.embedder,
                    hit_flush_seconds=0,
                    **dimension,
                )
                hubs[kind] = Hub.open(settings)
            clients = {k: Ultron._of(LocalBackend(h, owns_hub=False)) for k, h in hubs.items()}
            # Warm both paths (models, plans, pools) once, on items the timed run does not upload again.
            clients["batch"].upload_batch(warm[:1])
            clients["single"].upload(**warm[1])
            for n, chunk in enumerate(chunks):
                _forget_texts(hubs.values())
                start = time.perf_counter()
                result = clients["batch"].upload_batch(chunk)
                timings["batch"] += time.perf_counter() - start
                counts["batch"] += len(chunk)
                for r in result.results:
                    decisions["batch"][r.decision] = decisions["batch"].get(r.decision, 0) + 1
                for item in chunk[:per_chunk]:
                    _forget_texts(
                        hubs.values()
                    )  # the batch store just read this text: its results are shared
                    start = time.perf_counter()
                    decision = clients["single"].upload(**item).decision
                    timings["single"] += time.perf_counter() - start
                    counts["single"] += 1
                    decisions["single"][decision] = decisions["single"].get(decision, 0) + 1
                if chunk[per_chunk:]:  # untimed: the single-upload store grows as the batch store does
                    clients["single"].upload_batch(chunk[per_chunk:])
                for hub in hubs.values():  # untimed: what the hub's worker does within seconds (its index
                    indexing.index_all(hub.db)  # step: the uploads' HNSW entries, ultron/memory/indexing.py)
                print(f"\r  batches: {n + 1}/{len(chunks)}", end="", file=sys.stderr)
            print(file=sys.stderr)
        finally:
            for hub in hubs.values():
                hub.close()
            with psycopg.connect(admin, autocommit=True) as conn:
                for name in names.values():
                    conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    rate = {k: counts[k] / timings[k] for k in timings}
    print(
        f"ultron bench batch: {args.corpus} corpus, {args.embedder} embedder, heuristic LLM, redaction "
        f"{'on' if Settings().redaction_enabled else 'off'}; {counts['batch']} memories in batches of {size} "
        f"(decisions {decisions['batch']}), {counts['single']} of them one by one (decisions "
        f"{decisions['single']}), interleaved"
    )
    print(f"single uploads: {rate['single']:8.1f} memories/s ({1000 / rate['single']:.2f} ms each)")
    print(f"batch uploads:  {rate['batch']:8.1f} memories/s ({1000 / rate['batch']:.2f} ms each)")
    ratio = rate["batch"] / rate["single"]
    print(f"batch / single throughput: {ratio:.2f}x (issue 36: >= 3x, a batch item <= 1/3 of a single)")
    return 0
