"""Offline typing of personal facts (issue 19): life and preference in English and Chinese, measured on
labelled sentences, and through the real upload path."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from ultron.memory.heuristic import infer_type
from ultron.sdk import Ultron

DATA = Path(__file__).resolve().parents[1] / "data"


def labelled(name: str) -> list[tuple[str, str, str]]:
    rows = []
    for line in (DATA / name).read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            expected, lang, sentence = line.split("\t")
            rows.append((expected, lang, sentence))
    return rows


def accuracy(rows: list[tuple[str, str, str]]) -> float:
    return sum(infer_type(s) == t for t, _, s in rows) / len(rows)


def test_the_labelled_sets_are_what_they_claim():
    rows = labelled("personal_facts.tsv") + labelled("personal_facts_heldout.tsv")
    assert len(rows) >= 80
    by = Counter((t, lang) for t, lang, _ in rows)
    for kind in ("life", "preference"):
        assert by[(kind, "en")] >= 20 and by[(kind, "zh")] >= 20, by


@pytest.mark.parametrize("name", ["personal_facts.tsv", "personal_facts_heldout.tsv"])
def test_personal_facts_are_typed_offline(name):
    rows = labelled(name)
    assert accuracy(rows) >= 0.9, [(t, infer_type(s), s) for t, _, s in rows if infer_type(s) != t]
    for lang in ("en", "zh"):
        assert accuracy([r for r in rows if r[1] == lang]) >= 0.85, lang


def test_technical_memories_keep_their_types():
    assert infer_type("ModuleNotFoundError: No module named 'pandas'") == "error"
    assert infer_type("Use a read replica for reporting queries") == "pattern"
    assert infer_type("Actually the retry limit is five, not three") == "correction"


def test_personal_facts_reach_the_brief_through_upload(hub):
    me = Ultron(hub=hub)
    lily = me.upload_memory("My daughter Lily is allergic to peanuts.", scope="private")
    english = me.upload_memory("Always answer me in British English.", scope="private")
    xiaoyu = me.upload_memory("我女儿叫小雨，今年五岁。", scope="private")
    assert (lily.memory_type, english.memory_type, xiaoyu.memory_type) == ("life", "preference", "life")
    personal = {i.id for i in me.brief().items if i.section == "personal"}
    assert {lily.id, english.id, xiaoyu.id} <= personal
