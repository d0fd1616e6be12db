"""Scale-out: 2 `ultron serve` and 2 `ultron worker` processes on one database, under load.

Nothing acknowledged may be lost and nothing may be stored twice: every acknowledged upload has exactly
one contribution row, every memory an answer named exists, and one text uploaded concurrently through
both API processes becomes exactly one memory. The figures are printed (run with -s to see them).
"""

from __future__ import annotations

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
        p = _spawn(f"api{i}", ["serve", "--host", "127.0.0.1", "--port", str(port)], env, tmp_path)
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


def _client_thread(index: int, apis: list[Proc], key: str, tally: Tally, barrier: threading.Barrier) -> None:
    rng = random.Random(index)
    headers = {"Authorization": f"Bearer {key}"}
    jobs: list[tuple[str, int]] = []
    jobs += [("upload", i) for i in range(index, UNIQUE_UPLOADS, CLIENT_THREADS)]
    jobs += [("hot", i) for i in range(index, HOT_UPLOADS, CLIENT_THREADS)]
    jobs += [("search", i) for i in range(index, SEARCHES, CLIENT_THREADS)]
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
    finally:
        for c in clients:
            c.close()


def test_two_apis_and_two_workers_lose_and_duplicate_nothing(cluster, db_url):
    apis, workers, key = cluster
    tally = Tally()
    barrier = threading.Barrier(CLIENT_THREADS)
    threads = [
        threading.Thread(target=_client_thread, args=(i, apis, key, tally, barrier))
        for i in range(CLIENT_THREADS)
    ]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    elapsed = time.perf_counter() - start
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
        hot_memories = conn.execute(
            "SELECT count(*) FROM memories WHERE content = %s", (HOT["content"],)
        ).fetchone()[0]  # type: ignore[index]
        hot_contributions = conn.execute(
            "SELECT count(*) FROM memory_contributions WHERE content = %s", (HOT["content"],)
        ).fetchone()[0]  # type: ignore[index]
        total_contributions = conn.execute("SELECT count(*) FROM memory_contributions").fetchone()[0]  # type: ignore[index]
        worker_rows = (
            conn.execute("SELECT count(*), count(stopped_at) FROM workers").fetchone() if workers else (0, 0)
        )
        failed_runs = (
            conn.execute("SELECT count(*) FROM worker_runs WHERE status = 'failed'").fetchone()[0]  # type: ignore[index]
            if workers
            else 0
        )

    lost = [t for t in tally.acknowledged if contributions.get(t, 0) == 0]
    duplicated = [t for t, n in contributions.items() if n > 1]
    dangling = [i for i in [*tally.acknowledged.values(), *tally.hot_ids] if i not in memory_ids]
    served = sum(tally.served.values())
    print(
        f"\nscale-out: {API_PROCESSES} API + {len(workers)} worker processes, {CLIENT_THREADS} clients: "
        f"{served} requests served in {elapsed:.2f}s ({served / elapsed:.1f} req/s; "
        f"{dict(tally.served)}), errors {len(tally.errors)}, lost {len(lost)}, "
        f"duplicates {len(duplicated) + max(0, (hot_memories or 0) - 1)}, "
        f"hot text: {hot_memories} memory from {hot_contributions} uploads; exit codes {codes}"
    )
    assert tally.errors == [], tally.errors[:5]
    assert tally.served == {"upload": UNIQUE_UPLOADS, "hot": HOT_UPLOADS, "search": SEARCHES}
    assert lost == [] and duplicated == [] and dangling == []
    assert hot_memories == 1 and hot_contributions == HOT_UPLOADS and len(set(tally.hot_ids)) == 1
    assert total_contributions == UNIQUE_UPLOADS + HOT_UPLOADS
    assert all(code == 0 for code in codes.values()), {p.name: p.output() for p in apis + workers}
    if not workers:
        pytest.skip(
            "the API half passed; `ultron worker` is not in this tree, so the worker half did not run"
        )
    assert all(worker_alive.values()), {p.name: p.output() for p in workers}
    assert worker_rows == (WORKER_PROCESSES, WORKER_PROCESSES) and failed_runs == 0
