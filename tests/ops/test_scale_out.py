"""Scale-out: 2 `ultron serve` and 2 `ultron worker` processes on one database, under load.

Nothing acknowledged may be lost and nothing may be stored twice: every acknowledged upload has exactly
one contribution row, every memory an answer named exists, and one text uploaded concurrently through
both API processes becomes exactly one memory. The figures are printed (run with -s to see them).
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg
import pytest

from ultron.cli import build_parser
from ultron.db.engine import Database
from ultron.tenancy import create_agent

API_PROCESSES = 2
WORKER_PROCESSES = 2
CLIENT_THREADS = 4
UNIQUE_UPLOADS = 48  # spread over the client threads and both API processes
HOT_UPLOADS = 16  # the same text, raced through both API processes
SEARCHES = 48
INGESTS = 12  # session files; segmented, scored and extracted by the workers, not inline
DRAIN_TIMEOUT_S = 120.0
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0

# Unrelated words, so that unique uploads stay unique under the hash embedder's dedup thresholds.
WORDS = (
    "kernel socket parquet lambda ingress tarball quota shard vacuum mutex rollback webhook docstring "
    "cron bucket codec heap proxy lockfile bytecode cursor ledger tensor gateway pipeline manifest"
).split()
HOT = {
    "content": "scale-out probe: the same lesson uploaded through both API processes at once",
    "resolution": "dedup under the advisory lock keeps exactly one memory",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker_available() -> bool:
    sub = build_parser()._subparsers._group_actions[0]  # type: ignore[union-attr]
    return "worker" in sub.choices  # type: ignore[union-attr]


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    url: str | None = None

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


@dataclass
class Tally:
    served: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    acknowledged: dict[str, str] = field(default_factory=dict)  # unique token -> memory id
    hot_ids: list[str] = field(default_factory=list)
    sessions: dict[str, str] = field(default_factory=dict)  # file name -> session id
    lock: threading.Lock = field(default_factory=threading.Lock)


def _env(db_url: str, data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTRON_")}
    env.update(
        ULTRON_DATABASE_URL=db_url,
        ULTRON_DATA_DIR=str(data_dir),
        ULTRON_EMBEDDING_PROVIDER="hash",
        ULTRON_LLM_PROVIDER="heuristic",
        # Redaction loads spaCy in every process: four of them would spend the test starting up.
        ULTRON_REDACTION_ENABLED="false",
        ULTRON_HIT_FLUSH_SECONDS="0.2",
        ULTRON_WORKER_POLL_SECONDS="0.5",
        # Queue ingested sessions for the workers instead of segmenting them inside the request.
        ULTRON_INGEST_SEGMENT_INLINE="false",
        ULTRON_LOG_JSON="true",
    )
    return env


def _spawn(name: str, args: list[str], env: dict[str, str], tmp: Path) -> Proc:
    log = tmp / f"{name}.log"
    with log.open("wb") as out:
        popen = subprocess.Popen(
            [sys.executable, "-m", "ultron.cli", *args], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    return Proc(name, popen, log)


def _wait_ready(proc: Proc) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            pytest.fail(f"{proc.name} exited with {proc.popen.returncode}:\n{proc.output()}")
        try:
            if httpx.get(f"{proc.url}/ready", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    pytest.fail(f"{proc.name} not ready after {START_TIMEOUT_S}s:\n{proc.output()}")


def _stop(procs: list[Proc]) -> dict[str, int | None]:
    for p in procs:
        if p.popen.poll() is None:
            p.popen.send_signal(signal.SIGTERM)
    codes = {}
    for p in procs:
        try:
            codes[p.name] = p.popen.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            p.popen.kill()
            codes[p.name] = p.popen.wait()
    return codes


@pytest.fixture()
def cluster(db_url: str, tmp_path: Path) -> Iterator[tuple[list[Proc], list[Proc], str]]:
    db = Database(db_url, pool_size=1)
    try:
        with db.session() as s:
            _, key = create_agent(s, "load-bot", "acme")
    finally:
        db.engine.dispose()
    env = _env(db_url, tmp_path)
    apis = []
    for i in range(API_PROCESSES):
        port = _free_port()
        # One hub per data dir (the record of its URL); the hubs share the database, not the folder.
        own = tmp_path / f"api{i}"
        own.mkdir()
        p = _spawn(
            f"api{i}",
            ["serve", "--no-worker", "--host", "127.0.0.1", "--port", str(port)],
            {**env, "ULTRON_DATA_DIR": str(own)},
            tmp_path,
        )
        p.url = f"http://127.0.0.1:{port}"
        apis.append(p)
    workers = []
    if _worker_available():
        workers = [_spawn(f"worker{i}", ["worker"], env, tmp_path) for i in range(WORKER_PROCESSES)]
    try:
        for p in apis:
            _wait_ready(p)
        yield apis, workers, key
    finally:
        _stop(apis + workers)


def _text(rng: random.Random, token: str) -> dict[str, str]:
    words = rng.sample(WORDS, 6)
    return {
        "content": f"{' '.join(words)} failure {token}",
        "resolution": f"fixed by {rng.choice(WORDS)} {token}",
    }


def _session_file(rng: random.Random, token: str) -> str:
    """A small agent session in the OpenAI messages format: a task, a failure, the fix that worked."""
    a, b, c = rng.sample(WORDS, 3)
    lines = [
        {"role": "user", "content": f"The {a} job fails with a {b} error ({token}); please fix it"},
        {
            "role": "assistant",
            "content": f"Running the {a} job to reproduce: it fails because {b} is missing.",
        },
        {"role": "assistant", "content": f"Installed {b} and pinned {c}; the {a} job passes now."},
        {"role": "user", "content": "Great, that fixed it. Thanks!"},
    ]
    return "\n".join(json.dumps(line) for line in lines) + "\n"


def _client_thread(
    index: int, apis: list[Proc], key: str, tally: Tally, barrier: threading.Barrier, ingest: bool
) -> None:
    rng = random.Random(index)
    headers = {"Authorization": f"Bearer {key}"}
    jobs: list[tuple[str, int]] = []
    jobs += [("upload", i) for i in range(index, UNIQUE_UPLOADS, CLIENT_THREADS)]
    jobs += [("hot", i) for i in range(index, HOT_UPLOADS, CLIENT_THREADS)]
    jobs += [("search", i) for i in range(index, SEARCHES, CLIENT_THREADS)]
    if ingest:
        jobs += [("ingest", i) for i in range(index, INGESTS, CLIENT_THREADS)]
    rng.shuffle(jobs)
    clients = [httpx.Client(base_url=p.url or "", headers=headers, timeout=60) for p in apis]
    try:
        barrier.wait()
        for n, (kind, i) in enumerate(jobs):
            client = clients[(index + n) % len(clients)]  # alternate API processes
            try:
                if kind == "search":
                    r = client.post("/memories/search", json={"query": " ".join(rng.sample(WORDS, 3))})
                elif kind == "hot":
                    r = client.post("/memories/upload", json=HOT)
                elif kind == "ingest":
                    name = f"load-{i:04d}-{uuid.uuid4().hex[:8]}.jsonl"
                    body = {"files": [{"name": name, "content": _session_file(rng, name)}]}
                    r = client.post("/ingest", json=body)
                else:
                    token = f"tok{i:04d}x{uuid.uuid4().hex[:8]}"
                    r = client.post("/memories/upload", json=_text(rng, token))
            except httpx.HTTPError as exc:
                with tally.lock:
                    tally.errors.append(f"{kind}: {exc!r}")
                continue
            with tally.lock:
                if r.status_code >= 300:
                    tally.errors.append(f"{kind}: {r.status_code} {r.text[:200]}")
                    continue
                tally.served[kind] += 1
                if kind == "upload":
                    tally.acknowledged[token] = r.json()["record"]["id"]
                elif kind == "hot":
                    tally.hot_ids.append(r.json()["record"]["id"])
                elif kind == "ingest":
                    result = r.json()["results"][0]
                    if result["status"] != "created":
                        tally.errors.append(f"ingest {name}: {result}")
                    tally.sessions[name] = result["session_id"]
    finally:
        for c in clients:
            c.close()


def _ingest_available(api: Proc) -> bool:
    return "/ingest" in httpx.get(f"{api.url}/openapi.json", timeout=10).json()["paths"]


def _pending(conn: psycopg.Connection) -> tuple[int, int]:
    """Worker items not yet done and not parked: sessions to segment, segments to score or extract."""
    sessions = conn.execute("SELECT count(*) FROM sessions WHERE needs_segmentation AND parked_at IS NULL")
    segments = conn.execute(
        "SELECT count(*) FROM task_segments WHERE stage IN ('score', 'extract') AND parked_at IS NULL"
    )
    return sessions.fetchone()[0], segments.fetchone()[0]  # type: ignore[index]


def _drain(db_url: str) -> float:
    """Wait for the workers to finish what the load queued; returns how long that took."""
    start = time.perf_counter()
    with psycopg.connect(db_url, autocommit=True) as conn:
        while _pending(conn) != (0, 0):
            if time.perf_counter() - start > DRAIN_TIMEOUT_S:
                pytest.fail(f"workers did not drain the queues in {DRAIN_TIMEOUT_S}s: {_pending(conn)} left")
            time.sleep(0.25)
    return time.perf_counter() - start


def _scalar(conn: psycopg.Connection, sql: str, *params: object) -> int:
    return int(conn.execute(sql, params).fetchone()[0])  # type: ignore[index]


def _check_ingests(conn: psycopg.Connection, tally: Tally) -> dict[str, object]:
    """Every ingested session stored once, segmented exactly once by one of the workers, nothing parked."""
    ids = list(tally.sessions.values())
    assert len(set(ids)) == INGESTS
    stored = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE needs_segmentation OR parked_at IS NOT NULL) "
        "FROM sessions WHERE id = ANY(%s::uuid[])",
        (ids,),
    ).fetchone()
    assert stored == (INGESTS, 0), stored
    live = "stage <> 'superseded' AND session_id = ANY(%s::uuid[])"
    assert _scalar(conn, f"SELECT count(DISTINCT session_id) FROM task_segments WHERE {live}", ids) == INGESTS
    duplicated = _scalar(
        conn,
        f"SELECT count(*) FROM (SELECT 1 FROM task_segments WHERE {live} "
        "GROUP BY session_id, segment_index HAVING count(*) > 1) d",
        ids,
    )
    parked = _scalar(conn, f"SELECT count(*) FROM task_segments WHERE {live} AND parked_at IS NOT NULL", ids)
    assert duplicated == 0 and parked == 0
    by_worker = dict(
        conn.execute(
            "SELECT worker_id, sum((counts->>'done')::int) FROM worker_runs "
            "WHERE step = 'segment' AND counts ? 'done' GROUP BY worker_id"
        ).fetchall()
    )
    # Each session leased, segmented and finished once in all: no item worked twice across the workers.
    assert sum(by_worker.values()) == INGESTS, by_worker
    segments = _scalar(conn, f"SELECT count(*) FROM task_segments WHERE {live}", ids)
    return {"segments": segments, "sessions_segmented_per_worker": sorted(by_worker.values(), reverse=True)}


def test_two_apis_and_two_workers_lose_and_duplicate_nothing(cluster, db_url):
    apis, workers, key = cluster
    ingest = bool(workers) and _ingest_available(apis[0])
    tally = Tally()
    barrier = threading.Barrier(CLIENT_THREADS)
    threads = [
        threading.Thread(target=_client_thread, args=(i, apis, key, tally, barrier, ingest))
        for i in range(CLIENT_THREADS)
    ]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    elapsed = time.perf_counter() - start
    drained = _drain(db_url) if ingest else 0.0
    worker_alive = {p.name: p.popen.poll() is None for p in workers}
    codes = _stop(apis + workers)  # graceful: buffered search hits are flushed, leases given back

    with psycopg.connect(db_url) as conn:
        contributions = dict(
            conn.execute(
                "SELECT substring(content from 'tok[0-9]{4}x[0-9a-f]{8}') AS token, count(*) "
                "FROM memory_contributions WHERE content ~ 'tok[0-9]{4}x' GROUP BY 1"
            ).fetchall()
        )
        memory_ids = {str(r[0]) for r in conn.execute("SELECT id FROM memories").fetchall()}
        hot_memories = _scalar(conn, "SELECT count(*) FROM memories WHERE content = %s", HOT["content"])
        hot_contributions = _scalar(
            conn, "SELECT count(*) FROM memory_contributions WHERE content = %s", HOT["content"]
        )
        upload_contributions = _scalar(
            conn,
            "SELECT count(*) FROM memory_contributions WHERE content ~ 'tok[0-9]{4}x' OR content = %s",
            HOT["content"],
        )
        workers_seen = (0, 0)
        failed_runs = 0
        if workers:
            workers_seen = conn.execute("SELECT count(*), count(stopped_at) FROM workers").fetchone()
            failed_runs = _scalar(conn, "SELECT count(*) FROM worker_runs WHERE status = 'failed'")
        ingested = _check_ingests(conn, tally) if ingest else {}

    lost = [t for t in tally.acknowledged if contributions.get(t, 0) == 0]
    duplicated = [t for t, n in contributions.items() if n > 1]
    dangling = [i for i in [*tally.acknowledged.values(), *tally.hot_ids] if i not in memory_ids]
    served = sum(tally.served.values())
    print(
        f"\nscale-out: {API_PROCESSES} API + {len(workers)} worker processes, {CLIENT_THREADS} clients: "
        f"{served} requests served in {elapsed:.2f}s ({served / elapsed:.1f} req/s; {dict(tally.served)}), "
        f"errors {len(tally.errors)}, lost {len(lost)}, "
        f"duplicates {len(duplicated) + max(0, hot_memories - 1)}, "
        f"raced text: {hot_memories} memory from {hot_contributions} uploads; "
        f"workers drained the ingests in {drained:.2f}s {ingested}; exit codes {codes}"
    )
    assert tally.errors == [], tally.errors[:5]
    expected = {"upload": UNIQUE_UPLOADS, "hot": HOT_UPLOADS, "search": SEARCHES}
    assert tally.served == (expected | {"ingest": INGESTS} if ingest else expected)
    assert lost == [] and duplicated == [] and dangling == []
    assert hot_memories == 1 and hot_contributions == HOT_UPLOADS and len(set(tally.hot_ids)) == 1
    assert upload_contributions == UNIQUE_UPLOADS + HOT_UPLOADS
    assert all(code == 0 for code in codes.values()), {p.name: p.output() for p in apis + workers}
    if not workers:
        pytest.skip(
            "the API half passed; `ultron worker` is not in this tree, so the worker half did not run"
        )
    assert all(worker_alive.values()), {p.name: p.output() for p in workers}
    assert workers_seen == (WORKER_PROCESSES, WORKER_PROCESSES) and failed_runs == 0
    if not ingest:
        pytest.skip(
            "uploads, searches and 2 idle workers passed; no /ingest endpoint in this tree to feed them"
        )
