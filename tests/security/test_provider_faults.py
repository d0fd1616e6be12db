"""Issue 16, found 1 and 2: provider faults answer a typed 503 (or succeed through the heuristic
fallback), never a bare 500 and never a half-written row; a provider that hangs holds no database
connection, and `/health` stays fast meanwhile.

The providers are fake OpenAI-compatible servers on 127.0.0.1 (tests/fakes/servers.py), one for the
embeddings and one for chat, each switched through the fault matrix: 500, 429 with Retry-After, a hang,
a body that is not JSON, a wrong dimension, NaN, an empty answer.
"""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.security.conftest import remote_settings, row_counts
from ultron.api.app import create_app
from ultron.web.serve import LiveServer

LESSON = re.compile(r"lesson (\d+)")
FAULTS = ("500", "429", "slow", "garbage", "wrong_dim", "nan", "empty")
UPLOAD = {"content": "pg_dump fails with 'too many open files' on a 3000-table schema", "tags": ["pg"]}


@pytest.fixture()
def embed_hub(make_hub, fake_openai):  # type: ignore[no-untyped-def]
    fake_openai.slow_seconds = 4.0
    return make_hub(**remote_settings(fake_openai, None))


@pytest.fixture()
def chat_hub(make_hub, fake_chat):  # type: ignore[no-untyped-def]
    fake_chat.slow_seconds = 4.0
    return make_hub(**remote_settings(None, fake_chat))


@pytest.mark.parametrize("mode", FAULTS)
def test_embedding_fault_answers_typed_503_and_writes_nothing(embed_hub, fake_openai, mode):
    before = row_counts(embed_hub)
    fake_openai.mode = mode
    with TestClient(create_app(embed_hub, allow_open=True), raise_server_exceptions=False) as c:
        calls = (
            ("POST", "/memories/upload", UPLOAD),
            ("POST", "/memories/search", {"query": "too many open files"}),
            ("POST", "/ingest/text", {"text": "Lesson: raise ulimit -n before pg_dump of big schemas."}),
        )
        for i, (method, path, body) in enumerate(calls):
            r = c.request(method, path, json=body)
            assert r.status_code == 503, (path, r.status_code, r.text)
            assert r.headers["content-type"].startswith("application/json")
            assert r.json()["error"] == "provider_unavailable"
            assert "nothing was stored" in r.json()["detail"]
            assert int(r.headers["retry-after"]) >= 1
            if mode == "429":  # the provider's own Retry-After is passed on (then what is left of it)
                retry_after = int(r.headers["retry-after"])
                assert retry_after == fake_openai.retry_after or (
                    i > 0 and retry_after < fake_openai.retry_after
                )
        assert c.get("/health").status_code == 200
    assert row_counts(embed_hub) == before


@pytest.mark.parametrize("mode", FAULTS)
def test_chat_fault_falls_back_to_the_heuristic_within_the_deadline(chat_hub, fake_chat, mode):
    fake_chat.mode = mode
    with TestClient(create_app(chat_hub, allow_open=True), raise_server_exceptions=False) as c:
        start = time.monotonic()
        r = c.post("/memories/upload", json=UPLOAD)
        elapsed = time.monotonic() - start
        assert r.status_code == 201, r.text
        print(f"chat fault {mode}: upload 201 in {elapsed:.2f}s")
        record = r.json()["record"]
        assert record["content"] == UPLOAD["content"] and record["summary_l0"]
        # One upload asks the model up to twice (type, summary): bounded by the chat deadline, not by
        # timeout x retries x calls (31-102 s before the fix). Generous: the bound, not the speed.
        assert elapsed < 2 * chat_hub.settings.llm_deadline_seconds + 3
        if mode == "slow":
            # The breaker is open after the hang: the next upload does not ask the model at all.
            asked = len(fake_chat.requests)
            assert c.post("/memories/upload", json={"content": "another lesson"}).status_code == 201
            assert len(fake_chat.requests) == asked


