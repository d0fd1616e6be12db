"""Current facts: a memory that updates another is linked as superseding it, and search ranks it first.

"We moved the staging database to db-stage-2" after "The staging database is db-stage-1": the same
subject with a changed value (a host, a version, a date, a number, a quoted name, a choice such as tabs vs
spaces). On upload the new memory is compared with its nearest memories (any type, the same scope and
owner; sql/supersede.sql); the one it updates gets `superseded_by_id` (migration 0017). Nothing is
archived: the older memory stays searchable, flagged `superseded_by` in its record and its explain.

The offline rule (`updates`), first miss wins:
1. neither is a question (a question states no value) nor an error or security report (two failures with
   different codes are two failures, not an update);
2. a value changed: a class of distinguishing tokens disagrees (heuristic.conflicts), or the newer one
   says it changed ("moved to", "now", "switched", 改成, 现在 ...) and picks the opposite choice or holds
   a term the older lacks;
3. the same subject: at least UPDATE_MIN_SHARED subject terms shared (one where the newer one says it
   changed), and at least UPDATE_CONTAINMENT of the smaller memory's (`_subject_terms`: names count; the
   cue, chat words, numbers and redaction placeholders do not). Between two chat turns (both with a
   `thread`): the cue, UPDATE_MIN_SHARED terms and TURN_CONTAINMENT.
On upload the later of the two (by `occurred_at`, else the upload) must be the one stating the change.

Search (`rank_current`): a superseded result's score x SUPERSEDED_WEIGHT, and its current memory placed
above it with at least its score and confidence (brought in when the search did not find it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import cache, lru_cache
from typing import Any
from uuid import UUID

from sqlalchemy import TextClause, text
from sqlalchemy.orm import Session

from ultron.db.plans import PROBE_DEFAULT, PROBE_WALK
from ultron.db.queries import q
from ultron.memory import heuristic, ties
from ultron.memory.classify import words_of
from ultron.memory.schemas import MemoryRecord, SearchResult

CANDIDATES = 5
UPDATE_MIN_SHARED = 2
UPDATE_MIN_SHARED_WITH_CUE = 1
UPDATE_CONTAINMENT = 0.34
TURN_CONTAINMENT = 0.5
SUPERSEDED_WEIGHT = 0.5
NOT_UPDATES = ("error", "security")

_CHANGE_CUE = re.compile(
    r"(?i:\b(?:now|moved|moving|switched|switching|changed|changing|migrated|upgraded|downgraded|renamed"
    r"|replaced|no longer|anymore|any more|instead|from now on|updated?|new|these days|nowadays|rescheduled"
    r"|postponed|pushed back|moved up|bumped)\b)"
    r"|现在|改成|改为|换成|换到|搬到|迁到|迁移到|升级到|降级到|不再|以后|改到|推迟|提前|新的|已经换"
)
_ASKS = re.compile(r"[?？]\s*$")


def _fields(m: dict[str, Any]) -> dict[str, str]:
    """The three text fields, a chat turn's speaker label left out (both sides have one)."""
    return {
        "content": words_of(str(m.get("content") or "")),
        "context": str(m.get("context") or ""),
        "resolution": str(m.get("resolution") or ""),
    }


def _text(m: dict[str, Any]) -> str:
    return "\n".join(str(m.get(k) or "") for k in ("content", "context", "resolution"))


def updates(newer: dict[str, Any], older: dict[str, Any]) -> bool:
    """Whether `newer` states a changed value of what `older` said (the rule in the module doc)."""
    if newer.get("memory_type") in NOT_UPDATES or older.get("memory_type") in NOT_UPDATES:
        return False
    if any(
        _ASKS.search(str(m.get("content") or "")) and not str(m.get("resolution") or "").strip()
        for m in (newer, older)
    ):
        return False
    a, b = _fields(newer), _fields(older)
    text_a, text_b = _text(a), _text(b)
    if " ".join(text_a.lower().split()) == " ".join(text_b.lower().split()):
        return False
    cue = _has_cue(text_a)
    # Opposite choices with no stated change are mostly two scopes of one preference ("tabs in
    # TypeScript" / "4 spaces in Python"), not a change of mind.
    valued = bool(heuristic.conflicts(a, b)) or (cue and heuristic.opposite_choices(a, b))
    # a new value with the cue: any term the older one lacks, numbers and weekdays included
    if not (valued or (cue and _raw_terms(text_a) - _raw_terms(text_b))):
        return False
    # The subject terms only for a pair with a changed value: most pairs stop above (the upload path runs
    # this for each of a new memory's CANDIDATES nearest memories).
    terms_a, terms_b = _subject_terms(text_a), _subject_terms(text_b)
    shared = terms_a & terms_b
    if _turn(newer) and _turn(older):
        # Chat turns quote numbers and dates all the time ("Yes, May 17. My goal is under two hours." /
        # "Under two hours! I saw you at kilometre 18"), say "now", "new" and "update" in passing, and a
        # reply picks up its question's words ("Run like Biscuit is chasing you" / "Biscuit has never
        # chased anything"): between two turns only a stated change of a strongly shared subject is one.
        return (
            cue
            and len(shared) >= UPDATE_MIN_SHARED
            and heuristic.containment(terms_a, terms_b) >= TURN_CONTAINMENT
        )
    need = UPDATE_MIN_SHARED_WITH_CUE if cue else UPDATE_MIN_SHARED
    return len(shared) >= need and heuristic.containment(terms_a, terms_b) >= UPDATE_CONTAINMENT


