"""Hybrid search: the statement as run (its generic plan, its settings in one round trip), its rows made
results, question turns sunk and handed to their replies, the current fact first (supersede).

`SearchMixin` is the search half of MemoryService (ultron/memory/service.py), kept apart so each file
stays readable; it uses the service's settings, embedder, redactor, hit buffer and companion hooks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any
from uuid import UUID

import numpy as np
from psycopg import RawCursor
from psycopg.pq import TransactionStatus
from psycopg.rows import namedtuple_row
from sqlalchemy import TextClause, text
from sqlalchemy.orm import Session

from ultron.config import Settings
from ultron.db.plans import SORT_DEFAULT, WALK_SHARE, WalkCache
from ultron.db.queries import dollar_params, q
from ultron.errors import ValidationFailed
from ultron.memory import document, fulltext, supersede, ties
from ultron.memory.filters import NO_FILTERS_PARAMS, SearchFilters
from ultron.memory.hits import HitBuffer, SearchUse
from ultron.memory.records import (
    _RECORD_FIELDS,
    _RESULT_FIELDS_SET,
    _blanks,
    _record_fields,
    _trusted,
    load_records,
    project,
)
from ultron.memory.relevance import calibrated_relevance, content_coverage, dense_z
from ultron.memory.schemas import MemoryRecord, ScoreComponents, SearchResult
from ultron.memory.timeq import query_time_range
from ultron.observability.metrics import counts_search
from ultron.providers.base import Embedder
from ultron.settings_store import RuntimeSettings
from ultron.tenancy import Actor

# The search's own settings, set for its statement and reset after it (one pipeline, one round trip):
# its generic plan, and the dense leg's HNSW candidate list (`search_ef_search`, written in as a literal).
_SEARCH_SETTINGS = (
    "SELECT set_config('plan_cache_mode', 'force_generic_plan', true),"
    " set_config('hnsw.ef_search', '{ef}', true)"
)
_DEFAULT_PLAN = "RESET plan_cache_mode"
_DEFAULT_EF_SEARCH = "RESET hnsw.ef_search"
# ...and, for a tenant that is most of the table, sorts off while it plans (see _fetch_on_generic_plan):
# the statement text that starts with _WALK_MARK (_search_sql) is the one planned so (ultron/db/plans.py).
_WALK_MARK = "-- planned with sorts off: the dense leg walks the HNSW index"
_WALK_SETTING = ", set_config('enable_sort', 'off', true)"


@cache
def _driver_sql(statement: TextClause, dialect: Any) -> str:
    return str(statement.compile(dialect=dialect))


_PYFORMAT = re.compile(r"%\((\w+)\)s")


@cache
def _raw_sql(statement: TextClause, dialect: Any) -> tuple[str, tuple[str, ...]]:
    """The statement with PostgreSQL's own `$n` placeholders, and the parameter names in their order.

    psycopg converts a `%(name)s` query on every call unless it is under 4 KB (its cache's limit); the
    search statement is 9 KB, and the conversion cost ~0.5 ms a search. A RawCursor sends `$n` as is."""
    sql, names = dollar_params(_driver_sql(statement, dialect), _PYFORMAT)
    return sql.replace("%%", "%"), names


def _fetch_on_generic_plan(
    session: Session, statement: TextClause, params: dict[str, Any], ef_search: int
) -> list[Any]:
    """Run the search statement on its generic plan and with its own `hnsw.ef_search`, in one round trip.

    psycopg prepares a statement from its 5th use on a connection; Postgres, left to choose, keeps
    planning the search anew (a generic plan cannot see how rare the query's words are, so its estimate
    loses), which cost 1.5-2.5 ms a call, and the generic plan of this statement runs faster still. So the
    generic plan is asked for around this statement only, and the settings, the search and the RESETs go
    to the server together in one psycopg pipeline.
    `ef_search` is the dense leg's HNSW candidate list; the connection's own (`hnsw_ef_search`, which the
    dedup and cluster probes use) is back in force after it.

    The walking statement (`_search_sql(..., walk=True)`, its text marked): sorts are off while it plans. In a
    store of ~1-3k memories the planner costs a sort of the whole tenant below the HNSW walk, blind to
    reading each vector back out of TOAST (4.4 ms against 0.5 ms at 1k); the sorts that have no other plan
    stay. Only for a tenant that is most of the table: a small tenant among large ones keeps the sort of
    its own rows, which beats a walk of everyone's graph that filters out all but a few.

    When the search opens the session's transaction (nothing ran in it before), it runs in no explicit
    transaction at all: the connection is put in autocommit for the pipeline, whose statements the server
    runs as one implicit transaction up to the pipeline's single Sync, so the settings (`set_config(...,
    true)`) hold for the search and end with it. psycopg would otherwise send BEGIN and wait for it (a
    Sync of its own in pipeline mode), then COMMIT and wait again: measured at 10k memories, 3.26-3.56
    against 2.84 ms a search statement. The session's own commit then has nothing to send (the connection
    is idle). A search inside a transaction that did other work puts the settings back with RESETs and
    leaves the transaction open."""
    raw = session.connection().connection.driver_connection
    assert raw is not None  # a checked-out connection always has one; SQLAlchemy types it Optional
    sql, names = _raw_sql(statement, session.get_bind().dialect)
    walk = statement.text.startswith(_WALK_MARK)  # the setting goes with the text its plan is cached under
    opens = raw.info.transaction_status == TransactionStatus.IDLE and not raw.autocommit
    if opens:
        raw.autocommit = True  # idle: psycopg allows the switch, and it is switched back idle below
    try:
        with raw.pipeline():
            raw.execute(_SEARCH_SETTINGS.format(ef=int(ef_search)) + (_WALK_SETTING if walk else ""))
            cursor = RawCursor(raw, row_factory=namedtuple_row)
            # binary results: the same values, without parsing ~50 columns of text back here (~0.1 ms of
            # the client's CPU a search at 10k)
            cursor.execute(sql, [params[name] for name in names], binary=True)
            if not opens:
                raw.execute(_DEFAULT_PLAN)
                raw.execute(_DEFAULT_EF_SEARCH)
                if walk:
                    raw.execute(SORT_DEFAULT)
    finally:
        # idle again after the pipeline's Sync, also when a statement failed (the implicit transaction rolls
        # back there); a connection that broke is not idle, and the pool discards it on the error raised
        if opens and raw.info.transaction_status == TransactionStatus.IDLE:
            raw.autocommit = False
    return cursor.fetchall()


@cache
def _search_sql(
    tier: bool, candidates: int, pool: int, walk: bool = False, filters: frozenset[str] = frozenset()
) -> TextClause:
    """search_memories as run: its pool sizes written in as literals and, without a tier, the tier lines
    dropped; of the filter lines only those of the `filters` fields kept. A LIMIT or a `x IS NULL OR ...`
    switch left as a parameter makes the prepared statement's generic plan guess (10 % of the table for a
    LIMIT): with them fixed, one plan fits every search.
    `walk`: the text planned with sorts off (_fetch_on_generic_plan), a statement of its own, since a
    prepared statement keeps the plan made under the settings of its first run."""
    lines = q("search_memories").text.splitlines()
    if walk:
        lines.insert(0, _WALK_MARK)
    if not tier:
        lines = [line for line in lines if not line.rstrip().endswith("-- tier")]
    lines = [line for line in lines if _filter_field(line) in (None, *filters)]
    sql = "\n".join(lines)
    sql = sql.replace(":candidates", str(int(candidates))).replace(":fts_pool", str(int(pool)))
    return text(sql)


def _filter_field(line: str) -> str | None:
    _, mark, field = line.rstrip().rpartition("-- filter:")
    return field if mark else None


# Rows the statement returns beyond the limit when questions sink (docs/ranking.md): a question turn sunk
# below the limit's last row gives its place to the row after it, which may be the answer.
QUESTION_SPARE = 2


@dataclass
class _Asked:
    """A result that only asks, as the statement ranked it (before the sink), and the turn after it in its
    thread, its reply, that may take its place (_hand_to_replies)."""

    result: SearchResult
    score: float
    confidence: str
    reply: MemoryRecord


def _asked(rows: Sequence[Any], results: list[SearchResult]) -> list[_Asked]:
    """The statement's question turns that came with a reply (search_memories' `reply` column)."""
    return [
        _Asked(r, r.score, r.confidence, MemoryRecord.model_validate(row.reply))
        for row, r in zip(rows, results, strict=True)
        if row.reply is not None
    ]


def _hand_to_replies(
    asked: list[_Asked], results: list[SearchResult], detail_level: str, limit: int, weight: float
) -> list[SearchResult]:
    """A thread turn that only asks and was found for the query ("how long were you without hot water?")
    hands its place to the turn after it, its reply ("Almost two weeks!"), which often shares no word with
    the query: the reply gets the question's score as the statement ranked it x `weight` and its
    confidence, and joins the results if it was not among them; the question itself stays sunk and
    flagged low (_sink_questions). Not handed: a reply that only asks too, one the agent may not see, one
    not active (the statement's `reply` column). The list is cut back to `limit`, confident results first.
    `explain.reply_to` names the question; a reply brought in carries the question's components."""
    by_id = {r.record.id: r for r in results}
    changed = False
    for a in asked:
        handed = a.score * weight
        confident = a.confidence == "high"
        held = by_id.get(a.reply.id)
        if held is None:
            explain = None
            if a.result.explain is not None:
                explain = a.result.explain.model_copy(
                    update={"reply_to": a.result.record.id, "question": None, "score": handed}
                )
            held = SearchResult(
                record=project(a.reply, detail_level),
                similarity_score=a.result.similarity_score,
                score=handed,
                explain=explain,
                confidence="high" if confident else "low",
            )
            results.append(held)
            by_id[a.reply.id] = held
        elif held.score < handed or (confident and held.confidence == "low"):
            held.score = max(held.score, handed)
            held.confidence = "high" if confident or held.confidence == "high" else "low"
            if held.explain is not None:
                held.explain = held.explain.model_copy(
                    update={"reply_to": a.result.record.id, "score": held.score}
                )
        else:
            continue
        changed = True
    if not changed:
        return results
    results.sort(key=ties.confident_by_score)
    return results[:limit]


def _sink_questions(rows: Sequence[Any], results: list[SearchResult], weight: float) -> list[SearchResult]:
    """A memory that only asks (its content ends with a question mark and it holds no resolution) is no
    answer, though it shares the asker's words ("How's the warehouse migration?" for "Which warehouse is
    the team migrating to?"): its score x `weight` (0.5 since issue 34's second round: at 0.8 a question
    turn still stood above the evidence in 15 of the conversation suite's 124 dev questions, at 0.5 in 5;
    docs/ranking.md), and the list back in score order. On the conversation
    suite question turns are 17 % of the turns but were 37 % of the results ranked above the first evidence
    turn, and the top result in 28 of the 69 questions whose evidence was not first; x 0.8 took MRR from
    0.698 to 0.732 and R@1 from 0.562 to 0.601, R@10 and the no-answer line unchanged (0.9: 0.716; 0.7 and
    0.5: 0.733, 0.731; docs/ranking.md). Only the returned rows are re-ordered: the factor sinks a question
    below the answers found with it, it does not drop it from the list. It is also flagged low: confident
    results come before every low one, so a question turn that passed the relevance floor still stood above
    an answer under it (R@1 0.601 -> 0.624, MRR 0.732 -> 0.747, one more no-answer question quiet)."""
    sunk = False
    for row, r in zip(rows, results, strict=True):
        if row.asks:  # the statement's: content ends with a question mark, no resolution
            r.score *= weight
            r.confidence = "low"
            if r.explain is not None:
                r.explain = r.explain.model_copy(update={"question": weight, "score": r.score})
            sunk = True
    return sorted(results, key=ties.by_score) if sunk else results


class SearchMixin:
    """MemoryService's search (see the module's docstring); its attributes are the service's."""

    settings: Settings
    embedder: Embedder
    redactor: Any
    hits: HitBuffer | None
    companion: Any
    runtime: RuntimeSettings | None
    _walk_cache: WalkCache

    if TYPE_CHECKING:

        def scope_policy(self, tenant_id: UUID, scope: str) -> Any: ...

        def record_hits(self, session: Session, actor: Actor, memory_ids: Any, signal: str) -> set[UUID]: ...

        def _activity(
            self, session: Session, actor: Actor, kind: str, memory_id: UUID | None, detail: dict[str, Any]
        ) -> None: ...

    @counts_search
    def search(
        self,
        session: Session,
        actor: Actor,
        query: str,
        *,
        tier: str | None = None,
        limit: int | None = None,
        detail_level: str = "l0",
        explain: bool = False,
        valence: float | None = None,
        arousal: float | None = None,
        serendipity: bool | None = None,
        min_relevance: float | None = None,
        filters: SearchFilters | None = None,
        quiet: bool = False,
    ) -> list[SearchResult]:
        """Hybrid search; valence/arousal (resonance) and serendipity are optional companion signals.

        min_relevance overrides the model's relevance floor: results below it are flagged low-confidence.
        filters (ultron/memory/filters.py) apply inside the statement. quiet: a ranking for the caller's own
        list (the brief), not a use: no hits, no activity, no companion re-ranking.
        """
        if not query.strip():
            raise ValidationFailed("query must not be empty")
        if detail_level not in ("l0", "l1"):
            raise ValidationFailed("detail_level must be 'l0' or 'l1' (full text comes from details)")
        if tier is not None and tier not in ("hot", "warm", "cold"):
            raise ValidationFailed("tier must be one of hot, warm, cold")
        limit = self.settings.memory_search_limit if limit is None else limit
        if not 1 <= limit <= 200:
            raise ValidationFailed("limit must be between 1 and 200")
        # Queries go to the embedding provider (maybe an external API): redact them like any text.
        # A query is the asker's own and never stored: names stay, so private memories keeping them match.
        policy = self.scope_policy(actor.tenant_id, "private")
        query = self.redactor.redact(query[:4000], policy).text if self.redactor is not None else query[:4000]
        vector = np.asarray(self.embedder.embed([query], kind="query")[0], dtype=np.float32)
        st = self.settings if self.runtime is None else self.runtime.for_tenant(session, actor.tenant_id)
        walk = self._walks_index(session, actor.tenant_id)
        given = frozenset() if filters is None else filters.given()
        candidates = max(st.search_candidates, limit)
        statement = _search_sql(tier is not None, candidates, st.fulltext_pool, walk, given)
        # A sunk question keeps no answer out of the list: the statement returns QUESTION_SPARE rows more,
        # cut back to `limit` after the question rules.
        spare = QUESTION_SPARE if st.question_weight != 1.0 else 0
        params = self._search_params(actor, query, vector, tier, limit + spare, st)
        params.update(NO_FILTERS_PARAMS if filters is None else filters.params())
        rows = _fetch_on_generic_plan(session, statement, params, st.search_ef_search)
        floor = self.settings.relevance_floor_for_model if min_relevance is None else min_relevance
        results = [self._search_result(row, detail_level, explain, floor, st) for row in rows]
        if st.question_weight != 1.0:
            asked = _asked(rows, results)
            results = _sink_questions(rows, results, st.question_weight)
            if asked:
                results = _hand_to_replies(asked, results, detail_level, limit, st.reply_weight)
            results = results[:limit]
        # A current fact the statement did not return is brought in only when nothing narrowed the search:
        # a tier or a filter it may not pass.
        results = supersede.rank_current(
            results,
            lambda ids: (
                {}
                if given or tier is not None
                else {
                    i: project(r, detail_level)
                    for i, r in load_records(session, ids, actor).items()
                    if r.status == "active"
                }
            ),
            limit,
        )
        if explain:
            matched = document.matched_contributions(
                session, actor.tenant_id, query, [r.record.id for r in results]
            )
            for r in results:
                if r.explain is not None:
                    r.explain.matched_contribution = matched.get(r.record.id)
        if quiet:
            return sorted(results, key=lambda r: r.confidence == "low")
        use = SearchUse(actor.tenant_id, actor.agent_id, tuple(r.record.id for r in results))
        if self.hits is not None:
            self.hits.add(use)
        else:
            self.record_hits(session, actor, use.memory_ids, "search")
            self._activity(session, actor, "search", None, {"results": len(results)})
        if self.companion is not None:
            results = self.companion.after_search(
                session,
                actor,
                results,
                detail_level=detail_level,
                explain=explain,
                limit=limit,
                valence=valence,
                arousal=arousal,
                # serendipity's old memories would pass no filter
                serendipity=False if given else serendipity,
                query=query,
                entities={row.id: list(row.entity_names) for row in rows},
                ripples={
                    row.id: (float(row.ripple), int(row.ripple_count)) for row in rows if row.ripple_count
                },
            )
        # Confident results first, then the ones flagged low, each in score order: a name-only or dense-only
        # match ("Priya: Night!") must not sit above the turn that answers ("... moving to Lisbon").
        # Serendipity's old memories (not matches) stay after every real result.
        return sorted(results, key=lambda r: (r.serendipity, r.confidence == "low"))

    def _walks_index(self, session: Session, tenant_id: UUID) -> bool:
        """Whether this tenant's searches plan their dense leg onto the HNSW index (_fetch_on_generic_plan):
        when it holds at least WALK_SHARE of the memories, by its active count at the last term-statistics
        refresh against the table's row estimate. Re-read once a minute (a no: every 10 s); unknown (no
        refresh yet): no."""

        def read() -> bool:
            row = session.execute(q("tenant_share"), {"tenant_id": tenant_id}).one()
            return bool(row.docs and row.rows > 0 and row.docs >= WALK_SHARE * row.rows)

        return self._walk_cache.get(tenant_id, read)

    def _search_params(
        self,
        actor: Actor,
        query: str,
        vector: np.ndarray,
        tier: str | None,
        limit: int,
        st: Settings | None = None,
    ) -> dict[str, Any]:
        st = st or self.settings
        span = query_time_range(query)
        return {
            **actor.visibility(),
            "tier": tier,
            "embedding": vector,
            **fulltext.lexical_query(query).params(),
            "k1": st.bm25_k1,
            "b": st.bm25_b,
            "phrase_weight": st.phrase_weight,
            "phrase_boost": st.phrase_match_boost,
            "fusion": st.search_fusion,
            "w_dense": 1.0 - st.fulltext_weight,
            "w_lex": st.fulltext_weight,
            "rrf_k": st.rrf_k,
            "lex_half": st.lexical_half,
            "neighbour_weight": st.neighbour_weight,
            "t_from": span[0] if span else None,
            "t_to": span[1] if span else None,
            "time_weight": st.time_weight,
            "boost_hot": st.tier_boost_hot,
            "boost_warm": st.tier_boost_warm,
            "boost_cold": st.tier_boost_cold,
            "alpha": st.decay_alpha,
            "decay_weight": st.time_decay_weight,
            "limit": limit,
            "ripple_cap": st.ripple_cap,
            "ripple_age": st.ripple_days * 86400.0,
            # the reply of a question turn comes with it only where the rule is on (_hand_to_replies)
            "reply_weight": st.reply_weight if st.question_weight != 1.0 else 0.0,
        }

    def refresh_term_stats(self, session: Session, tenant_id: UUID) -> int:
        """Rebuild a tenant's term statistics (IDF) from its active memories; the worker runs this."""
        return int(session.execute(q("refresh_term_stats"), {"tenant_id": tenant_id}).scalar_one() or 0)

    def _search_result(
        self, row: Any, detail_level: str, explain: bool, floor: float, st: Settings | None = None
    ) -> SearchResult:
        # Built from our own row, of the record's types already, the projection's blanks in place: not
        # validated, and no second model for project()'s copy.
        record = _trusted(
            MemoryRecord,
            _record_fields(row, row.agent_name, row.contributions) | _blanks(detail_level),
            _RECORD_FIELDS,
        )
        calibrated = calibrated_relevance(self.settings.embedding_provider, row)
        components = None
        if explain:
            components = ScoreComponents(
                vector_similarity=float(row.vector_similarity),
                vector_rank=int(row.vector_rank),
                text_rank=float(row.text_rank),
                text_rank_position=None if row.text_rank_pos is None else int(row.text_rank_pos),
                text_coverage=float(row.coverage or 0.0),
                content_coverage=content_coverage(row),
                fusion=self.settings.search_fusion,
                fused=float(row.fused),
                neighbour_credit=self.settings.neighbour_weight * float(row.neighbour_fused),
                time_match=bool(row.time_match),
                phrase_match=bool(row.phrase_match),
                dense_z=dense_z(row),
                calibrated_relevance=calibrated,
                relevance=float(row.relevance),
                tier_boost=float(row.tier_boost),
                hotness=float(row.hotness),
                days_since_hit=float(row.days_since_hit),
                decay_weight=(st or self.settings).time_decay_weight,
                from_vector=bool(row.from_vector),
                from_text=bool(row.from_text),
                score=float(row.score),
            )
        return _trusted(
            SearchResult,
            {
                "record": record,
                "similarity_score": calibrated,
                "score": float(row.score),
                "explain": components,
                "confidence": "high" if calibrated >= floor else "low",
                "serendipity": False,
            },
            _RESULT_FIELDS_SET,
        )
