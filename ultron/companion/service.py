"""Companion memory service: brief, pins, reflections, resolving.

The memory service's companion hooks (emotion, time ripple, resonance and serendipity) are
ultron/companion/hooks.py's `MemoryHooks`, built before the memory service; this service uses them too
(a reflection's upload, the tenant's settings). Like every service it takes the session first and never
commits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ultron.companion.hooks import MemoryHooks
from ultron.companion.schemas import (
    Brief,
    BriefItem,
    Dream,
    DreamItem,
    PinSuggestion,
    ReflectionRequest,
    ReflectionResult,
)
from ultron.companion.taskbrief import BRIEF_TASK_RESULTS, once_each, relevant_items
from ultron.config import Settings
from ultron.db.models import Memory
from ultron.db.queries import q
from ultron.errors import NotFound, ValidationFailed
from ultron.memory.records import load_records
from ultron.memory.schemas import (
    MemoryPatch,
    MemoryRecord,
    SearchResult,
    UploadRequest,
)
from ultron.memory.service import MemoryService
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


class CompanionService:
    def __init__(
        self,
        settings: Settings,
        memory: MemoryService,
        hooks: MemoryHooks,
        *,
        skill_source: SkillSource | None = None,
    ):
        self.settings = settings
        self.memory = memory
        self.hooks = hooks
        # The skills seam: the skill hub's source when it exists (ultron/companion/skills.py); without one a
        # brief has no skill section (and says so with skills_available=false).
        self.skill_source = skill_source

    def tenant_settings(self, session: Session, tenant_id: UUID) -> Settings:
        """The settings that apply to this tenant now: the configuration and an admin's changes."""
        return self.hooks.tenant_settings(session, tenant_id)

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
        params = actor.visibility()
        pinned = session.execute(q("brief_pinned"), {**params, "limit": BRIEF_PINNED_LIMIT}).all()
        found: dict[UUID, SearchResult] = {}
        relevant: list[BriefItem] = []
        if task is not None:
            # what the task asks about, ranked as a search ranks it (its words count, not only its vector)
            hits = self.memory.search(session, actor, task, limit=BRIEF_TASK_RESULTS, quiet=True)
            found = {r.record.id: r for r in hits}
            relevant = relevant_items(hits, load_records(session, [r.record.id for r in hits], actor))
        personal: Sequence[Any] = []
        if st.brief_personal_limit > 0 and task is None:  # with a task, only the personal items it finds
            personal = session.execute(
                q("brief_personal_used"),
                {
                    **params,
                    "types": list(BRIEF_PERSONAL_TYPES),
                    "limit": st.brief_personal_limit,
                },
            ).all()
        hot = session.execute(
            q("brief_hot"), {**params, "embedding": vector, "limit": st.brief_hot_limit}
        ).all()
        if task is not None:  # a HOT personal item unrelated to the task stays out of its brief
            confident = {i for i, r in found.items() if r.confidence == "high"}
            hot = [row for row in hot if row.memory_type not in BRIEF_PERSONAL_TYPES or row.id in confident]
        candidates = [self._memory_item(row, "pinned", task, found) for row in pinned]
        candidates += relevant
        candidates += [self._memory_item(row, "personal", task, found) for row in personal]
        candidates += [self._memory_item(row, "hot", task, found) for row in hot]
        candidates = once_each(candidates)
        skills: list[BriefItem] = []
        if self.skill_source is not None:
            skills = self.skill_source(session, actor, task, vector)
            candidates += skills
        brief = self._fit(task, budget, candidates, skills_available=self.skill_source is not None)
        return brief.model_copy(update={"suggestions": self.pin_suggestions(session, actor)})

    def _memory_item(
        self, row: Any, section: str, task: str | None, found: dict[UUID, SearchResult]
    ) -> BriefItem:
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
            # with a task: what its search made of the memory (not among its top matches: low)
            confidence=None if task is None else (found[row.id].confidence if row.id in found else "low"),
            relevance=found[row.id].similarity_score if row.id in found else None,
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
                **actor.visibility(),
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
        ids = list(session.execute(q("dream_candidates"), {**actor.visibility(), "limit": limit}).scalars())
        records = load_records(session, ids, actor)
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
        visible = load_records(session, sources, actor)
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
        result = self.hooks.after_upload(
            session, actor, upload, self.memory._create(session, actor, prepared)
        )
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

    def resolve(self, session: Session, actor: Actor, memory_id: UUID, resolved: bool) -> MemoryRecord:
        """Resolve (or reopen) a memory: resolved ones sink in search and leave the brief's HOT and
        personal sections. Contributor or admin, like any edit."""
        memory = self.memory._owned(session, actor, memory_id)
        memory.resolved_at = (memory.resolved_at or datetime.now(UTC)) if resolved else None
        memory.updated_at = datetime.now(UTC)
        session.flush()
        return self.memory.get(session, actor, memory_id)
