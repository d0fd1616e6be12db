"""The companion's hooks into the memory service: emotion after an upload, ripples after a details read,
resonance/ripple re-ranking and serendipity after a search.

`MemoryHooks` implements ultron/memory/service.py's `CompanionHooks` protocol; the hub builds it before
the memory service and hands it in. It reads memories itself (ultron.memory.records.load_records), so it
needs no MemoryService. Like every service it takes the session first and never commits.
"""

from __future__ import annotations

import functools
import math
import random
import re
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from sqlalchemy import bindparam, delete, insert, select
from sqlalchemy import update as sql_update
from sqlalchemy.orm import Session

from ultron.companion.emotion import infer_emotion, resonance
from ultron.companion.serendipity import Calibration, calibration_for
from ultron.config import Settings
from ultron.db.models import Memory, MemoryEntity
from ultron.db.queries import q
from ultron.memory.classify import IMPORTANCE_DEFAULT, infer_importance
from ultron.memory.ownership import may_set_fields
from ultron.memory.records import load_records, project
from ultron.memory.schemas import ScoreComponents, SearchResult, UploadRequest, UploadResult
from ultron.providers.base import Embedder
from ultron.settings_store import RuntimeSettings
from ultron.tenancy import Actor

# Old memories serendipity draws from, and the most it surfaces.
SERENDIPITY_POOL = 50
SERENDIPITY_MAX = 3


