"""The redactor's per-text cache and its batched NER pass (`warm`) give exactly what one call per text
gives; the embedding cache returns the vectors the embedder would."""

from __future__ import annotations

import numpy as np

from ultron.privacy.policy import RedactionPolicy
from ultron.privacy.redactor import Redactor
from ultron.providers.cache import CachedEmbedder
from ultron.providers.hashing import HashEmbedder

TEXTS = [
    "Maria Lopez reset the staging token sk-abcdefghijklmnopqrstuvwxyz123456 on Tuesday",
    "restart it, nothing else to see here",
    "call +33 5 69 40 01 42 or mail ops@example.com about the outage",
    "张伟的手机13800138000，密码：hunter2",
    "Ask John Smith before merging the migration",
]


def test_warm_then_redact_equals_redacting_each_text_alone():
    alone = [Redactor().redact(t) for t in TEXTS]
    batched = Redactor()
    batched.warm(TEXTS * 2)
    assert [batched.redact(t) for t in TEXTS] == alone
    assert any(r.entities.get("PERSON") for r in alone)  # the NER model's pass is covered too
    stats = batched.stats()
    assert stats["calls"] == len(TEXTS) and stats["cached"] == len(TEXTS) - stats["fast_path"]


def test_cache_is_per_policy_and_hits_repeat_calls():
    redactor = Redactor()
    text = "ask Maria Lopez for the key, mail maria@example.com"
    first = redactor.redact(text)
    assert redactor.redact(text) == first and redactor.stats()["cached"] == 1
    keep_names = RedactionPolicy(disabled_entities=frozenset({"PERSON"}))
    other = redactor.redact(text, keep_names)
    assert "Maria" in other.text and "Maria" not in first.text
    assert redactor.stats()["EMAIL_ADDRESS"] == 3


def test_embedding_cache_returns_the_embedders_vectors_and_embeds_misses_once():
    calls: list[list[str]] = []
    inner = HashEmbedder(64)

    class Counting:
        model_name, dimension = inner.model_name, inner.dimension

        def embed(self, texts, *, kind="document"):  # type: ignore[no-untyped-def]
            calls.append(list(texts))
            return inner.embed(texts, kind=kind)

    cached = CachedEmbedder(Counting(), size=2)
    out = cached.embed(["a b", "c d", "a b"])
    assert calls == [["a b", "c d"]]
    assert np.allclose(out, inner.embed(["a b", "c d", "a b"]), atol=1e-7)
    assert np.allclose(cached.embed(["c d"], kind="document"), inner.embed(["c d"]))
    cached.embed(["c d"], kind="query")  # another kind is another key
    cached.embed(["e f"])  # evicts the least recently used
    assert len(calls) == 3
    cached.embed(["a b"])
    assert calls[-1] == ["a b"] and cached.model_name == inner.model_name


def test_an_uploads_fields_go_through_the_model_in_one_pass(monkeypatch):
    """`redact_fields` sends the fields the NER model must read through it together (one `pipe`), and
    redacts each exactly as a call of its own does."""
    from ultron.privacy.redactor import _nlp

    fields = {
        "content": "Maria Lopez rotated the staging token",
        "context": "Deploy from Berlin on Tuesday",
        "resolution": "ask John Smith before merging the migration",
    }
    alone = {k: Redactor().redact(v) for k, v in fields.items()}
    redactor = Redactor()
    engine = _nlp(redactor._plan(redactor._effective(None)).engine)
    single, many = [], []
    real_one, real_many = engine.process_text, engine.process_many
    monkeypatch.setattr(engine, "process_text", lambda t, lang: single.append(t) or real_one(t, lang))
    monkeypatch.setattr(
        engine, "process_many", lambda ts, lang, n: many.append(list(ts)) or real_many(ts, lang, n)
    )
    clean, counts = redactor.redact_fields(fields)
    assert single == [] and many == [list(fields.values())]
    assert clean == {k: r.text for k, r in alone.items()}
    assert counts["PERSON"] == sum(r.entities.get("PERSON", 0) for r in alone.values()) >= 2


def test_an_uploads_plain_fields_are_read_for_the_triggers_once():
    # Stop 28: `redact_fields` warms an upload's fields, then redacts each; a field with none of the trigger
    # patterns (most of them) was read for them twice. Now `warm` marks it plain, `detect` trusts the mark.
    redactor = Redactor()
    plan = redactor._plan(redactor._effective(None))
    scans: list[str] = []

    class Counting:
        def __init__(self, pattern):  # type: ignore[no-untyped-def]
            self.pattern = pattern

        def search(self, text):  # type: ignore[no-untyped-def]
            scans.append(text)
            return self.pattern.search(text)

    plan.triggers[:] = [Counting(t) for t in plan.triggers]
    fields = {"content": "restart it, nothing else to see here", "context": "the worker hangs at boot"}
    clean, counts = redactor.redact_fields(fields)
    assert clean == fields and counts == {}
    assert sorted(scans) == sorted(fields.values())  # once each
    assert redactor.stats()["fast_path"] == 2
    # a field with a trigger is still found and redacted
    _, counts = redactor.redact_fields({**fields, "resolution": "mail ops@example.com"})
    assert counts == {"EMAIL_ADDRESS": 1}
