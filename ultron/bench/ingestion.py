"""`ultron bench ingest`: ingestion throughput with offline providers.

Two workloads through the whole ingest path (parse, normalize, redact if on, store messages, heuristic
segmentation, raw archive): one session of 10,000 messages, and 1,000 small session files sent in
batches of 200 (as the SDK sends them). Then the trajectory steps (score, extract) over what was
ingested. Parse-only rates are printed too, so the database's share is visible.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta

import psycopg

from ultron.bench.core import _admin_url, _server
from ultron.config import Settings
from ultron.hub import Hub, build_worker
from ultron.ingestion.formats import parse_session
from ultron.ingestion.paths import BATCH_FILES
from ultron.ingestion.schemas import IngestFile
from ultron.tenancy import local_actor

TOOLS = ["shell", "pytest", "edit_file", "kubectl", "git"]
GOALS = [
    "the {x} service fails to start after the upgrade, find out why",
    "write a migration that adds an index on {x}.created_at",
    "our CI job for {x} times out on the integration tests",
    "explain why {x} uses so much memory under load",
    "rename the {x} module and fix every import",
]
NOUNS = ["billing", "search", "auth", "reports", "gateway", "scheduler", "inventory", "mailer"]


def _task(rng: random.Random, start: datetime, steps: int) -> list[dict[str, object]]:
    noun = rng.choice(NOUNS)
    t = start
    out: list[dict[str, object]] = [
        {"role": "user", "content": rng.choice(GOALS).format(x=noun), "timestamp": t.isoformat()}
    ]
    for i in range(steps):
        t += timedelta(seconds=rng.randint(2, 40))
        call = f"call_{uuid.uuid4().hex[:8]}"
        tool = rng.choice(TOOLS)
        out.append(
            {
                "role": "assistant",
                "content": f"Step {i}: checking the {noun} {tool} output.",
                "tool_calls": [
                    {"id": call, "type": "function", "function": {"name": tool, "arguments": "{}"}}
                ],
                "timestamp": t.isoformat(),
            }
        )
        failed = rng.random() < 0.2
        body = (
            f"Traceback (most recent call last):\n  ValueError: bad {noun}" if failed else f"ok: {noun} {i}"
        )
        out.append({"role": "tool", "tool_call_id": call, "content": body, "timestamp": t.isoformat()})
    out.append(
        {"role": "assistant", "content": f"Fixed: the {noun} issue is resolved.", "timestamp": t.isoformat()}
    )
    out.append({"role": "user", "content": "Thanks, works now.", "timestamp": t.isoformat()})
    return out


def synthetic_session(messages: int, seed: int) -> bytes:
    """A realistic-looking agent session: tasks of tool runs with some failures, until `messages`."""
    rng = random.Random(seed)
    rows: list[dict[str, object]] = []
    t = datetime(2025, 5, 1, 8, 0, tzinfo=UTC)
    while len(rows) < messages:
        rows.extend(_task(rng, t, rng.randint(2, 8)))
        t += timedelta(minutes=rng.randint(1, 90))
    return "\n".join(json.dumps(r) for r in rows[:messages]).encode()


def _ingest(hub, actor, files: list[IngestFile]) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    segments = 0
    for i in range(0, len(files), BATCH_FILES):
        with hub.db.session() as session:
            segments += hub.ingestion.ingest_files(session, actor, files[i : i + BATCH_FILES]).new_segments
    return time.perf_counter() - start, segments


def _parse_rate(files: list[IngestFile]) -> float:
    start = time.perf_counter()
    count = sum(len(parse_session(f.content).messages) for f in files)
    return count / (time.perf_counter() - start)


def run_ingest_benchmark(args: argparse.Namespace) -> int:
    big = [IngestFile("big-session.jsonl", synthetic_session(args.messages, seed=1))]
    small = [
        IngestFile(f"small/run-{i:04d}.jsonl", synthetic_session(args.file_messages, seed=100 + i))
        for i in range(args.files)
    ]
    small_messages = (
        sum(len(parse_session(f.content).messages) for f in small[:50]) * len(small) / min(50, len(small))
    )
    name = f"ultron_bench_ingest_{uuid.uuid4().hex[:8]}"
    redaction = Settings().redaction_enabled
    with _server(args.database_url) as server:
        with psycopg.connect(_admin_url(server), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        hub = Hub.open(
            Settings(
                database_url=_admin_url(server, name), embedding_provider="hash", llm_provider="heuristic"
            )
        )
        try:
            with hub.db.session() as session:
                actor = local_actor(session)
            print("ingesting the big session...", file=sys.stderr)
            big_s, big_segments = _ingest(hub, actor, big)
            print("ingesting the small files...", file=sys.stderr)
            small_s, small_segments = _ingest(hub, actor, small)
            print("re-ingesting the small files (unchanged)...", file=sys.stderr)
            again_s, _ = _ingest(hub, actor, small)
            print("scoring and extracting...", file=sys.stderr)
            worker = build_worker(hub)
            start = time.perf_counter()
            totals = {"scored": 0, "extracted": 0, "memories": 0}
            while True:
                counts = worker.process_due(limit=500)
                for key in totals:
                    totals[key] += counts[key]
                if counts["scored"] + counts["extracted"] == 0:
                    break
            steps_s = time.perf_counter() - start
        finally:
            hub.close()
            with psycopg.connect(_admin_url(server), autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    big_rate = args.messages / big_s
    small_rate = small_messages / small_s
    print(
        f"ultron bench ingest: hash embedder, heuristic LLM and segmentation, redaction "
        f"{'on' if redaction else 'off'}; embedded Postgres"
    )
    print(f"{'workload':<34} {'seconds':>8} {'messages/s':>11} {'parse-only msg/s':>17} {'segments':>9}")
    print(
        f"{f'1 session x {args.messages} messages':<34} {big_s:>8.2f} {big_rate:>11.0f} "
        f"{_parse_rate(big):>17.0f} {big_segments:>9}"
    )
    print(
        f"{f'{args.files} files x {args.file_messages} messages':<34} {small_s:>8.2f} {small_rate:>11.0f} "
        f"{_parse_rate(small):>17.0f} {small_segments:>9}"
    )
    print(f"{'same files again (unchanged)':<34} {again_s:>8.2f} {small_messages / again_s:>11.0f}")
    print(
        f"score + extract: {totals['scored']} segments scored, {totals['extracted']} extracted "
        f"({totals['memories']} memories) in {steps_s:.2f} s = {totals['scored'] / steps_s:.1f} segments/s"
    )
    print(
        f"small-file rate / big-session rate: {small_rate / big_rate:.2f}x; "
        f"files/s: {args.files / small_s:.1f}"
    )
    return 0
