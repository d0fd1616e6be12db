"""The NER model runs only on text where it could find a name that `plausible_name` keeps: lowercase text
(logs, commands, agents' notes) costs no model pass, and skipping it changes no finding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ultron.privacy.nlp import may_name_someone, plausible_name
from ultron.privacy.redactor import _nlp

CORPUS = Path(__file__).resolve().parents[1] / "data" / "redaction_corpus.jsonl"

# Texts the gate must let through (a kept name can be in them) and texts it may skip.
NAMED = [
    "Maria Garcia fixed the flaky deploy",
    "ping J. Smith about the rollout",
    "ask jean-luc, no: Jean-Luc Picard owns it",
    "van der Berg reviewed it",
    "Max Mustermann signed off",  # Max is in NOT_NAMES, Mustermann is not
]
UNNAMED = [
    "pip install failed: no matching distribution for torch==2.3",
    "ping maria about the deploy; she said ok",
    "Error: Docker Failed. Retry Pending",
    "FATAL: password authentication failed for user ULTRON_APP",
    "",
]


@pytest.fixture(scope="module")
def engine(redactor):
    nlp = _nlp(redactor._plan(redactor._effective(None)).engine)
    if "en" not in nlp.person_languages:
        pytest.skip("no English NER model installed")
    return nlp


@pytest.mark.parametrize("text", NAMED)
def test_text_with_a_name_word_runs_the_model(text):
    assert may_name_someone(text)


@pytest.mark.parametrize("text", UNNAMED)
def test_text_without_a_name_word_is_skipped(text):
    assert not may_name_someone(text)


def test_chinese_is_never_gated():
    assert may_name_someone("张伟修好了部署", "zh")


def _kept_names(engine, text: str) -> list[str]:
    doc = engine.pipelines["en"](text)
    return [ent.text for ent in doc.ents if ent.label_ in ("PERSON", "PER") and plausible_name(text, ent)]


def test_skipping_changes_no_finding(engine):
    """Over the labelled corpus (and the texts above, and each corpus text lowercased), every text the gate
    skips gives the model no name that would be kept."""
    texts = [json.loads(line)["text"] for line in CORPUS.read_text(encoding="utf-8").splitlines() if line]
    english = [t for t in texts if not any("\u4e00" <= c <= "\u9fff" for c in t)]
    pool = english + [t.lower() for t in english] + NAMED + UNNAMED
    skipped = [t for t in pool if not may_name_someone(t)]
    assert len(skipped) >= len(english) // 2  # the gate does skip: every lowercased text at least
    assert {t: _kept_names(engine, t) for t in skipped if _kept_names(engine, t)} == {}


def test_process_many_skips_the_model_only_where_the_gate_says(engine, monkeypatch):
    seen: list[str] = []
    pipeline = engine.pipelines["en"]
    real = pipeline.pipe

    def spy(texts, batch_size):
        texts = list(texts)
        seen.extend(texts)
        return real(texts, batch_size=batch_size)

    monkeypatch.setattr(pipeline, "pipe", spy)
    texts = ["deploy failed on node three", "Maria Garcia restarted it", "Error: Docker Failed"]
    artifacts = engine.process_many(texts, "en", 8)
    assert seen == ["Maria Garcia restarted it"]
    assert [len(a.entities) for a in artifacts] == [0, 1, 0]
