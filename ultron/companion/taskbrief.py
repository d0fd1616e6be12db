"""A brief about its task: the memories the task's own search is confident about, right after the pins.

A task hint used to reorder only the HOT section by cosine, so a personal chat line or a HOT memory about
something else led, and the memory that answers ("pod keeps getting OOMKilled") was missing when it was
not HOT. The task is now searched as an agent would search it (dense and full text, quiet: no hits), and
its confident results form the `relevant` section; personal items it did not find stay out.
"""

from __future__ import annotations

from uuid import UUID

from ultron.companion.schemas import BriefItem
from ultron.memory.schemas import MemoryRecord, SearchResult
from ultron.providers.tokens import count_tokens, truncate_to_tokens

# Search results a task brief considers (its confident ones are listed).
BRIEF_TASK_RESULTS = 10
# Longest resolution a brief line carries (service.py's BRIEF_RESOLUTION_TOKENS).
RESOLUTION_TOKENS = 48


def relevant_items(hits: list[SearchResult], records: dict[UUID, MemoryRecord]) -> list[BriefItem]:
    """The confident, unresolved hits in search order, each with its full record's line."""
    items = []
    for r in hits:
        record = records.get(r.record.id)
        if record is None or r.confidence != "high" or r.serendipity or record.resolved_at is not None:
            continue
        summary = record.summary_l0 or record.content
        line = f"- [relevant/{record.memory_type}] {summary}"
        if record.resolution:
            line += f" -> {truncate_to_tokens(record.resolution, RESOLUTION_TOKENS)}"
        items.append(
            BriefItem(
                kind="memory",
                id=record.id,
                section="relevant",
                reason=f"relevant to the task (relevance {r.similarity_score:.2f}, {record.hit_count} hits)",
                memory_type=record.memory_type,
                text=line,
                tokens=count_tokens(line),
                relevance=r.similarity_score,
                confidence=r.confidence,
            )
        )
    return items


def once_each(items: list[BriefItem]) -> list[BriefItem]:
    """Each memory once, where it first appears (a pin before its search hit), and no line repeated: two
    memories that read the same (kept apart by dedup) are one line to whoever reads the brief."""
    seen_ids: set[UUID | str] = set()
    seen_lines: set[str] = set()
    out = []
    for item in items:
        line = item.text.split("] ", 1)[-1].strip().casefold()
        if item.id in seen_ids or (item.kind == "memory" and line in seen_lines):
            continue
        seen_ids.add(item.id)
        if item.kind == "memory":
            seen_lines.add(line)
        out.append(item)
    return out
