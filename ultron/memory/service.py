"""The memory service: upload with dedup/merge, hybrid search, details, hits, edit, delete, stats.

Services take the session as their first argument and never commit: the request scope or the worker
job owns the transaction.
"""

from __future__ import annotations

import hashlib
import logging
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from uuid import UUID

import numpy as np
from sqlalchemy import BigInteger, cast, delete, func, select, text, true
from sqlalchemy.orm import Session

from ultron.config import Settings
from ultron.db.models import ActivityEvent, Agent, Memory, MemoryContribution
from ultron.db.queries import q
from ultron.errors import Forbidden, NotFound, ValidationFailed
from ultron.memory import fulltext
from ultron.memory.hits import HitBuffer, SearchUse
from ultron.memory.schemas import (
    Contribution,
    MemoryPatch,
    MemoryRecord,
    MemoryStats,
    ScoreComponents,
    SearchResult,
    UploadRequest,
    UploadResult,
)
from ultron.memory.text import MEMORY_TYPES, embedding_text
from ultron.ops.metrics import counts_search, counts_upload
from ultron.providers.base import Embedder
from ultron.tenancy import Actor

log = logging.getLogger(__name__)

# Advisory-lock namespace for the dedup critical section (first key of pg_advisory_xact_lock(int, int)).
DEDUP_LOCK_NAMESPACE = 0x554C0001
# How many neighbours the dedup lookup considers.
DEDUP_NEIGHBOURS = 3
HIT_WEIGHTS = {"search": 1, "details": 2, "merge": 1}
TEXT_FIELDS = ("content", "context", "resolution")


class Intelligence(Protocol):
    def infer_type(self, content: str, context: str, resolution: str) -> str: ...
    def summarize(self, content: str, context: str, resolution: str) -> tuple[str, str]: ...
    def judge_same(self, a: dict[str, str], b: dict[str, str]) -> bool: ...
    def merge(self, existing: dict[str, str], incoming: dict[str, str]) -> dict[str, str] | None: ...


class CompanionHooks(Protocol):
    """Companion memory (ultron/companion/): emotion on upload, ripples on use, re-ranking of searches."""

    def after_upload(
        self, session: Session, actor: Actor, req: UploadRequest, result: UploadResult
    ) -> UploadResult: ...
    def after_details(self, session: Session, actor: Actor, ids: list[UUID]) -> None: ...
    def after_search(
        self, session: Session, actor: Actor, results: list[SearchResult], **signals: Any
    ) -> list[SearchResult]: ...


class ClusterHooks(Protocol):
    """Knowledge clusters (ultron/clusters/): a new memory joins one, a merged-away one leaves it."""

    def assign(self, session: Session, tenant_id: UUID, memory_id: UUID, vector: Any) -> UUID: ...
    def leave(self, session: Session, tenant_id: UUID, memory_id: UUID) -> UUID | None: ...


class Redactor(Protocol):
    def redact(self, text: str, policy: Any = None) -> Any: ...

    def redact_fields(
        self, fields: dict[str, str | None], policy: Any = None
    ) -> tuple[dict[str, str | None], dict[str, int]]: ...


@dataclass
class _Prepared:
    fields: dict[str, str]
    tags: list[str]
    redacted: dict[str, int]
    memory_type: str
    embedding: np.ndarray
    summary_l0: str
    overview_l1: str
    content_hash: str
    scope: str
    group: str | None


def content_hash(content: str, context: str, resolution: str) -> str:
    normalized = "\x1f".join(" ".join(f.split()).lower() for f in (content, context, resolution))
    return hashlib.sha256(normalized.encode()).hexdigest()


def _lock_key(actor: Actor, memory_type: str, scope: str, owner: str) -> int:
    key = zlib.crc32(f"{actor.tenant_id}:{memory_type}:{scope}:{owner}".encode())
    return key - (1 << 32) if key >= 1 << 31 else key


