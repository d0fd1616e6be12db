"""The gate: the redactor meets its targets on the labelled corpus, which is what its script makes."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from ultron.bench.privacy_eval import (
    CLEAN_UNCHANGED_TARGET,
    NAME_ENTITIES,
    NAME_PRECISION_TARGET,
    NAME_RECALL_TARGET,
    PII_RECALL_TARGET,
    SECRET_RECALL_TARGET,
    evaluate,
    leaked,
    load_corpus,
    main,
)
from ultron.privacy.entities import PII_ENTITIES, SECRET_ENTITIES

DATA = Path(__file__).resolve().parents[1] / "data"
CORPUS = DATA / "redaction_corpus.jsonl"


@pytest.fixture(scope="module")
def snippets() -> list[dict]:
    return load_corpus(CORPUS)


def test_corpus_shape(snippets):
    assert len(snippets) >= 300
    assert {s["lang"] for s in snippets} == {"en", "zh"}
    assert len({s["id"] for s in snippets}) == len(snippets)
    support = Counter(e["type"] for s in snippets for e in s["entities"])
    for entity in (*SECRET_ENTITIES, *[e for e in PII_ENTITIES if e != "PERSON"]):
        assert support[entity] >= 20, entity
    assert sum(1 for s in snippets if not s["entities"]) >= 100


def test_corpus_file_is_what_the_script_generates(snippets):
    sys.path.insert(0, str(DATA))
    try:
        import make_redaction_corpus
    finally:
        sys.path.remove(str(DATA))
    assert make_redaction_corpus.generate() == snippets


def test_redactor_meets_the_targets(redactor, snippets):
    report = evaluate(snippets, redactor, repeat=0)
    for name, score in report.scores.items():
        target = SECRET_RECALL_TARGET if name in SECRET_ENTITIES else PII_RECALL_TARGET
        assert score.recall >= target, (name, report.missed)
    assert report.group(SECRET_ENTITIES).recall >= SECRET_RECALL_TARGET
    assert report.clean_share >= CLEAN_UNCHANGED_TARGET, report.clean_changed_ids
    assert report.failures() == []


def test_names_and_addresses_per_language(redactor, snippets):
    """Issue 19: names and street addresses in English and Chinese, each language on its own."""
    report = evaluate(snippets, redactor, repeat=0)
    for lang in ("en", "zh"):
        score = report.by_language[lang]
        assert score.support >= 50, lang
        assert score.recall >= NAME_RECALL_TARGET, (lang, [m for m in report.missed if m[1] in NAME_ENTITIES])
        assert score.precision >= NAME_PRECISION_TARGET, (lang, report.false_positives)
    for entity in ("PERSON", "STREET_ADDRESS", "QQ_NUMBER"):
        assert report.scores[entity].support >= 20 and report.scores[entity].recall >= PII_RECALL_TARGET
    assert report.group(SECRET_ENTITIES).recall == 1.0


def test_leak_check_catches_partial_redaction():
    key = "sk-Qm3vT9xLr2Pz8NcW5yHb4KdJT3BlbkFJa7Fs1Ge6Uo0Ri2Wq"
    assert leaked(key, f"x {key} y")
    assert leaked(key, "x sk-<LLM_API_KEY>5yHb4KdJT3BlbkFJa7Fs1Ge6Uo0Ri2Wq")  # the tail survived
    assert not leaked(key, "x <LLM_API_KEY> y")
    assert not leaked("hunter2", "password=<REDACTED_CREDENTIAL>")


def test_evaluate_command_prints_the_table(capsys):
    assert main(["--corpus", str(CORPUS), "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "LLM_API_KEY" in out and "CN_RESIDENT_ID" in out
    assert "clean snippets unchanged" in out and "KB/s" in out and "all targets met" in out
    assert "names+addresses en" in out and "names+addresses zh" in out


def test_evaluate_command_fails_when_a_target_is_missed(tmp_path, capsys):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(
        json.dumps(
            {
                "id": "x",
                "lang": "en",
                "kind": "chat",
                "text": "pw Hx9kP2",
                "entities": [{"type": "REDACTED_CREDENTIAL", "value": "Hx9kP2"}],
            }
        )
        + "\n"
    )
    assert main(["--corpus", str(corpus), "--repeat", "0"]) == 1
    assert "TARGET MISSED: REDACTED_CREDENTIAL recall 0.000" in capsys.readouterr().out


def test_evaluate_command_explains_a_missing_or_bad_corpus(tmp_path, capsys):
    assert main(["--corpus", str(tmp_path / "nope.jsonl")]) == 2
    assert "corpus not found" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "text": "abc", "entities": [{"type": "EMAIL_ADDRESS", "value": "zzz"}]}\n')
    assert main(["--corpus", str(bad)]) == 2
    assert "bad.jsonl:1" in capsys.readouterr().err
