"""Integrity of the retrieval evaluation set (memories and queries) for `ultron eval`."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

import ultron.bench.evaluation

CJK = re.compile(r"[\u4e00-\u9fff]")
EVAL_PATH = Path(ultron.bench.evaluation.__file__).parent / "data" / "retrieval_eval.jsonl"
QUERY_NOTES = {"paraphrase", "keyword", "cross-lingual", "distractor-heavy"}


@pytest.fixture(scope="module")
def eval_rows() -> list[dict]:
    with EVAL_PATH.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def test_retrieval_eval_set(eval_rows: list[dict]) -> None:
    memories = [r for r in eval_rows if r["kind"] == "memory"]
    queries = [r for r in eval_rows if r["kind"] == "query"]
    assert len(memories) + len(queries) == len(eval_rows)
    assert 140 <= len(memories) <= 200
    assert len(queries) >= 120
    memory_ids = [m["id"] for m in memories]
    assert len(set(memory_ids)) == len(memory_ids)
    query_ids = [q["id"] for q in queries]
    assert len(set(query_ids)) == len(query_ids)
    for m in memories:
        assert m["content"].strip() and isinstance(m["context"], str) and isinstance(m["resolution"], str)
        assert m["tags"] and all(isinstance(t, str) and t for t in m["tags"]), m["id"]
    known = set(memory_ids)
    for q in queries:
        assert q["query"].strip(), q["id"]
        assert q["expected"] and set(q["expected"]) <= known, q["id"]
        assert q["lang"] in ("en", "zh"), q["id"]
        assert q["note"] in QUERY_NOTES, q["id"]
    notes = Counter(q["note"] for q in queries)
    assert all(notes[note] >= 15 for note in QUERY_NOTES), notes
    langs = Counter(q["lang"] for q in queries)
    assert min(langs.values()) >= 0.4 * len(queries), langs


def test_retrieval_queries_match_their_language(eval_rows: list[dict]) -> None:
    for q in (r for r in eval_rows if r["kind"] == "query"):
        assert bool(CJK.search(q["query"])) == (q["lang"] == "zh"), q["id"]