def _add_counts(total: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    out = dict(total)
    for key, value in more.items():
        out[key] = out.get(key, 0) + value
    return out


class MemoryService:
    def __init__(
        self,
        settings: Settings,
        embedder: Embedder,
        intelligence: Intelligence,
        redactor: Redactor | None = None,
        hits: HitBuffer | None = None,
    ):
        self.settings = settings
        # Search hits go through this buffer when given; without one they are written in the transaction.
        self.hits = hits
        self.embedder = embedder
        self.intelligence = intelligence
        self.redactor = redactor
        # What each scope redacts: the settings' policy, or a tenant's own merged over it (loaded per upload).
        self.redaction_policy = settings.redaction_policy()
        self._tenant_policies: dict[UUID, Any] = {}
        self.hard_threshold, self.soft_threshold = settings.dedup_thresholds
        self.common_terms = fulltext.CommonTerms(settings.fulltext_pool)
        # Set by the hub once the companion service exists.
        self.companion: CompanionHooks | None = None
        # Set by the hub: knowledge clusters (ultron/clusters/) joined in the upload's transaction.
        self.clusters: ClusterHooks | None = None

    # --- helpers -------------------------------------------------------------------------------

    def load_tenant_policy(self, session: Session, tenant_id: UUID) -> None:
        """Read the tenant's redaction policy (`tenants.settings -> 'redaction'`) over the global one."""
        from ultron.db.models import Tenant
        from ultron.privacy.policy import RedactionPolicy

        raw = session.execute(select(Tenant.settings["redaction"]).where(Tenant.id == tenant_id)).scalar()
        try:
            own = None if raw is None else self.redaction_policy.merged(RedactionPolicy.from_mapping(raw))
        except ValueError as exc:
            raise ValidationFailed(f"this tenant's redaction policy is invalid: {exc}") from None
        self._tenant_policies[tenant_id] = own or self.redaction_policy

    def scope_policy(self, tenant_id: UUID, scope: str) -> Any:
        """What a memory of `scope` in this tenant has redacted (private ones keep names by default)."""
        return self._tenant_policies.get(tenant_id, self.redaction_policy).for_scope(scope)

    def _redact(
        self, fields: dict[str, str], tags: list[str], policy: Any = None
    ) -> tuple[dict[str, str], list[str], dict[str, int]]:
        if self.redactor is None:
            return fields, tags, {}
        tag_fields = {f"tag{i}": t for i, t in enumerate(tags)}
        clean, counts = self.redactor.redact_fields({**fields, **tag_fields}, policy)
        out = {k: clean[k] or "" for k in fields}
        clean_tags = [clean[k] or "" for k in tag_fields]
        return out, [t for t in clean_tags if t], counts

    def _check_sizes(self, fields: dict[str, str]) -> None:
        limit = self.settings.max_field_chars
        for name, value in fields.items():
            if len(value) > limit:
                raise ValidationFailed(f"{name} is {len(value)} characters; the limit is {limit}")

    def _embed_one(self, fields: dict[str, str]) -> np.ndarray:
        vector = self.embedder.embed([embedding_text(**fields)], kind="document")[0]
        return np.asarray(vector, dtype=np.float32)

    def _prepare(self, req: UploadRequest, actor: Actor) -> _Prepared:
        fields = {"content": req.content, "context": req.context, "resolution": req.resolution}
        self._check_sizes(fields)
        # Refuse bad input before any model call.
        if req.scope == "group" and not req.group:
            raise ValidationFailed("scope 'group' needs a group name")
        if req.scope == "group" and req.group not in actor.groups:
            raise ValidationFailed(f"agent {actor.agent_name!r} is not in group {req.group!r}")
        fields, tags, redacted = self._redact(fields, req.tags, self.scope_policy(actor.tenant_id, req.scope))
        if not fields["content"].strip():
            raise ValidationFailed("content is empty after redaction")
        memory_type = self.intelligence.infer_type(**fields)
        if memory_type not in MEMORY_TYPES:
            memory_type = "pattern"
        l0, l1 = self.intelligence.summarize(**fields)
        return _Prepared(
            fields=fields,
            tags=tags[: self.settings.max_tags],
            redacted=redacted,
            memory_type=memory_type,
            embedding=self._embed_one(fields),
            summary_l0=l0,
            overview_l1=l1,
            content_hash=content_hash(**fields),
            scope=req.scope,
            group=req.group if req.scope == "group" else None,
        )

    def _nearest(self, session: Session, actor: Actor, p: _Prepared) -> list[tuple[UUID, float]]:
        rows = session.execute(
            q("nearest_same_type"),
            {
                "tenant_id": actor.tenant_id,
                "content_hash": p.content_hash,
                "memory_type": p.memory_type,
                "scope": p.scope,
                "agent_id": actor.agent_id,
                "group_name": p.group,
                "embedding": p.embedding,
                "k": DEDUP_NEIGHBOURS,
            },
        ).all()
        return [(row.id, float(row.similarity)) for row in rows]

    def _fields_of(self, session: Session, memory_id: UUID) -> dict[str, str]:
        m = session.get(Memory, memory_id)
        assert m is not None
        return {"content": m.content, "context": m.context, "resolution": m.resolution}

    def _judge(self, session: Session, p: _Prepared, memory_id: UUID) -> bool:
        return bool(self.intelligence.judge_same(self._fields_of(session, memory_id), p.fields))

    # --- upload --------------------------------------------------------------------------------

    @counts_upload
    def upload(self, session: Session, actor: Actor, req: UploadRequest) -> UploadResult:
        """Redact, type, embed and summarize; then merge into a near duplicate or insert a new memory."""
        self.load_tenant_policy(session, actor.tenant_id)
        result = self._upload(session, actor, req)
        return result if self.companion is None else self.companion.after_upload(session, actor, req, result)

    def _upload(self, session: Session, actor: Actor, req: UploadRequest) -> UploadResult:
        p = self._prepare(req, actor)
        judged: dict[UUID, bool] = {}
        if getattr(self.intelligence, "llm_available", False):
            # A chat model judges the soft band: ask it before taking the lock, so the lock is never held
            # across a network call; the neighbours are re-checked under the lock below. The offline judge
            # is a local heuristic, so offline the one probe under the lock is all an upload needs.
            for memory_id, sim in self._nearest(session, actor, p)[:1]:
                if self.soft_threshold <= sim < self.hard_threshold:
                    judged[memory_id] = self._judge(session, p, memory_id)
        owner = str(actor.agent_id) if p.scope == "private" else (p.group or "")
        session.execute(
            text("SELECT pg_advisory_xact_lock(:ns, :key)"),
            {"ns": DEDUP_LOCK_NAMESPACE, "key": _lock_key(actor, p.memory_type, p.scope, owner)},
        )
        nearest = self._nearest(session, actor, p)
        if nearest:
            memory_id, sim = nearest[0]
            if sim >= self.hard_threshold:
                return self._merge(session, actor, p, memory_id, sim, "merged")
            if sim >= self.soft_threshold:
                same = judged[memory_id] if memory_id in judged else self._judge(session, p, memory_id)
                if same:
                    return self._merge(session, actor, p, memory_id, sim, "merged_judge")
        return self._create(session, actor, p)

    def _create(self, session: Session, actor: Actor, p: _Prepared) -> UploadResult:
        memory = Memory(
            tenant_id=actor.tenant_id,
            agent_id=actor.agent_id,
            memory_type=p.memory_type,
            **p.fields,
            tags=p.tags,
            summary_l0=p.summary_l0,
            overview_l1=p.overview_l1,
            embedding=p.embedding,
            content_hash=p.content_hash,
            search_tsv=func.to_tsvector("simple", fulltext.index_text(*p.fields.values(), *p.tags)),
            scope=p.scope,
            group_name=p.group,
            redacted_entities=p.redacted,
        )
        session.add(memory)
        session.flush()
        # Skills are read by the whole tenant: only shared memories feed clusters (and so skills).
        if self.clusters is not None and p.scope == "shared":
            self.clusters.assign(session, actor.tenant_id, memory.id, p.embedding)
        self._log_contribution(session, actor, memory.id, p, "created", None)
        self._activity(session, actor, "upload", memory.id, {"memory_type": p.memory_type})
        return UploadResult(record=self.get(session, actor, memory.id), decision="created")

    def _merge(
        self, session: Session, actor: Actor, p: _Prepared, memory_id: UUID, sim: float, decision: str
    ) -> UploadResult:
        memory = session.get(Memory, memory_id, with_for_update=True)
        assert memory is not None
        self._log_contribution(session, actor, memory_id, p, decision, sim)
        self.record_hits(session, actor, [memory_id], "merge")
        existing = {"content": memory.content, "context": memory.context, "resolution": memory.resolution}
        merged = self.intelligence.merge(existing, p.fields)
        text_changed = False
        if merged is not None:
            merged = {k: (merged.get(k) or existing[k]) for k in TEXT_FIELDS}
            self._check_sizes(merged)
            merged, _, more = self._redact(merged, [], self.scope_policy(actor.tenant_id, memory.scope))
            text_changed = merged != existing
            if text_changed:
                self._apply_text(memory, merged)
                memory.redacted_entities = _add_counts(memory.redacted_entities, more)
        tags = list(dict.fromkeys([*memory.tags, *p.tags]))[: self.settings.max_tags]
        if tags != memory.tags:
            memory.tags = tags
            memory.search_tsv = func.to_tsvector(
                "simple", fulltext.index_text(memory.content, memory.context, memory.resolution, *tags)
            )
        memory.redacted_entities = _add_counts(memory.redacted_entities, p.redacted)
        memory.updated_at = datetime.now(UTC)
        session.flush()
        self._activity(
            session, actor, "merge", memory_id, {"similarity": round(sim, 4), "decision": decision}
        )
        return UploadResult(
            record=self.get(session, actor, memory_id),
            decision=decision,  # type: ignore[arg-type]
            similarity=sim,
            merged_text=text_changed,
        )

    def absorb(self, session: Session, actor: Actor, winner_id: UUID, loser_id: UUID, sim: float) -> bool:
        """Consolidation: merge the loser into the winner as an upload would, then archive it with a link.

        Returns False (and changes nothing) when either is no longer active or the loser is pinned.
        """
        loser = session.get(Memory, loser_id, with_for_update=True, populate_existing=True)
        winner = session.get(Memory, winner_id, with_for_update=True, populate_existing=True)
        if loser is None or winner is None or loser.pinned or "archived" in (loser.status, winner.status):
            return False
        owner = str(loser.agent_id) if loser.scope == "private" else (loser.group_name or "")
        session.execute(
            text("SELECT pg_advisory_xact_lock(:ns, :key)"),
            {"ns": DEDUP_LOCK_NAMESPACE, "key": _lock_key(actor, loser.memory_type, loser.scope, owner)},
        )
        fields = {"content": loser.content, "context": loser.context, "resolution": loser.resolution}
        prepared = _Prepared(
            fields=fields,
            tags=list(loser.tags),
            redacted={},  # already counted on the loser, which is kept
            memory_type=loser.memory_type,
            embedding=loser.embedding,
            summary_l0=loser.summary_l0,
            overview_l1=loser.overview_l1,
            content_hash=loser.content_hash,
            scope=loser.scope,
            group=loser.group_name,
        )
        self._merge(session, actor, prepared, winner_id, sim, "merged")
        loser.status, loser.archived_reason = "archived", "consolidated"
        loser.merged_into_id, loser.archived_at = winner_id, datetime.now(UTC)
        session.flush()
        session.execute(
            q("move_memory_sources"),
            {"tenant_id": actor.tenant_id, "winner_id": winner_id, "loser_id": loser_id},
        )
        if self.clusters is not None:
            self.clusters.leave(session, actor.tenant_id, loser_id)
        self._activity(session, actor, "consolidate", loser_id, {"into": str(winner_id), "similarity": sim})
        return True

    def _apply_text(self, memory: Memory, fields: dict[str, str]) -> None:
        """New text: re-embed, re-summarize, re-index."""
        memory.content, memory.context, memory.resolution = (fields[k] for k in TEXT_FIELDS)
        memory.embedding = self._embed_one(fields)
        memory.summary_l0, memory.overview_l1 = self.intelligence.summarize(**fields)
        memory.content_hash = content_hash(**fields)
        memory.search_tsv = func.to_tsvector("simple", fulltext.index_text(*fields.values(), *memory.tags))

    def _log_contribution(
        self, session: Session, actor: Actor, memory_id: UUID, p: _Prepared, decision: str, sim: float | None
    ) -> None:
        session.add(
            MemoryContribution(
                tenant_id=actor.tenant_id,
                memory_id=memory_id,
                agent_id=actor.agent_id,
                decision=decision,
                similarity=sim,
                tags=p.tags,
                **p.fields,
            )
        )

    def _activity(
        self, session: Session, actor: Actor, kind: str, memory_id: UUID | None, detail: dict[str, Any]
    ) -> None:
        session.add(
            ActivityEvent(
                tenant_id=actor.tenant_id,
                agent_id=actor.agent_id,
                kind=kind,
                memory_id=memory_id,
                detail=detail,
            )
        )

    # --- hits ----------------------------------------------------------------------------------

    def record_hits(
        self, session: Session, actor: Actor, memory_ids: Iterable[UUID], signal: str
    ) -> set[UUID]:
        """Log a use of each memory; returns the ids whose hit_count actually rose (see docs/ranking.md)."""
        ids = list(memory_ids)
        if not ids:
            return set()
        rows = session.execute(
            q("record_hits"),
            {
                "tenant_id": actor.tenant_id,
                "agent_id": actor.agent_id,
                "memory_ids": ids,
                "signal": signal,
                "weight": HIT_WEIGHTS[signal],
                "window_seconds": self.settings.hit_window_hours * 3600.0,
            },
        ).all()
        return {row.id for row in rows}

    # --- search --------------------------------------------------------------------------------

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
    ) -> list[SearchResult]:
        """Hybrid search; valence/arousal (resonance) and serendipity are optional companion signals."""
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
        st = self.settings
        rows = session.execute(
            q("search_memories"),
            {
                "tenant_id": actor.tenant_id,
                "agent_id": actor.agent_id,
                "groups": list(actor.groups),
                "tier": tier,
                "embedding": vector,
                "tsquery": fulltext.query_text(query, self.common_terms.get(session)),
                "candidates": max(st.search_candidates, limit),
                "fts_pool": st.fulltext_pool,
                "ft_weight": st.fulltext_weight,
                "boost_hot": st.tier_boost_hot,
                "boost_warm": st.tier_boost_warm,
                "boost_cold": st.tier_boost_cold,
                "alpha": st.decay_alpha,
                "decay_weight": st.time_decay_weight,
                "limit": limit,
                "window_seconds": st.hit_window_hours * 3600.0,
            },
        ).all()
        results = [self._search_result(row, detail_level, explain) for row in rows]
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
                serendipity=serendipity,
                query=query,
            )
        return results

    def _search_result(self, row: Any, detail_level: str, explain: bool) -> SearchResult:
        record = MemoryRecord(
            id=row.id,
            memory_type=row.memory_type,
            content=row.content,
            context=row.context,
            resolution=row.resolution,
            tags=list(row.tags),
            summary_l0=row.summary_l0,
            overview_l1=row.overview_l1,
            tier=row.tier,
            status=row.status,
            scope=row.scope,
            group=row.group_name,
            pinned=row.pinned,
            hit_count=row.hit_count,
            last_hit_at=row.last_hit_at,
            created_at=row.created_at,
            updated_at=row.updated_at,
            agent=row.agent_name,
            redacted_entities=dict(row.redacted_entities or {}),
            contributions=int(row.contributions),
            valence=row.valence,
            arousal=row.arousal,
        )
        components = None
        if explain:
            components = ScoreComponents(
                vector_similarity=float(row.vector_similarity),
                text_rank=float(row.text_rank),
                relevance=float(row.relevance),
                tier_boost=float(row.tier_boost),
                hotness=float(row.hotness),
                days_since_hit=float(row.days_since_hit),
                decay_weight=self.settings.time_decay_weight,
                from_vector=bool(row.from_vector),
                from_text=bool(row.from_text),
                score=float(row.score),
            )
        return SearchResult(
            record=project(record, detail_level),
            similarity_score=float(row.relevance),
            score=float(row.score),
            explain=components,
        )

    # --- reads ---------------------------------------------------------------------------------

    def _visible(self, actor: Actor):  # type: ignore[no-untyped-def]
        return (
            (Memory.scope == "shared")
            | ((Memory.scope == "private") & (Memory.agent_id == actor.agent_id))
            | ((Memory.scope == "group") & Memory.group_name.in_(list(actor.groups) or [""]))
        )

    def _records(self, session: Session, ids: list[UUID], actor: Actor) -> dict[UUID, MemoryRecord]:
        if not ids:
            return {}
        contributions = (
            select(func.count())
            .where(MemoryContribution.memory_id == Memory.id)
            .correlate(Memory)
            .scalar_subquery()
        )
        stmt = (
            select(Memory, Agent.name, contributions)
            .outerjoin(Agent, Agent.id == Memory.agent_id)
            .where(Memory.id.in_(ids))
            .where(Memory.tenant_id == actor.tenant_id, self._visible(actor))
            .execution_options(populate_existing=True)
        )
        return {m.id: to_record(m, agent, n) for m, agent, n in session.execute(stmt)}

    def get(self, session: Session, actor: Actor, memory_id: UUID) -> MemoryRecord:
        """One memory, full text, without counting a hit (browsing is not adoption)."""
        found = self._records(session, [memory_id], actor)
        if memory_id not in found:
            raise NotFound(f"memory {memory_id} not found")
        return found[memory_id]

    def details(self, session: Session, actor: Actor, ids: Sequence[UUID]) -> list[MemoryRecord]:
        """Full records; each counts as a strong adoption signal (+2)."""
        if not ids:
            raise ValidationFailed("ids must not be empty")
        if len(ids) > 100:
            raise ValidationFailed("at most 100 ids per call")
        ids = list(dict.fromkeys(ids))
        found = self._records(session, ids, actor)
        missing = [str(i) for i in ids if i not in found]
        if missing:
            raise NotFound(f"memories not found: {', '.join(missing)}")
        self.record_hits(session, actor, ids, "details")
        if self.companion is not None:
            self.companion.after_details(session, actor, ids)
        fresh = self._records(session, ids, actor)
        return [fresh[i] for i in ids]

    def contributions(self, session: Session, actor: Actor, memory_id: UUID) -> list[Contribution]:
        self.get(session, actor, memory_id)
        stmt = (
            select(MemoryContribution, Agent.name)
            .outerjoin(Agent, Agent.id == MemoryContribution.agent_id)
            .where(MemoryContribution.memory_id == memory_id, MemoryContribution.tenant_id == actor.tenant_id)
            .order_by(MemoryContribution.created_at, MemoryContribution.id)
        )
        return [
            Contribution(
                agent=name,
                decision=c.decision,
                similarity=c.similarity,
                content=c.content,
                context=c.context,
                resolution=c.resolution,
                tags=c.tags,
                created_at=c.created_at,
            )
            for c, name in session.execute(stmt)
        ]

    # --- edit / delete -------------------------------------------------------------------------

    def _owned(self, session: Session, actor: Actor, memory_id: UUID) -> Memory:
        """The memory, locked for change, if this agent may change it (its contributor or an admin)."""
        self.get(session, actor, memory_id)
        memory = session.get(Memory, memory_id, with_for_update=True)
        assert memory is not None
        if not actor.is_admin and memory.agent_id != actor.agent_id:
            raise Forbidden(
                f"agent {actor.agent_name!r} did not contribute memory {memory_id}; only its "
                "contributor or an admin agent may change it"
            )
        return memory

    def edit(self, session: Session, actor: Actor, memory_id: UUID, patch: MemoryPatch) -> MemoryRecord:
        memory = self._owned(session, actor, memory_id)
        changes = patch.model_dump(exclude_unset=True)
        current = {"content": memory.content, "context": memory.context, "resolution": memory.resolution}
        new_text = {k: changes[k] for k in TEXT_FIELDS if changes.get(k) is not None}
        if new_text or "tags" in changes:
            merged = {**current, **new_text}
            self._check_sizes(merged)
            self.load_tenant_policy(session, actor.tenant_id)
            policy = self.scope_policy(actor.tenant_id, memory.scope)
            merged, tags, counts = self._redact(merged, changes.get("tags") or memory.tags, policy)
            memory.tags = tags[: self.settings.max_tags]
            memory.redacted_entities = _add_counts(memory.redacted_entities, counts)
            if merged != current:
                memory.memory_type = self.intelligence.infer_type(**merged)
                self._apply_text(memory, merged)
            else:
                memory.search_tsv = func.to_tsvector(
                    "simple", fulltext.index_text(*merged.values(), *memory.tags)
                )
        for name in ("tier", "pinned", "valence", "arousal", "importance"):
            if changes.get(name) is not None:
                setattr(memory, name, changes[name])
        if changes.get("status") is not None and changes["status"] != memory.status:
            memory.status = changes["status"]
            memory.archived_at = datetime.now(UTC) if memory.status == "archived" else None
            memory.archived_reason = "edited" if memory.status == "archived" else None
        memory.updated_at = datetime.now(UTC)
        session.flush()
        self._activity(session, actor, "edit", memory_id, {"fields": sorted(changes)})
        return self.get(session, actor, memory_id)

    def delete(self, session: Session, actor: Actor, memory_id: UUID) -> None:
        """Forget a memory for good: its contributions and hit log go with it."""
        self._owned(session, actor, memory_id)
        session.execute(delete(Memory).where(Memory.id == memory_id, Memory.tenant_id == actor.tenant_id))
        self._activity(session, actor, "delete", memory_id, {})

    # --- stats ---------------------------------------------------------------------------------

    def stats(self, session: Session, actor: Actor) -> MemoryStats:
        def grouped(column) -> dict[str, int]:  # type: ignore[no-untyped-def]
            stmt = (
                select(column, func.count())
                .where(Memory.tenant_id == actor.tenant_id, self._visible(actor))
                .group_by(column)
            )
            return {str(k): int(v) for k, v in session.execute(stmt)}

        by_status = grouped(Memory.status)
        # Entity counts and contributions of the memories this agent may see: another agent's private
        # memories are not counted (how many secrets its diary held is about that diary).
        entities = func.jsonb_each_text(Memory.redacted_entities).table_valued("key", "value").alias("e")
        entity_stmt = (
            select(entities.c.key, func.sum(cast(entities.c.value, BigInteger)))
            .select_from(Memory)
            .join(entities, true())
            .where(Memory.tenant_id == actor.tenant_id, self._visible(actor))
            .group_by(entities.c.key)
        )
        redacted = {str(key): int(total) for key, total in session.execute(entity_stmt)}
        contributions = session.execute(
            select(func.count())
            .select_from(MemoryContribution)
            .join(Memory, Memory.id == MemoryContribution.memory_id)
            .where(
                MemoryContribution.tenant_id == actor.tenant_id,
                Memory.tenant_id == actor.tenant_id,
                self._visible(actor),
            )
        ).scalar_one()
        profile = session.execute(text("SELECT model_name FROM embedding_profile WHERE id = 1")).scalar()
        return MemoryStats(
            total=sum(by_status.values()),
            by_tier=grouped(Memory.tier),
            by_type=grouped(Memory.memory_type),
            by_status=by_status,
            by_scope=grouped(Memory.scope),
            redacted_entities=redacted,
            contributions=int(contributions),
            embedding_model=profile,
        )


