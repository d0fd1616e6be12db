"""A memory's full-text document: its own text, its tags and the text of every upload merged into it.

A merge keeps the first upload's text as the memory's text; what the later uploads said stays in their
contributions (memory_contributions: content, context, resolution, tags, all redacted). So that a search
for words found only in a merged-away upload still finds the memory, the `search_tsv` column indexes the
texts of all its contributions. This module is the one place that decides which texts the document holds:

* `texts(session, memory)` gathers them (the memory's fields and tags, then each contribution's text that
  the memory's own fields do not already hold, oldest first);
* `rebuild(session, memory)` recomputes `search_tsv` from them (create, edit, split);
* `append(memory, fields, tags)` adds one new contribution to the document without reading the others (a
  merge: O(1) in the number of contributions, so uploads stay as fast at 100k memories as at 1k).

The tsvector itself is built by `tsvector()` (ultron/memory/fulltext.py segments the text).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any
from uuid import UUID

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ultron.db.models import Memory, MemoryContribution
from ultron.memory import fulltext

FIELDS = ("content", "context", "resolution")
# A document holds at most this many contributions' texts (the oldest); a memory merged into more often
# than that is one lesson told many times, and its first tellings already index it.
MAX_CONTRIBUTIONS = 500


def tsvector(*texts: str) -> Any:
    """The SQL expression of the tsvector of `texts`."""
    return func.to_tsvector("simple", fulltext.index_text(*texts))


def _own_text(memory: Memory) -> str:
    return "\n".join(" ".join(str(getattr(memory, name) or "").split()).lower() for name in FIELDS)


def _new_texts(own: str, fields: dict[str, str], tags: Iterable[str], known_tags: set[str]) -> list[str]:
    """The fields and tags of one contribution that the document does not hold already."""
    out = [value for value in (fields.get(name) or "" for name in FIELDS) if value.strip()]
    out = [value for value in out if " ".join(value.split()).lower() not in own]
    out += [tag for tag in tags if tag not in known_tags]
    return out


def texts(session: Session, memory: Memory) -> list[str]:
    """Every text the memory's document indexes (see the module docstring)."""
    own = _own_text(memory)
    out = [str(getattr(memory, name) or "") for name in FIELDS] + list(memory.tags)
    known_tags = set(memory.tags)
    rows = session.execute(
        select(
            MemoryContribution.content,
            MemoryContribution.context,
            MemoryContribution.resolution,
            MemoryContribution.tags,
        )
        .where(MemoryContribution.memory_id == memory.id, MemoryContribution.tenant_id == memory.tenant_id)
        .order_by(MemoryContribution.created_at, MemoryContribution.id)
        .limit(MAX_CONTRIBUTIONS)
    ).all()
    for content, context, resolution, tags in rows:
        fields = {"content": content, "context": context, "resolution": resolution}
        new = _new_texts(own, fields, tags or [], known_tags)
        known_tags |= set(tags or [])
        out += new
    return out


def rebuild(session: Session, memory: Memory) -> None:
    """Recompute the memory's search_tsv from `texts`."""
    memory.search_tsv = tsvector(*texts(session, memory))


def added_text(memory: Memory, fields: dict[str, str], tags: Sequence[str] = ()) -> str:
    """What one merged contribution adds to the memory's document, as `tsvector`'s text ('' when it adds no
    new text): the statement appends `to_tsvector('simple', it)` (sql/memory.sql, merge_counted)."""
    new = _new_texts(_own_text(memory), fields, tags, set(memory.tags))
    return fulltext.index_text(*new) if new else ""


# --- explain ------------------------------------------------------------------------------------------


def _terms(text: str) -> set[str]:
    return set(fulltext.index_text(text).split())


def matched_contributions(
    session: Session, tenant_id: UUID, query: str, memory_ids: Sequence[UUID]
) -> dict[UUID, int]:
    """For each memory, the id of the contribution whose text matches most of the query's terms.

    Used by `explain`: a search that found a memory through the words of a merged-away upload says which
    upload it was. Memories none of whose contributions share a query term are left out."""
    wanted = {t.strip("'") for t in fulltext.query_text(query).split(" | ") if t.strip("'")}
    if not wanted or not memory_ids:
        return {}
    rows = session.execute(
        select(
            MemoryContribution.id,
            MemoryContribution.memory_id,
            MemoryContribution.content,
            MemoryContribution.context,
            MemoryContribution.resolution,
        )
        .where(MemoryContribution.tenant_id == tenant_id, MemoryContribution.memory_id.in_(list(memory_ids)))
        .order_by(MemoryContribution.memory_id, MemoryContribution.created_at, MemoryContribution.id)
        .limit(MAX_CONTRIBUTIONS * len(memory_ids))
    ).all()
    best: dict[UUID, tuple[int, int]] = {}
    for cid, memory_id, content, context, resolution in rows:
        hits = len(wanted & _terms("\n".join((content, context, resolution))))
        if hits and hits > best.get(memory_id, (0, 0))[0]:
            best[memory_id] = (hits, cid)
    return {memory_id: cid for memory_id, (_, cid) in best.items()}
