"""The bounded LRU behind the per-text memories (embeddings, redaction findings, NER entities, jieba tags)."""

from __future__ import annotations

from ultron.lru import Lru


def test_a_read_keeps_an_entry_and_an_insert_past_the_size_drops_the_least_recent():
    lru: Lru[str, tuple[int, ...]] = Lru(2)
    lru.put("a", (1,))
    lru.put("b", ())  # an empty value is a value (a text with no findings), not a miss
    assert lru.get("a") == (1,)  # now "b" is the least recent
    lru.put("c", (3,))
    assert (lru.get("a"), lru.get("b"), lru.get("c"), len(lru)) == ((1,), None, (3,), 2)
    lru.put("a", (9,))  # replacing makes it the most recent too
    lru.put("d", (4,))
    assert (lru.get("a"), lru.get("c"), lru.get("d")) == ((9,), None, (4,))
    lru.clear()
    assert len(lru) == 0 and lru.get("a") is None