def may_supersede(new: dict[str, Any]) -> bool:
    """Whether `updates` could hold between a new memory and any other: False lets an upload skip its
    supersede probe (an HNSW walk and the checks of CANDIDATES pairs, ~1.2 ms of a 10k-store upload). Exact,
    from the rule: as the newer side it needs a distinguishing token of its own (a conflict needs one on
    each side) or the change cue; it is the older side only where it tells when it happened (`occurred_at`,
    else the upload is the later); neither for an error or security report or a question without an
    answer."""
    if new.get("memory_type") in NOT_UPDATES:
        return False
    if _ASKS.search(str(new.get("content") or "")) and not str(new.get("resolution") or "").strip():
        return False
    if new.get("occurred_at") is not None:
        return True
    fields = _fields(new)
    return _has_cue(_text(fields)) or any(heuristic.distinguishing_tokens(fields).values())


def _turn(m: dict[str, Any]) -> bool:
    return m.get("thread") is not None


# A redaction placeholder ("<PERSON>"): every redacted name is the same token, so it names no subject.
_PLACEHOLDER = re.compile(r"<[A-Z][A-Z_]{1,30}>")


@lru_cache(maxsize=4096)
def _has_cue(text: str) -> bool:
    # Cached: a new memory is the newer side of each of its CANDIDATES pairs.
    return _CHANGE_CUE.search(text) is not None


@lru_cache(maxsize=4096)
def _raw_terms(text: str) -> frozenset[str]:
    # Cached: an upload compares its text with its nearest memories', which recur across uploads.
    return frozenset(heuristic.terms(_CHANGE_CUE.sub(" ", _PLACEHOLDER.sub(" ", text))))


@lru_cache(maxsize=4096)
def _subject_terms(text: str) -> frozenset[str]:
    """What a memory is about: its terms (names included: "Jonas moved to Ridgewood" is about Jonas) less
    the change cue itself, chat words and numbers (the value that changed)."""
    return frozenset(
        t for t in _raw_terms(text) if t not in heuristic.CHAT_WORDS and not any(c.isdigit() for c in t)
    )


def _newer_of(new: dict[str, Any], old: Any) -> bool:
    """Whether the new upload is the newer fact: by when each happened where both say, else by upload."""
    if new.get("occurred_at") is not None and old.occurred_at is not None:
        return bool(new["occurred_at"] >= old.occurred_at)
    return True


# A tenant that is most of the table (MemoryService._walks_index) probes with sorts off, as the dedup
# probe does: at ~2k memories the planner sorted every row of the tenant by distance for each new memory
# (16 ms a memory, TOAST reads) where the HNSW walk takes 0.5 ms (measured, a batch of 500 at 2k). Its own
# text, so its own prepared statement: a plan keeps the settings of its first run.
_WALK_MARK = "-- planned with sorts off: the supersede probe walks the HNSW index"


@cache
def candidates_sql(walk: bool = False) -> TextClause:
    """supersede_candidates_many (one statement for a single upload's memory and a batch's); `walk`: the
    text planned with sorts off."""
    statement = q("supersede_candidates_many")
    return text(f"{_WALK_MARK}\n{statement.text}") if walk else statement


def candidates_params(memory_ids: list[UUID], tenant_id: UUID, k: int = CANDIDATES) -> dict[str, Any]:
    return {"ids": memory_ids, "tenant_id": tenant_id, "k": k}


def _probe(session: Session, statement: TextClause, params: dict[str, Any], walk: bool) -> Sequence[Any]:
    if walk:
        session.execute(text(PROBE_WALK))
    rows = session.execute(statement, params).all()
    if walk:
        for reset in PROBE_DEFAULT:
            session.execute(text(reset))
    return rows


def link_new(
    session: Session, tenant_id: UUID, memory_id: UUID, new: dict[str, Any], walk: bool = False
) -> UUID | None:
    """Link a just-created memory with the nearest one it updates (or that updates it, when it tells of
    an earlier time): the older one's `superseded_by_id`. The id of the memory linked, if any."""
    if not may_supersede(new):
        return None
    params = candidates_params([memory_id], tenant_id)
    return link_found(session, tenant_id, memory_id, new, _probe(session, candidates_sql(walk), params, walk))


def link_found(
    session: Session, tenant_id: UUID, memory_id: UUID, new: dict[str, Any], rows: Sequence[Any]
) -> UUID | None:
    """`link_new` with its probe's rows read already (sent with the upload's other statements)."""
    linked = _link(session, tenant_id, memory_id, new, rows)
    return None if linked is None else linked[0]


