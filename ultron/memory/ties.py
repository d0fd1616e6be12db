"""The order of results with equal scores, the same in the search statement and in every Python re-sort.

Ties are common where a rule copies one result's score to another (a question turn sunk x 0.8 and its
reply handed the same x 0.8; a current fact given its stale one's score). Broken by the memory id alone
they fell at random per store (ids are random), so two loads of one set ranked differently (conversation
suite R@1 0.604 / 0.615 from one code). Among equals the later one comes first: the later `occurred_at`
(what it tells happened later: the reply after its question, the newer state of a fact), then the later
`position` in its thread, then the later `created_at`, then the id. sql/memory.sql (`search_memories`)
orders by the same columns: score DESC, occurred_at DESC NULLS LAST, position DESC NULLS LAST,
created_at DESC, id.
"""

from __future__ import annotations

import math

from ultron.memory.schemas import MemoryRecord, SearchResult


def later_first(record: MemoryRecord) -> tuple[float, float, float, str]:
    """Sort key among equal scores: later occurred_at, later position, later created_at, then id (a missing
    value last, as NULLS LAST in the statement)."""
    occurred = record.occurred_at.timestamp() if record.occurred_at is not None else -math.inf
    position = float(record.position) if record.position is not None else -math.inf
    return (-occurred, -position, -record.created_at.timestamp(), str(record.id))


def by_score(r: SearchResult) -> tuple[float, tuple[float, float, float, str]]:
    """Score order, ties broken by `later_first`."""
    return (-r.score, later_first(r.record))


def confident_by_score(r: SearchResult) -> tuple[bool, float, tuple[float, float, float, str]]:
    """Confident results first, each part in score order, ties broken by `later_first`."""
    return (r.confidence == "low", -r.score, later_first(r.record))
