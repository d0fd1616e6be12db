"""`ultron bench-batch --corpus real`: the human-written corpus it uploads, and its bound."""

from __future__ import annotations

import argparse

import pytest

from ultron.bench.batch import real_items, run


def test_the_real_corpus_holds_each_text_once_in_a_fixed_order():
    items = real_items()
    keys = [tuple(sorted(i.items())) for i in items]
    assert len(keys) == len(set(keys)) == 833  # the calibration pairs reuse texts; chats repeat "See you."
    assert all(i.get("content") for i in items)
    assert any("\u4e00" <= c <= "\u9fff" for i in items for c in i["content"])  # Chinese too
    assert any(c.isupper() for i in items for c in i["content"])  # capitalised words: the NER model runs
    assert real_items() == items  # shuffled with a fixed seed


def test_asking_for_more_than_the_real_corpus_holds_is_a_clear_error():
    args = argparse.Namespace(
        corpus="real", items=900, single=10, batch_size=500, embedder="hash", database_url=None
    )
    with pytest.raises(ValueError, match="has 833 items: ask for at most 831"):
        run(args)
