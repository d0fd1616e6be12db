"""Integrity of the shipped dedup calibration pairs."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from ultron.bench.dedup_calibration import FIELDS, LABELS, default_path, load_pairs, pair_text

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def pairs() -> list[dict]:
    return load_pairs()


def test_calibration_file_ships_inside_the_package() -> None:
    path = default_path()
    assert path.is_file()
    assert path.parent.parent.name == "bench"


def test_pair_counts_and_labels(pairs: list[dict]) -> None:
    assert len(pairs) >= 240
    ids = [p["id"] for p in pairs]
    assert len(set(ids)) == len(ids)
    labels = Counter(p["label"] for p in pairs)
    assert set(labels) == set(LABELS)
    assert labels["duplicate"] >= 0.3 * len(pairs)
    assert labels["distinct"] >= 0.5 * len(pairs)


def test_languages_are_balanced(pairs: list[dict]) -> None:
    langs = Counter(p["lang"] for p in pairs)
    assert set(langs) <= {"en", "zh", "mixed"}
    assert langs["en"] >= 0.4 * len(pairs)
    assert langs["zh"] >= 0.4 * len(pairs)
    assert langs["mixed"] >= 10
    for lang in ("en", "zh", "mixed"):
        by_label = Counter(p["label"] for p in pairs if p["lang"] == lang)
        assert by_label["duplicate"] >= 10 and by_label["distinct"] >= 10, lang


def test_every_pair_is_complete(pairs: list[dict]) -> None:
    for p in pairs:
        assert p["note"].strip(), p["id"]
        for side in ("a", "b"):
            memory = p[side]
            assert set(memory) == set(FIELDS), p["id"]
            assert all(isinstance(memory[name], str) for name in FIELDS), p["id"]
            assert memory["content"].strip(), p["id"]
        assert pair_text(p["a"]) != pair_text(p["b"]), p["id"]


def test_language_tags_match_the_text(pairs: list[dict]) -> None:
    for p in pairs:
        cjk = [bool(CJK.search(pair_text(p[side]))) for side in ("a", "b")]
        if p["lang"] == "zh":
            assert all(cjk), p["id"]
        elif p["lang"] == "en":
            assert not any(cjk), p["id"]
        else:
            assert any(cjk), p["id"]


def test_no_pair_repeats(pairs: list[dict]) -> None:
    keys = [frozenset((pair_text(p["a"]), pair_text(p["b"]))) for p in pairs]
    assert len(set(keys)) == len(keys)
