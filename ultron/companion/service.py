"""Companion memory service: brief, pins, emotion, reflections, time ripple and serendipity.

It also implements the memory service's companion hooks (ultron/memory/service.py `CompanionHooks`):
emotion after an upload, ripples after a details read, resonance/ripple re-ranking and serendipity
after a search. Like every service it takes the session first and never commits.
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import numpy as np
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from ultron.companion.emotion import infer_emotion, resonance
from ultron.companion.schemas import (
    Brief,
    BriefItem,
    Dream,
    DreamItem,
    PinSuggestion,
    ReflectionRequest,
    ReflectionResult,
)
from ultron.config import Settings
from ultron.db.models import Memory, MemoryEntity
from ultron.db.queries import q
from ultron.errors import NotFound, ValidationFailed
from ultron.memory.schemas import (
    MemoryPatch,
    MemoryRecord,
    ScoreComponents,
    SearchResult,
    UploadRequest,
    UploadResult,
)
from ultron.memory.service import MemoryService, project
from ultron.memory.text import PERSONAL_TYPES, REFLECTION_TYPE
from ultron.providers.tokens import count_tokens, truncate_to_tokens
from ultron.tenancy import Actor

# Pinned memories a brief considers at most (pins are few by nature; this bounds a runaway).
BRIEF_PINNED_LIMIT = 200
# What a companion brings to a session about its person (pinned and HOT ones have their own sections):
# the personal types but the agent's own reflections, which are about it, not the person.
BRIEF_PERSONAL_TYPES = tuple(t for t in PERSONAL_TYPES if t != REFLECTION_TYPE)
# Longest resolution a brief line carries.
BRIEF_RESOLUTION_TOKENS = 48
# Reflections that say the same thing this many times get a pin suggestion; recent reflections compared.
REPEATED_REFLECTIONS = 3
REFLECTION_POOL = 200
# Old memories serendipity draws from, and the most it surfaces.
SERENDIPITY_POOL = 50
SERENDIPITY_MAX = 3
DREAM_GUIDANCE = [
    "What did these experiences teach you that will still hold next month?",
    "Which of them contradict what you believed before? Correct yourself with a reflection.",
    "What links them? A pattern across several is worth one reflection, not several.",
    "Write reflections with `reflect`, naming the memories in source_ids so they are not offered again.",
]
DREAM_PROMPTS = {
    "error": "What would have prevented this error, and how will you recognise it sooner?",
    "security": "What habit keeps this from happening again?",
    "correction": "What did you believe before, and why was it wrong?",
    "pattern": "When does this pattern apply, and when does it not?",
    "preference": "How should this preference change how you work with them?",
    "life": "What does this tell you about the people you work with?",
}

# A skill source contributes brief items: (session, actor, task, embedding or None) -> items.
SkillSource = Callable[[Session, Actor, str | None, Any], list[BriefItem]]


def _visibility(actor: Actor) -> dict[str, Any]:
    return {"tenant_id": actor.tenant_id, "agent_id": actor.agent_id, "groups": list(actor.groups)}


class CompanionService:
    def __init__(self, settings: Settings, memory: MemoryService):
        self.settings = settings
        self.memory = memory
        # The skills seam: the skill hub registers a source here when it exists; until then a brief has
        # no skill section (and says so with skills_available=false).
        self.skill_source: SkillSource | None = None
        # Set by the hub: an admin's runtime changes per tenant (ultron/settings_store.py).
        self.runtime: Any = None

    def tenant_settings(self, session: Session, tenant_id: UUID) -> Settings:
        """The settings that apply to this tenant now: the configuration and an admin's changes."""
        return self.settings if self.runtime is None else self.runtime.for_tenant(session, tenant_id)  # type: ignore[no-any-return]

    # --- pins ----------------------------------------------------------------------------------

    def pin(self, session: Session, actor: Actor, memory_id: UUID, pinned: bool = True) -> MemoryRecord:
        """Pinned memories never decay, never archive, never merge away and lead the brief."""
        return self.memory.edit(session, actor, memory_id, MemoryPatch(pinned=pinned))

    # --- brief ---------------------------------------------------------------------------------

    def brief(
        self, session: Session, actor: Actor, task: str | None = None, max_tokens: int | None = None
    ) -> Brief:
        if max_tokens is not None and not 1 <= max_tokens <= 100_000:
            raise ValidationFailed("max_tokens must be between 1 and 100000")
        task = task.strip()[:4000] if task and task.strip() else None
        redactor = self.memory.redactor
        if task is not None and redactor is not None:
            # The hint goes to the embedding provider (maybe an external API): redact it like any text.
            task = redactor.redact(task, self.memory.scope_policy(actor.tenant_id, "private")).text
        vector = None
        if task is not None:
            vector = np.asarray(self.memory.embedder.embed([task], kind="query")[0], dtype=np.float32)
        st = self.tenant_settings(session, actor.tenant_id)
        budget = st.brief_max_tokens if max_tokens is None else max_tokens
        params = _visibility(actor)
        pinned = session.execute(q("brief_pinned"), {**params, "limit": BRIEF_PINNED_LIMIT}).all()
        personal: Sequence[Any] = []
        if st.brief_personal_limit > 0:
            personal = session.execute(
                q("brief_personal_used" if vector is None else "brief_personal_near"),
                {
                    **params,
                    "embedding": vector,
                    "types": list(BRIEF_PERSONAL_TYPES),
                    "limit": st.brief_personal_limit,
                },
            ).all()
        hot = session.execute(
            q("brief_hot"), {**params, "embedding": vector, "limit": st.brief_hot_limit}
        ).all()
        candidates = [self._memory_item(row, "pinned", task) for row in pinned]
        candidates += [self._memory_item(row, "personal", task) for row in personal]
        candidates += [self._memory_item(row, "hot", task) for row in hot]
        skills: list[BriefItem] = []
        if self.skill_source is not None:
            skills = self.skill_source(session, actor, task, vector)
            candidates += skills
        brief = self._fit(task, budget, candidates, skills_available=self.skill_source is not None)
        return brief.model_copy(update={"suggestions": self.pin_suggestions(session, actor)})

    def _memory_item(self, row: Any, section: str, task: str | None) -> BriefItem:
        summary = row.summary_l0 or truncate_to_tokens(row.content, self.settings.l0_max_tokens)
        line = f"- [{section}/{row.memory_type}] {summary}"
        if row.resolution:
            line += f" -> {truncate_to_tokens(row.resolution, BRIEF_RESOLUTION_TOKENS)}"
        if section == "pinned":
            reason = "pinned: always leads the brief"
        else:
            what = "about the person" if section == "personal" else "hot"
            reason = f"{what} ({row.hit_count} hits); " + (
                f"similarity {row.similarity:.3f} to the task"
                if row.similarity is not None
                else "no task given, most used first"
            )
        return BriefItem(
            kind="memory",
            id=row.id,
            section=section,  # type: ignore[arg-type]
            reason=reason,
            memory_type=row.memory_type,
            text=line,
            tokens=count_tokens(line),
            similarity=None if row.similarity is None else float(row.similarity),
        )

    def _fit(
        self, task: str | None, budget: int, candidates: list[BriefItem], *, skills_available: bool
    ) -> Brief:
        """Take items in order while the text stays within the budget; stop at the first that does not."""
        header = f"# Brief{f' for: {truncate_to_tokens(task, 40)}' if task else ''}"
        lines = [header] if count_tokens(header) <= budget else []
        taken: list[BriefItem] = []
        for item in candidates:
            if count_tokens("\n".join([*lines, item.text])) > budget:
                break
            lines.append(item.text)
            taken.append(item)
        text = "\n".join(lines)
        return Brief(
            task=task,
            max_tokens=budget,
            tokens=count_tokens(text),
            items=taken,
            omitted=len(candidates) - len(taken),
            skills_available=skills_available,
            text=text,
        )

    def pin_suggestions(self, session: Session, actor: Actor) -> list[PinSuggestion]:
        """Reflections written three or more times (similar at the model's soft dedup threshold; reflections
        are never merged, so repeats pile up) and not pinned yet."""
        rows = session.execute(
            q("reflection_repeats"),
            {
                **_visibility(actor),
                "similarity": self.memory.soft_threshold,
                "min_others": REPEATED_REFLECTIONS - 1,
                "pool": REFLECTION_POOL,
            },
        ).all()
        covered: set[UUID] = set()
        out = []
        for row in rows:
            group = {row.id, *row.similar}
            if row.pinned or row.any_pinned or row.id in covered:
                covered |= group
                continue
            covered |= group
            out.append(
                PinSuggestion(
                    id=row.id,
                    summary=row.summary_l0,
                    similar_ids=list(row.similar),
                    reason=f"{len(group)} similar reflections: pin the lesson so it leads every brief",
                )
            )
        return out

    # --- reflections ---------------------------------------------------------------------------

    def dream(self, session: Session, actor: Actor, limit: int = 10) -> Dream:
        """Recent memories this agent has not reflected on, each with a prompt, plus guidance."""
        if not 1 <= limit <= 50:
            raise ValidationFailed("limit must be between 1 and 50")
        ids = list(session.execute(q("dream_candidates"), {**_visibility(actor), "limit": limit}).scalars())
        records = self.memory._records(session, ids, actor)
        items = [
            DreamItem(record=records[i], prompt=DREAM_PROMPTS.get(records[i].memory_type, DREAM_GUIDANCE[0]))
            for i in ids
            if i in records
        ]
        written = session.execute(
            select(func.count())
            .select_from(Memory)
            .where(
                Memory.tenant_id == actor.tenant_id,
                Memory.agent_id == actor.agent_id,
                Memory.memory_type == REFLECTION_TYPE,
            )
        ).scalar_one()
        return Dream(items=items, guidance=DREAM_GUIDANCE, reflections=int(written))

    def reflect(self, session: Session, actor: Actor, req: ReflectionRequest) -> ReflectionResult:
        """Store a reflection (its own type: never merged into events) and mark its sources reflected on."""
        sources = list(dict.fromkeys(req.source_ids))
        visible = self.memory._records(session, sources, actor)
        missing = [str(i) for i in sources if i not in visible]
        if missing:
            raise NotFound(f"memories not found: {', '.join(missing)}")
        upload = UploadRequest(
            content=req.content,
            context=req.context,
            resolution=req.resolution,
            tags=req.tags,
            scope=req.scope,
            group=req.group,
            valence=req.valence,
            arousal=req.arousal,
        )
        prepared = dataclasses.replace(self.memory._prepare(upload, actor), memory_type=REFLECTION_TYPE)
        # Created, never deduplicated: a reflection is one moment of the agent's own judgement.
        result = self.after_upload(session, actor, upload, self.memory._create(session, actor, prepared))
        marked = list(
            session.execute(
                q("mark_reflected"),
                {
                    "tenant_id": actor.tenant_id,
                    "agent_id": actor.agent_id,
                    "reflection_id": result.record.id,
                    "memory_ids": sources,
                },
            ).scalars()
        )
        return ReflectionResult(record=result.record, marked=marked)

    # --- hooks: upload -------------------------------------------------------------------------

    def after_upload(
        self, session: Session, actor: Actor, req: UploadRequest, result: UploadResult
    ) -> UploadResult:
        """Store the given valence/arousal (averaged into a merge), or infer them with the LLM; link the
        people, places and projects the (redacted) text names."""
        memory = session.get(Memory, (result.record.id, actor.tenant_id))
        if memory is None:
            return result
        self.link_entities(session, memory)
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
            inferred = infer_emotion(
                self.memory.intelligence, memory.content, memory.context, memory.resolution
            )
            if inferred is not None:
                memory.valence, memory.arousal = inferred
        else:
            return result
        session.flush()
        record = result.record.model_copy(update={"valence": memory.valence, "arousal": memory.arousal})
        return result.model_copy(update={"record": record})

    # --- hooks: details (time ripple) ----------------------------------------------------------

    def after_details(self, session: Session, actor: Actor, ids: list[UUID]) -> None:
        """Using a memory slightly activates the memories created within the ripple window of it."""
        st = self.settings
        if not ids or st.ripple_neighbours == 0 or st.ripple_weight == 0:
            return
        touched = session.execute(
            q("ripple_from"),
            {
                **_visibility(actor),
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
        ranked = [
            self._adjust(
                r,
                ripples.get(r.record.id),
                valence,
                arousal,
                explain,
                (r.record.importance, r.record.resolved_at is not None),
                st,
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
        from ultron.companion.serendipity import calibration_for

        return calibration_for(self.memory.embedder).relevance_threshold(st.fulltext_weight)

    def link_entities(self, session: Session, memory: Memory) -> None:
        """Replace the memory's entity links with what its current text names."""
        from ultron.companion.entities import extract

        found = extract("\n".join((memory.content, memory.context, memory.resolution)))
        session.execute(delete(MemoryEntity).where(MemoryEntity.memory_id == memory.id))
        for kind, name in sorted(found):
            session.add(MemoryEntity(memory_id=memory.id, tenant_id=memory.tenant_id, kind=kind, name=name))
        session.flush()

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
        for memory_id, names in entities.items():
            for name in names:
                if re.search(rf"(?<!\w){re.escape(name.casefold())}(?!\w)", asked):
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

    def resolve(self, session: Session, actor: Actor, memory_id: UUID, resolved: bool) -> MemoryRecord:
        """Resolve (or reopen) a memory: resolved ones sink in search and leave the brief's HOT and
        personal sections. Contributor or admin, like any edit."""
        memory = self.memory._owned(session, actor, memory_id)
        memory.resolved_at = (memory.resolved_at or datetime.now(UTC)) if resolved else None
        memory.updated_at = datetime.now(UTC)
        session.flush()
        return self.memory.get(session, actor, memory_id)

    def _adjust(
        self,
        result: SearchResult,
        ripple: tuple[float, int] | None,
        valence: float | None,
        arousal: float | None,
        explain: bool,
        weight: tuple[int, bool] | None = None,
        st: Settings | None = None,
    ) -> SearchResult:
        st = st or self.settings
        record = result.record
        score = result.score
        update: dict[str, Any] = {}
        days = _days_since(record.last_hit_at or record.created_at)
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
        hours = (datetime.now(UTC) - record.created_at).total_seconds() / 3600.0
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
            days = _days_since(record.last_hit_at or record.created_at)
            decay = 1 - st.time_decay_weight + st.time_decay_weight * math.exp(-st.decay_alpha * days)
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
                    **_visibility(actor),
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
        records = self.memory._records(session, picked, actor)
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
                )
            )
        return out


def _blend(current: float | None, given: float | None, merged: bool) -> float | None:
    """A merge averages the moods (as the seed does); a new memory takes the given one."""
    if given is None:
        return current
    if merged and current is not None:
        return round((current + given) / 2.0, 4)
    return given


def _days_since(moment: datetime) -> float:
    return max((datetime.now(UTC) - moment).total_seconds() / 86400.0, 0.0)