class MemoryHooks:
    def __init__(
        self,
        settings: Settings,
        intelligence: Any,
        embedder: Embedder,
        runtime: RuntimeSettings | None = None,
    ):
        self.settings = settings
        self.intelligence = intelligence  # infers a memory's mood when none is given
        self.embedder = embedder  # the serendipity threshold is calibrated for its model
        self.runtime = runtime  # an admin's runtime changes per tenant (ultron/settings_store.py)
        self._calibration: tuple[Embedder, Calibration] | None = None  # serendipity_threshold's, per embedder

    def tenant_settings(self, session: Session, tenant_id: UUID) -> Settings:
        """The settings that apply to this tenant now: the configuration and an admin's changes."""
        return self.settings if self.runtime is None else self.runtime.for_tenant(session, tenant_id)

    # --- hooks: upload -------------------------------------------------------------------------

    def after_upload(
        self, session: Session, actor: Actor, req: UploadRequest, result: UploadResult
    ) -> UploadResult:
        """Store the given valence/arousal (averaged into a merge), or infer them with the LLM; link the
        people, places and projects the (redacted) text names."""
        if result.decision == "created":
            return self._after_create(session, actor, req, result)
        memory = session.get(Memory, (result.record.id, actor.tenant_id))
        if memory is None:
            return result
        self.link_entities(session, memory)
        if not may_set_fields(actor, memory):
            return result  # another agent's upload (or any, into a pinned memory) sets none of its fields
        if req.importance is not None:
            memory.importance = req.importance
            session.flush()
            result = result.model_copy(
                update={"record": result.record.model_copy(update={"importance": memory.importance})}
            )
        if req.valence is not None or req.arousal is not None:
            merged = result.decision != "created"
            memory.valence = _blend(memory.valence, req.valence, merged)
            memory.arousal = _blend(memory.arousal, req.arousal, merged)
        elif memory.valence is None and self.settings.emotion_inference:
            inferred = infer_emotion(self.intelligence, memory.content, memory.context, memory.resolution)
            if inferred is not None:
                memory.valence, memory.arousal = inferred
        else:
            return result
        session.flush()
        record = result.record.model_copy(update={"valence": memory.valence, "arousal": memory.arousal})
        return result.model_copy(update={"record": record})

    def _after_create(
        self, session: Session, actor: Actor, req: UploadRequest, result: UploadResult
    ) -> UploadResult:
        """`after_upload` for a memory the upload just created, from its record (the row its INSERT
        returned): a new id has no entity links to replace, so only what its text names is inserted, and
        the mood and importance are written in one UPDATE; text that names nothing, with no mood given or
        inferred, costs no statement."""
        record = result.record
        self._insert_links(
            session, actor.tenant_id, record.id, _named(record.content, record.context, record.resolution)
        )
        update = self._new_memory_columns(req, record)
        if not update:
            return result
        session.execute(
            sql_update(Memory)
            .where(Memory.id == record.id, Memory.tenant_id == actor.tenant_id)
            .values(**update)
        )
        return result.model_copy(update={"record": record.model_copy(update=update)})

    def after_create_many(
        self, session: Session, actor: Actor, created: list[tuple[UploadRequest, UploadResult]]
    ) -> list[UploadResult]:
        """`_after_create` for memories a batch has just created, in a few statements for them all: their
        entity links in one INSERT, the given importance and moods (or the inferred ones) in one UPDATE per
        set of columns."""
        links, changes, out = [], [], []
        _warm_names([f for _, result in created for f in _fields(result.record)])
        for req, result in created:
            r = result.record
            links += [
                {"memory_id": r.id, "tenant_id": actor.tenant_id, "kind": k, "name": n}
                for k, n in sorted(_named(r.content, r.context, r.resolution))
            ]
            update = self._new_memory_columns(req, r)
            if update:
                changes.append(update | {"b_id": r.id, "b_tenant": actor.tenant_id})
                result = result.model_copy(update={"record": r.model_copy(update=update)})
            out.append(result)
        if links:
            session.execute(insert(MemoryEntity.metadata.tables[MemoryEntity.__tablename__]), links)
        table = Memory.metadata.tables[Memory.__tablename__]
        by_id = (table.c.id == bindparam("b_id"), table.c.tenant_id == bindparam("b_tenant"))
        for columns in sorted({tuple(sorted(c)) for c in changes}):  # one UPDATE per set of columns
            session.execute(
                sql_update(table).where(*by_id), [c for c in changes if tuple(sorted(c)) == columns]
            )
        return out

    def _new_memory_columns(self, req: UploadRequest, record: Any) -> dict[str, Any]:
        """What a new memory's row gets besides its text: the given importance (else the one inferred from
        its type and text: a production outage high, chit-chat low), the given moods, or the mood inferred
        from its text."""
        update: dict[str, Any] = {}
        if req.importance is not None:
            update["importance"] = req.importance
        else:
            importance = infer_importance(
                record.memory_type, record.content, record.context, record.resolution
            )
            if importance != IMPORTANCE_DEFAULT:
                update["importance"] = importance
        if req.valence is not None or req.arousal is not None:
            update["valence"] = _blend(record.valence, req.valence, False)
            update["arousal"] = _blend(record.arousal, req.arousal, False)
        elif record.valence is None and self.settings.emotion_inference:
            inferred = infer_emotion(self.intelligence, record.content, record.context, record.resolution)
            if inferred is not None:
                update["valence"], update["arousal"] = inferred
        return update

    def _insert_links(
        self, session: Session, tenant_id: UUID, memory_id: UUID, found: set[tuple[str, str]]
    ) -> None:
        if found:
            session.execute(
                insert(MemoryEntity).values(
                    [
                        {"memory_id": memory_id, "tenant_id": tenant_id, "kind": kind, "name": name}
                        for kind, name in sorted(found)
                    ]
                )
            )

    # --- hooks: details (time ripple) ----------------------------------------------------------

    def after_details(self, session: Session, actor: Actor, ids: list[UUID]) -> None:
        """Using a memory slightly activates the memories created within the ripple window of it."""
        st = self.settings
        if not ids or st.ripple_neighbours == 0 or st.ripple_weight == 0:
            return
        touched = session.execute(
            q("ripple_from"),
            {
                **actor.visibility(),
                "source_ids": list(ids),
                "window_seconds": st.ripple_window_hours * 3600.0,
                "k": st.ripple_neighbours,
                "weight": st.ripple_weight,
            },
        ).scalars()
        touched_ids = list(set(touched))
        if touched_ids:
            session.execute(
                q("prune_ripples"),
                {"tenant_id": actor.tenant_id, "ids": touched_ids, "age_seconds": st.ripple_days * 86400.0},
            )

    def ripple_levels(self, session: Session, actor: Actor, ids: list[UUID]) -> dict[UUID, tuple[float, int]]:
        if not ids:
            return {}
        rows = session.execute(
            q("ripple_levels"),
            {
                "tenant_id": actor.tenant_id,
                "ids": ids,
                "cap": self.settings.ripple_cap,
                "age_seconds": self.settings.ripple_days * 86400.0,
            },
        ).all()
        return {row.id: (float(row.ripple), int(row.ripple_count)) for row in rows}

    # --- hooks: search -------------------------------------------------------------------------

    def after_search(
        self,
        session: Session,
        actor: Actor,
        results: list[SearchResult],
        *,
        detail_level: str = "l0",
        explain: bool = False,
        limit: int = 10,
        valence: float | None = None,
        arousal: float | None = None,
        serendipity: bool | None = None,
        query: str | None = None,
        entities: dict[UUID, list[str]] | None = None,
        ripples: dict[UUID, tuple[float, int]] | None = None,
        **_: Any,
    ) -> list[SearchResult]:
        """Pinned memories do not decay; ripple and (when a mood is given) resonance re-rank; serendipity.

        `entities`: the names each result's memory is linked to, when the search statement fetched them
        (it does: one round trip fewer); otherwise they are read here. `ripples`: likewise, each result's
        ripple activation (the search statement returns it; memories with no recent ripple are absent)."""
        st = self.tenant_settings(session, actor.tenant_id)
        if ripples is None:
            ripples = self.ripple_levels(session, actor, [r.record.id for r in results])
        now = datetime.now(UTC)  # one clock reading for the whole result list
        ranked = [
            self._adjust(
                r,
                ripples.get(r.record.id),
                valence,
                arousal,
                explain,
                (r.record.importance, r.record.resolved_at is not None),
                st,
                now,
            )
            for r in results
        ]
        ranked = self._entity_signal(session, query, ranked, explain, entities, st)
        ranked.sort(key=lambda r: (-r.score, str(r.record.id)))
        enabled = st.serendipity_enabled if serendipity is None else serendipity
        best = max((r.similarity_score for r in ranked), default=0.0)
        thin = enabled and (len(ranked) < st.serendipity_min_results or best < self.serendipity_threshold(st))
        if thin:
            ranked += self._serendipity(session, actor, ranked, detail_level, explain, st)
        return ranked

    def serendipity_threshold(self, st: Settings | None = None) -> float:
        """The relevance below which a search "found little": set, or calibrated for the embedding model."""
        st = st or self.settings
        if st.serendipity_relevance is not None:
            return st.serendipity_relevance
        if self._calibration is None or self._calibration[0] is not self.embedder:
            self._calibration = (self.embedder, calibration_for(self.embedder))
        return self._calibration[1].relevance_threshold(st.fulltext_weight)

    def link_entities(self, session: Session, memory: Memory) -> None:
        """Replace the memory's entity links with what its current text names."""
        found = _named(memory.content, memory.context, memory.resolution)
        session.execute(delete(MemoryEntity).where(MemoryEntity.memory_id == memory.id))
        self._insert_links(session, memory.tenant_id, memory.id, found)

    def _entity_signal(
        self,
        session: Session,
        query: str | None,
        results: list[SearchResult],
        explain: bool,
        entities: dict[UUID, list[str]] | None = None,
        st: Settings | None = None,
    ) -> list[SearchResult]:
        """Results that name a person, place or project the query names rank higher."""
        st = st or self.settings
        if not query or not results or not st.entity_weight:
            return results
        if entities is None:
            rows = session.execute(
                select(MemoryEntity.memory_id, MemoryEntity.name).where(
                    MemoryEntity.memory_id.in_([r.record.id for r in results])
                )
            ).all()
            entities = {}
            for row in rows:
                entities.setdefault(row.memory_id, []).append(row.name)
        asked = query.casefold()
        shared: dict[UUID, list[str]] = {}
        named: dict[str, bool] = {}  # a name many results share is looked for once
        for memory_id, names in entities.items():
            for name in names:
                found = named.get(name)
                if found is None:
                    found = named[name] = _name_pattern(name).search(asked) is not None
                if found:
                    shared.setdefault(memory_id, []).append(name)
        out = []
        for r in results:
            names = sorted(shared.get(r.record.id, []))
            if not names:
                out.append(r)
                continue
            factor = 1 + st.entity_weight * min(len(names), 2)
            update: dict[str, Any] = {"score": r.score * factor}
            if explain and r.explain is not None:
                update["explain"] = r.explain.model_copy(
                    update={"entity": round(factor, 6), "entities": names, "score": r.score * factor}
                )
            out.append(r.model_copy(update=update))
        return out

    def _adjust(
        self,
        result: SearchResult,
        ripple: tuple[float, int] | None,
        valence: float | None,
        arousal: float | None,
        explain: bool,
        weight: tuple[int, bool] | None = None,
        st: Settings | None = None,
        now: datetime | None = None,
    ) -> SearchResult:
        st = st or self.settings
        now = now or datetime.now(UTC)
        record = result.record
        score = result.score
        update: dict[str, Any] = {}
        days = _days_since(record.last_hit_at or record.created_at, now)
        decay = 1 - st.time_decay_weight + st.time_decay_weight * math.exp(-st.decay_alpha * days)
        if record.arousal and not record.pinned and st.arousal_decay_slowdown and decay > 0:
            # High arousal slows decay: the memory fades as if alpha were smaller.
            alpha = st.decay_alpha * (1 - st.arousal_decay_slowdown * record.arousal)
            slowed = 1 - st.time_decay_weight + st.time_decay_weight * math.exp(-alpha * days)
            score = score / decay * slowed
            update["hotness"] = round(math.exp(-alpha * days), 6)
        if record.arousal and st.urgency_weight:
            urgency = 1 + st.urgency_weight * record.arousal
            score *= urgency
            update["urgency"] = round(urgency, 6)
        hours = (now - record.created_at).total_seconds() / 3600.0
        if st.freshness_weight and st.freshness_hours and 0 <= hours < st.freshness_hours:
            fresh = 1 + st.freshness_weight * (1 - hours / st.freshness_hours)
            score *= fresh
            update["freshness"] = round(fresh, 6)
        if weight is not None:
            importance, resolved = weight
            if importance != 5:
                factor = 0.5 + importance / 10.0
                score *= factor
                update["importance"] = round(factor, 6)
            if resolved:
                score *= st.resolved_factor
                update["resolved"] = st.resolved_factor
        if record.pinned:
            # Pinned memories never decay: undo the recency factor (hotness counts as 1).
            score = score / decay if decay > 0 else score
            update["hotness"] = 1.0
        if ripple is not None:
            score *= 1 + ripple[0]
            update["ripple"], update["ripple_count"] = round(ripple[0], 6), ripple[1]
        mood = resonance(valence, arousal, record.valence, record.arousal)
        if mood is not None:
            # Raises a memory whose mood matches (resonance > 0.5), lowers one whose mood is opposite.
            score *= 1 + st.resonance_weight * (2 * mood - 1)
            update["resonance"] = round(mood, 6)
        if not update:
            return result
        components = None
        if explain and result.explain is not None:
            components = result.explain.model_copy(update={**update, "score": score})
        return result.model_copy(update={"score": score, "explain": components})

    def _serendipity(
        self,
        session: Session,
        actor: Actor,
        found: list[SearchResult],
        detail_level: str,
        explain: bool,
        st: Settings | None = None,
    ) -> list[SearchResult]:
        """One to three old, long-unused memories, drawn at random (seeded when configured), low weight."""
        st = st or self.settings
        pool = list(
            session.execute(
                q("serendipity_pool"),
                {
                    **actor.visibility(),
                    "exclude": [r.record.id for r in found],
                    "min_age_seconds": st.serendipity_min_age_days * 86400.0,
                    "pool": SERENDIPITY_POOL,
                },
            ).scalars()
        )
        if not pool:
            return []
        rng = random.Random(st.serendipity_seed) if st.serendipity_seed is not None else random.Random()
        picked = rng.sample(pool, min(len(pool), rng.randint(1, SERENDIPITY_MAX)))
        records = load_records(session, picked, actor)
        out = []
        for memory_id in picked:
            record = records[memory_id]
            days = _days_since(record.last_hit_at or record.created_at)
            components = None
            if explain:
                components = ScoreComponents(
                    vector_similarity=0.0,
                    text_rank=0.0,
                    relevance=0.0,
                    tier_boost=st.tier_boosts[record.tier],
                    hotness=math.exp(-st.decay_alpha * days),
                    days_since_hit=days,
                    decay_weight=st.time_decay_weight,
                    from_vector=False,
                    from_text=False,
                    score=0.0,
                    serendipity=True,
                )
            out.append(
                SearchResult(
                    record=project(record, detail_level),
                    similarity_score=0.0,
                    score=0.0,
                    explain=components,
                    serendipity=True,
                    # not a match: a caller reading "only low results" as "nothing found" must still do so
                    confidence="low",
                )
            )
        return out