# Candidates per memory a batch's probe reads beyond CANDIDATES (those its own links superseded drop out).
BATCH_EXTRA = 3


def link_new_many(
    session: Session, tenant_id: UUID, items: list[tuple[UUID, dict[str, Any]]], walk: bool = False
) -> None:
    """`link_new` for a batch's new memories, in order, with one probe for them all
    (supersede_candidates_many): a memory an earlier link of the batch superseded is no candidate of a
    later one, as in its own probe; when more than BATCH_EXTRA of a memory's candidates dropped out so,
    it makes its own probe."""
    items = [item for item in items if may_supersede(item[1])]
    if not items:
        return
    params = candidates_params([memory_id for memory_id, _ in items], tenant_id, CANDIDATES + BATCH_EXTRA)
    by_place: dict[int, list[Any]] = {}
    for row in _probe(session, candidates_sql(walk), params, walk):
        by_place.setdefault(row.ord - 1, []).append(row)
    superseded: set[UUID] = set()
    for place, (memory_id, new) in enumerate(items):
        found = by_place.get(place, [])
        candidates: Sequence[Any] = [r for r in found if r.id not in superseded][:CANDIDATES]
        if len(candidates) < CANDIDATES and len(found) == CANDIDATES + BATCH_EXTRA:
            # the rest of its candidates lie past the batch's probe
            one = candidates_params([memory_id], tenant_id)
            candidates = _probe(session, candidates_sql(walk), one, walk)
        linked = _link(session, tenant_id, memory_id, new, candidates)
        if linked is not None:
            superseded.add(linked[1])


def _link(
    session: Session, tenant_id: UUID, memory_id: UUID, new: dict[str, Any], rows: Any
) -> tuple[UUID, UUID] | None:
    """The first of `rows` (nearest first) the new memory updates or is updated by, marked: (its id, the
    id of the older of the two); None when none."""
    for row in rows:
        old = {k: getattr(row, k) for k in ("memory_type", "content", "context", "resolution", "thread")}
        # The later one must state the change: "We're moving to Snowflake" is not updated by a later
        # "The Snowflake cutover went well" for holding the cue itself.
        if _newer_of(new, row):
            if not updates(new, old):
                continue
            newer, older = memory_id, row.id
        elif not updates(old, new):
            continue
        else:
            newer, older = row.id, memory_id
        session.execute(q("mark_superseded"), {"newer": newer, "older": older, "tenant_id": tenant_id})
        return UUID(str(row.id)), UUID(str(older))
    return None


# How many links a search follows from a superseded result to its current memory.
MAX_HOPS = 5


def rank_current(
    results: list[SearchResult], load: Callable[[list[UUID]], dict[UUID, MemoryRecord]], limit: int
) -> list[SearchResult]:
    """Superseded results sink (score x SUPERSEDED_WEIGHT) and their current memory ranks above each, with
    at least its score and confidence: brought in through `load` (the records the agent may see, as the
    search projects them) when the search did not find it. Confident results stay before low ones."""
    stale = [r for r in results if r.record.superseded_by is not None]
    if not stale:
        return results
    by_id = {r.record.id: r for r in results}
    for r in stale:
        score, confidence = r.score, r.confidence
        r.score = score * SUPERSEDED_WEIGHT
        if r.explain is not None:
            r.explain = r.explain.model_copy(
                update={"superseded_by": r.record.superseded_by, "score": r.score}
            )
        current = _current(r.record.superseded_by, by_id, load)
        if current is None:
            continue
        held = by_id.get(current.id)
        if held is None:
            explain = None
            if r.explain is not None:
                explain = r.explain.model_copy(update={"superseded_by": None, "supersedes": r.record.id})
            held = SearchResult(
                record=current,
                similarity_score=r.similarity_score,
                score=score,
                explain=explain,
                confidence=confidence,
            )
            results.append(held)
            by_id[current.id] = held
        elif held.score < score or (confidence == "high" and held.confidence == "low"):
            held.score = max(held.score, score)
            held.confidence = "high" if "high" in (confidence, held.confidence) else "low"
            if held.explain is not None:
                held.explain = held.explain.model_copy(
                    update={"supersedes": r.record.id, "score": held.score}
                )
    results.sort(key=ties.confident_by_score)
    return results[:limit]


def _current(
    first: UUID | None,
    by_id: dict[UUID, SearchResult],
    load: Callable[[list[UUID]], dict[UUID, MemoryRecord]],
) -> MemoryRecord | None:
    """The end of the chain of supersessions from `first` (a memory may itself have been updated since)."""
    record, at = None, first
    for _ in range(MAX_HOPS):
        if at is None:
            break
        held = by_id.get(at)
        nxt = held.record if held is not None else load([at]).get(at)
        if nxt is None or nxt.status != "active":
            break
        record, at = nxt, nxt.superseded_by
    return record