def test_breaker_closes_again_once_the_provider_answers(embed_hub, fake_openai):
    with TestClient(create_app(embed_hub, allow_open=True)) as c:
        fake_openai.mode = "500"
        assert c.post("/memories/upload", json=UPLOAD).status_code == 503
        fake_openai.mode = "ok"
        time.sleep(embed_hub.settings.provider_cooldown_seconds + 0.1)
        assert c.post("/memories/upload", json=UPLOAD).status_code == 201


def test_hanging_embedder_holds_no_connection_and_health_stays_fast(make_hub, fake_openai):
    """24 concurrent uploads (and searches) by one agent against an embedder that hangs (found 2)."""
    # A 5 s deadline (2 s elsewhere): on a loaded box the 24 take over a second to authenticate, and the
    # check below needs a moment when every one of them is waiting on the embedder at once.
    fake_openai.slow_seconds = 10.0
    settings = remote_settings(fake_openai, None) | {
        "db_pool_size": 2,
        "provider_cooldown_seconds": 0,
        "llm_timeout": 2.5,
        "provider_deadline_seconds": 5.0,
    }
    hub = make_hub(**settings)
    fake_openai.mode = "slow"
    pool = hub.db.engine.pool
    checked_out: list[tuple[float, int, int]] = []  # (when, connections out, requests at the embedder)
    health: list[tuple[int, float]] = []
    done = threading.Event()

    with LiveServer(create_app(hub, allow_open=True)) as url, httpx.Client(base_url=url, timeout=30) as http:

        def upload(i: int) -> int:  # every other one a search: it embeds its query, and hangs too
            if i % 2:
                return http.post("/memories/search", json={"query": f"lesson {i}"}).status_code
            return http.post("/memories/upload", json={"content": f"lesson {i}: hang"}).status_code

        def probe() -> None:
            with httpx.Client(base_url=url, timeout=10) as h:
                while not done.is_set():
                    arrived = len(set(LESSON.findall(" ".join(fake_openai.bodies()))))  # read first
                    checked_out.append((time.monotonic(), pool.checkedout(), arrived))
                    start = time.monotonic()
                    status = h.get("/health").status_code
                    health.append((status, time.monotonic() - start))
                    time.sleep(0.05)

        prober = threading.Thread(target=probe)
        prober.start()
        started = time.monotonic()
        try:
            with ThreadPoolExecutor(24) as ex:
                statuses = list(ex.map(upload, range(24)))
        finally:
            done.set()
            prober.join()

    worst = max(seconds for _, seconds in health)
    print(
        f"hanging embedder: 24 requests: {sorted(set(statuses))}; /health x{len(health)}, worst {worst:.3f}s"
    )
    assert statuses == [503] * 24  # each fails at the deadline, as provider_unavailable
    assert len(health) >= 10
    assert all(status == 200 for status, _ in health), health
    # /health never waits for the hanging embedder (it answered 500 after 30 s before the fix). The issue's
    # figure is 1 s (0.34 s worst on a quiet box, printed above); the bound is half the 6 s hang, so that a
    # loaded CI box (1.23 s seen at load 6) does not fail a test about waiting, not about speed.
    assert worst < 3.0, max(health, key=lambda h: h[1])
    # Waiting on the embedder holds no connection: while all 24 wait on it (each has authenticated, in a
    # short transaction) and before the first deadline, at most the probe's own connection is out. With
    # a connection held per request, the pool of 2 would let no more than 2 reach the embedder at once.
    # Timed from the requests' arrival, not from the start: at load 10 authenticating took over a second.
    deadline = hub.settings.provider_deadline_seconds
    waiting = [n for at, n, arrived in checked_out if arrived == 24 and at <= started + deadline - 0.2]
    print(f"all 24 at the embedder: {len(waiting)} samples, at most {max(waiting, default=-1)} out")
    assert waiting and max(waiting) <= 1, checked_out