def _fields(record: Any) -> tuple[str, str, str]:
    return record.content, record.context, record.resolution


def _warm_names(texts: list[str]) -> None:
    """The English model over many texts `_named` reads next, in one `pipe` pass (entities.warm)."""
    from ultron.companion.entities import warm  # here: it loads Presidio and spaCy (start-up)

    warm(texts)


def _named(*texts: str) -> set[tuple[str, str]]:
    """(kind, name) pairs the texts name (ultron.companion.entities.extract over each): one field at a
    time, as the redactor reads them, so a field it read is not read by the model again."""
    from ultron.companion.entities import extract  # here: it loads Presidio and spaCy (start-up)

    return set().union(*(extract(t) for t in texts if t))


def _blend(current: float | None, given: float | None, merged: bool) -> float | None:
    """A merge averages the moods (as the seed does); a new memory takes the given one."""
    if given is None:
        return current
    if merged and current is not None:
        return round((current + given) / 2.0, 4)
    return given


def _days_since(moment: datetime, now: datetime | None = None) -> float:
    return max(((now or datetime.now(UTC)) - moment).total_seconds() / 86400.0, 0.0)


@functools.lru_cache(maxsize=4096)
def _name_pattern(name: str) -> re.Pattern[str]:
    """A linked name as a whole word of a casefolded query (the entity signal); names recur."""
    return re.compile(rf"(?<!\w){re.escape(name.casefold())}(?!\w)")