def to_record(m: Memory, agent: str | None, contributions: int) -> MemoryRecord:
    return MemoryRecord(
        id=m.id,
        memory_type=m.memory_type,  # type: ignore[arg-type]
        content=m.content,
        context=m.context,
        resolution=m.resolution,
        tags=list(m.tags),
        summary_l0=m.summary_l0,
        overview_l1=m.overview_l1,
        tier=m.tier,  # type: ignore[arg-type]
        status=m.status,  # type: ignore[arg-type]
        scope=m.scope,  # type: ignore[arg-type]
        group=m.group_name,
        pinned=m.pinned,
        hit_count=m.hit_count,
        last_hit_at=m.last_hit_at,
        created_at=m.created_at,
        updated_at=m.updated_at,
        agent=agent,
        redacted_entities=dict(m.redacted_entities or {}),
        contributions=int(contributions),
        valence=m.valence,
        arousal=m.arousal,
        importance=m.importance,
        resolved_at=m.resolved_at,
    )


def project(record: MemoryRecord, detail_level: str) -> MemoryRecord:
    """Search projections: l0 keeps only the one-line summary; l1 adds the overview and context."""
    if detail_level == "l0":
        return record.model_copy(update={"content": "", "context": "", "resolution": "", "overview_l1": ""})
    return record.model_copy(update={"content": "", "resolution": ""})
