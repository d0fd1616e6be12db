"""The memory service: upload with dedup/merge, details, hits, edit, delete, stats; hybrid search is its
SearchMixin (ultron/memory/search.py), records and projections ultron/memory/records.py.

Services take the session as their first argument and never commit: the request scope or the worker
job owns the transaction.
"""

from __future__ import annotations

import hashlib
import logging
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any, Protocol
from uuid import UUID, uuid4

import numpy as np
from psycopg import RawCursor
from psycopg.rows import namedtuple_row
from psycopg.types.json import Jsonb
from sqlalchemy import (
    TextClause,
    bindparam,
    delete,
    select,
    text,
)
from sqlalchemy.orm import Session

from ultron.config import Settings
from ultron.db.models import ActivityEvent, ClusterQueueItem, Memory, MemoryContribution
from ultron.db.pipeline import transaction_pipeline
from ultron.db.plans import PROBE_DEFAULT, PROBE_WALK, WalkCache
from ultron.db.queries import q
from ultron.errors import Conflict, Forbidden, NotFound, UltronError, ValidationFailed
from ultron.memory import document, fulltext, indexing, ownership, supersede
from ultron.memory.access import AccessMixin
from ultron.memory.faithful import disagreements, may_merge_automatically, may_merge_judged
from ultron.memory.heuristic import conflicts
from ultron.memory.hits import HitBuffer
from ultron.memory.records import to_record
from ultron.memory.schemas import (
    MemoryPatch,
    MemoryRecord,
    SearchResult,
    SplitResult,
    UploadRequest,
    UploadResult,
)
from ultron.memory.search import SearchMixin, _driver_sql, _raw_sql
from ultron.memory.termstats import TermStatsKeeper
from ultron.memory.text import MEMORY_TYPES, embedded_fields, embedding_text
from ultron.observability.metrics import counts_upload, record_upload
from ultron.providers.base import Embedder
from ultron.settings_store import RuntimeSettings
from ultron.tenancy import Actor

log = logging.getLogger(__name__)

# Advisory-lock namespace for the dedup critical section (first key of pg_advisory_xact_lock(int, int)).
DEDUP_LOCK_NAMESPACE = 0x554C0001
# How many neighbours the dedup lookup considers.
DEDUP_NEIGHBOURS = 3
# The savepoint a single upload sets after its dedup lock and before probe_or_create_memory, which may write
# the new memory beside one in the soft band; rolled back to when the judge then merges (_undo_speculative).
_SPECULATIVE = "SAVEPOINT ultron_upload_create"
_UNDO_SPECULATIVE = "ROLLBACK TO SAVEPOINT ultron_upload_create"
# A batch item this close below SOFT still takes the single upload's exact path (float32 rounding).
SIM_MARGIN = 1e-4
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
    def after_create_many(
        self, session: Session, actor: Actor, created: list[tuple[Any, UploadResult]]
    ) -> list[UploadResult]: ...
    def after_details(self, session: Session, actor: Actor, ids: list[UUID]) -> None: ...
    def after_search(
        self, session: Session, actor: Actor, results: list[SearchResult], **signals: Any
    ) -> list[SearchResult]: ...


class ClusterHooks(Protocol):
    """Knowledge clusters (ultron/clusters/): a merged-away memory leaves its cluster at once; a new one
    joins one in the worker (its cluster_queue row, written with it)."""

    def leave(self, session: Session, tenant_id: UUID, memory_id: UUID) -> UUID | None: ...


class Redactor(Protocol):
    def redact(self, text: str, policy: Any = None) -> Any: ...

    def redact_fields(
        self, fields: dict[str, str | None], policy: Any = None
    ) -> tuple[dict[str, str | None], dict[str, int]]: ...


# A tenant whose redaction policy this process has not read yet.
_NOT_READ = object()
_TENANT_POLICY = text("SELECT settings -> 'redaction' FROM tenants WHERE id = :tenant_id")


@dataclass
class _Prepared:
    fields: dict[str, str]
    tags: list[str]
    redacted: dict[str, int]
    memory_type: str
    embedding: Any  # np.ndarray; None until a batch embeds it
    summary_l0: str
    overview_l1: str
    content_hash: str
    scope: str
    group: str | None
    thread: str | None = None
    position: int | None = None
    occurred_at: datetime | None = None
    # The tenant's stored redaction policy it was redacted under, as read (_NOT_READ: none was read).
    policy_seen: Any = _NOT_READ


class _NewMemories:
    """A batch's new memories of one dedup key so far: their ids, texts, content hashes and unit vectors,
    which a later item of the batch is compared with by exact cosine (the matrix grows in place)."""

    def __init__(self) -> None:
        self.hashes: set[str] = set()
        self.vectors: np.ndarray | None = None
        self.n = 0
        self.ids: list[UUID] = []
        self.fields: list[dict[str, str]] = []

    def add(self, memory_id: UUID, p: _Prepared) -> None:
        self.ids.append(memory_id)
        self.fields.append(p.fields)
        v = _unit(p.embedding)
        if self.vectors is None or self.n == len(self.vectors):
            grown = np.empty((max(16, 2 * self.n), v.shape[0]), dtype=np.float32)
            if self.vectors is not None:
                grown[: self.n] = self.vectors
            self.vectors = grown
        self.vectors[self.n] = v
        self.n += 1
        self.hashes.add(p.content_hash)

    def top(self, embedding: Any) -> float:
        """The highest cosine between `embedding` and these memories."""
        assert self.vectors is not None  # one memory at least: made by add()
        return float((self.vectors[: self.n] @ _unit(embedding)).max())

    def nearest(self, embedding: Any) -> tuple[int, float, float]:
        """The closest of these memories to `embedding`: its place, its cosine, and the next one's
        cosine (-1 when there is none)."""
        assert self.vectors is not None  # one memory at least: made by add()
        cos = self.vectors[: self.n] @ _unit(embedding)
        best = int(np.argmax(cos))
        second = float(np.partition(cos, -2)[-2]) if self.n > 1 else -1.0
        return best, float(cos[best]), second


def _unit(vector: Any) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(v))
    return v / norm if norm else v


_DEDUP_LOCK = "SELECT pg_advisory_xact_lock(%s, %s)"
# The dedup probe's own walk: the same rule, its settings (db/plans.py PROBE_WALK: sorts off, its generic
# plan) sent with it, its text marked as the search's is (the connection's `hnsw.ef_search` kept).
_PROBE_WALK_MARK = "-- planned with sorts off: the dedup probe walks the HNSW index"
# The line of probe_or_create_memory that nearest_same_type's CTEs replace (sql/memory.sql).
_NEAREST_CTES = "-- nearest_same_type's CTEs"
_WITH = re.compile(r"^WITH\s+", re.MULTILINE)


@cache
def _probe_or_create_sql(walk: bool) -> TextClause:
    """probe_or_create_memory as a single upload sends it, its probe nearest_same_type's own CTEs (exact,
    ann, top: one text for the single upload's probe and the batch's); `walk` as in `_nearest_sql`."""
    nearest = q("nearest_same_type").text
    head = _WITH.search(nearest)
    assert head is not None, "nearest_same_type lost its WITH"
    ctes = nearest[head.end() : nearest.rindex("\nSELECT ")]  # up to its final SELECT
    statement = q("probe_or_create_memory").text
    assert statement.count(_NEAREST_CTES) == 1, "probe_or_create_memory lost its marker line"
    sql = statement.replace(_NEAREST_CTES, f"{ctes.strip()},")
    return text(f"{_PROBE_WALK_MARK}\n{sql}" if walk else sql)


@cache
def _nearest_sql(walk: bool) -> TextClause:
    """nearest_same_type as a single upload and a batch send it; `walk`: its text marked, planned with sorts
    off (its plan is cached under that text). In a store of ~1-3k memories the generic plan sorts the
    tenant's rows by distance, each vector read back out of TOAST (7.2 ms a probe at 1k against 1.5 ms
    walking the index), and a planner working from statistics older than a bulk load does it at any size
    (12-15 ms a probe at 3k, 19k buffers)."""
    statement = q("nearest_same_type")
    return text(f"{_PROBE_WALK_MARK}\n{statement.text}") if walk else statement


def _send_supersede_probe(raw: Any, dialect: Any, memory_id: UUID, tenant_id: UUID, walk: bool) -> Any:
    """Send, in the caller's pipeline, the supersede probe of a memory just written in it (its walk
    settings, when `walk`, set by the caller); the cursor its rows will be read from."""
    cursor = raw.cursor(row_factory=namedtuple_row)
    one = supersede.candidates_params([memory_id], tenant_id)
    cursor.execute(_driver_sql(supersede.candidates_sql(walk), dialect), one)
    return cursor


def _send_probe_default(sender: Any) -> None:
    """The settings PROBE_WALK changed, back to the connection's (a connection or a cursor sends them)."""
    for reset in PROBE_DEFAULT:
        sender.execute(reset)


def _defer_graph_entry(memory: Memory, actor: Actor) -> None:
    """A merge that rewrites the memory's text writes a new version of the row that is not a HOT update (the
    text is in indexes): an indexed memory's new version would get a new HNSW entry in the request, the cost
    migration 0020 took off an upload's INSERT. It becomes the worker's the same way
    (indexing.defer_while_few: not while PENDING_MAX wait). The merge that keeps the text does the same in
    its statement when its document grows (sql/memory.sql, merge_counted)."""
    if memory.indexed:
        memory.indexed = indexing.defer_while_few(actor.tenant_id)  # type: ignore[assignment]


def _superseding_view(p: _Prepared) -> dict[str, Any]:
    """What supersede.updates reads of a new memory."""
    return {**p.fields, "memory_type": p.memory_type, "occurred_at": p.occurred_at, "thread": p.thread}


def _is_update(p: _Prepared, existing: dict[str, str]) -> bool:
    """An upload that changes the value of a close memory (db-stage-1 -> db-stage-2) is no duplicate: it
    is kept as a second memory and linked as superseding it (_joined)."""
    new = _superseding_view(p)
    return supersede.updates(new, existing) or supersede.updates(existing, new)


def _nearest_params(actor: Actor, p: _Prepared) -> dict[str, Any]:
    """The dedup probe's (nearest_same_type) parameters for a prepared upload."""
    return {
        "tenant_id": actor.tenant_id,
        "content_hash": p.content_hash,
        "memory_type": p.memory_type,
        "scope": p.scope,
        "agent_id": actor.agent_id,
        "group_name": p.group,
        "embedding": p.embedding,
        "k": DEDUP_NEIGHBOURS,
    }


@cache
def _create_memory() -> TextClause:
    """create_memory with the types its parameters need bound (the rest go to the driver as they are)."""
    columns = Memory.__table__.c
    return q("create_memory").bindparams(
        bindparam("tags", type_=columns.tags.type),
        bindparam("redacted_entities", type_=columns.redacted_entities.type),
    )


def _memory_row(tenant_id: UUID, agent_id: UUID | None, p: _Prepared) -> dict[str, Any]:
    """A new memory's columns from a prepared upload (single uploads and batches alike)."""
    return {
        "tenant_id": tenant_id,
        "agent_id": agent_id,
        "memory_type": p.memory_type,
        **p.fields,
        "tags": p.tags,
        "summary_l0": p.summary_l0,
        "overview_l1": p.overview_l1,
        "embedding": p.embedding,
        "content_hash": p.content_hash,
        "search_tsv": document.tsvector(*p.fields.values(), *p.tags),
        "scope": p.scope,
        "group_name": p.group,
        "redacted_entities": p.redacted,
        "thread": p.thread,
        "position": p.position,
        "occurred_at": p.occurred_at,
    }


def _new_memory_params(memory_id: UUID, actor: Actor, p: _Prepared) -> dict[str, Any]:
    """`_memory_row` as statement parameters (a single upload's `create_memory`; a batch's
    `create_memories`, each an array): the document's text is the parameter `search_doc`, which the
    statement turns into the search vector (`to_tsvector('simple', ...)`)."""
    return {
        "id": memory_id,
        "tenant_id": actor.tenant_id,
        "agent_id": actor.agent_id,
        "memory_type": p.memory_type,
        **p.fields,
        "tags": p.tags,
        "summary_l0": p.summary_l0,
        "overview_l1": p.overview_l1,
        "embedding": p.embedding,
        "content_hash": p.content_hash,
        "search_doc": fulltext.index_text(*p.fields.values(), *p.tags),
        "scope": p.scope,
        "group_name": p.group,
        "redacted_entities": p.redacted,
        "thread": p.thread,
        "position": p.position,
        "occurred_at": p.occurred_at,
    }


def _create_memories_params(actor: Actor, created: list[tuple[UUID, _Prepared]]) -> dict[str, Any]:
    """create_memories' parameters: each of `_new_memory_params` an array over the new memories (tags and
    redaction counts as jsonb: their rows differ in length), the tenant and agent once."""
    rows = [_new_memory_params(memory_id, actor, p) for memory_id, p in created]
    arrays = {name: [row[name] for row in rows] for name in rows[0] if name not in ("tenant_id", "agent_id")}
    for name in ("tags", "redacted_entities"):
        arrays[name] = [Jsonb(value) for value in arrays[name]]
    return {
        **arrays,
        "tenant_id": actor.tenant_id,
        "agent_id": actor.agent_id,
        "pending_max": indexing.PENDING_MAX,
    }


def _contribution_row(
    actor: Actor, memory_id: UUID, p: _Prepared, decision: str, sim: float | None
) -> dict[str, Any]:
    return {
        "tenant_id": actor.tenant_id,
        "memory_id": memory_id,
        "agent_id": actor.agent_id,
        "decision": decision,
        "similarity": sim,
        "tags": p.tags,
        **p.fields,
    }


def _activity_row(actor: Actor, kind: str, memory_id: UUID | None, detail: dict[str, Any]) -> dict[str, Any]:
    return {
        "tenant_id": actor.tenant_id,
        "agent_id": actor.agent_id,
        "kind": kind,
        "memory_id": memory_id,
        "detail": detail,
    }


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


class MemoryService(SearchMixin, AccessMixin):
    def __init__(
        self,
        settings: Settings,
        embedder: Embedder,
        intelligence: Intelligence,
        redactor: Redactor | None = None,
        hits: HitBuffer | None = None,
        *,
        companion: CompanionHooks | None = None,
        clusters: ClusterHooks | None = None,
        term_stats: TermStatsKeeper | None = None,
        runtime: RuntimeSettings | None = None,
        dedup_band: tuple[float, float] | None = None,
    ):
        self.settings = settings
        # Search hits go through this buffer when given; without one they are written in the transaction.
        self.hits = hits
        self.embedder = embedder
        self.intelligence = intelligence
        self.redactor = redactor
        # What each scope redacts: the settings' policy, or a tenant's own merged over it (loaded per upload).
        self.redaction_policy = settings.redaction_policy()
        # tenant -> (its stored policy as last read, that merged over the settings' one).
        self._tenant_policies: dict[UUID, tuple[Any, Any]] = {}
        # (HARD, SOFT): the band recorded in the database for its embedding model, else the settings'.
        self.hard_threshold, self.soft_threshold = dedup_band or settings.dedup_thresholds
        # Companion memory (ultron/companion/): emotion on upload, ripples on use, re-ranking of searches.
        self.companion = companion
        # Knowledge clusters (ultron/clusters/), left in the merge's transaction (joined by the worker).
        self.clusters = clusters
        # Keeps the lexical ranker's term statistics fresh (ultron/memory/termstats.py).
        self.term_stats = term_stats
        # An admin's runtime changes per tenant (ultron/settings_store.py).
        self.runtime = runtime
        # tenant -> (good until, monotonic; whether its searches walk the HNSW index): _walks_index, read
        # again once the keeper rebuilt the tenant's statistics (the answer is read from them)
        self._walk_cache = WalkCache()
        if term_stats is not None:
            term_stats.listen(self._walk_cache.forget)

    # --- helpers -------------------------------------------------------------------------------

    def load_tenant_policy(self, session: Session, tenant_id: UUID) -> None:
        """Read the tenant's redaction policy (`tenants.settings -> 'redaction'`) over the global one."""
        self._use_policy(tenant_id, session.execute(_TENANT_POLICY, {"tenant_id": tenant_id}).scalar())

    def _use_policy(self, tenant_id: UUID, stored: Any) -> None:
        """Apply the tenant's stored policy as read (`tenants.settings -> 'redaction'`, None: none)."""
        from ultron.privacy.policy import RedactionPolicy  # here: ultron.privacy's __init__ loads Presidio

        try:
            own = (
                None if stored is None else self.redaction_policy.merged(RedactionPolicy.from_mapping(stored))
            )
        except ValueError as exc:
            raise ValidationFailed(f"this tenant's redaction policy is invalid: {exc}") from None
        self._tenant_policies[tenant_id] = (stored, own or self.redaction_policy)

    def _policy(self, tenant_id: UUID) -> tuple[Any, Any]:
        """(the tenant's stored policy as last read, or _NOT_READ; the policy that applies)."""
        return self._tenant_policies.get(tenant_id, (_NOT_READ, self.redaction_policy))

    def policy_read(self, tenant_id: UUID) -> bool:
        """Whether this process has read the tenant's policy: a single upload prepared under it checks it
        again in its own transaction (`_upload`), so a caller need not read it before preparing."""
        return self._policy(tenant_id)[0] is not _NOT_READ

    def scope_policy(self, tenant_id: UUID, scope: str) -> Any:
        """What a memory of `scope` in this tenant has redacted (private ones keep names by default)."""
        return self._policy(tenant_id)[1].for_scope(scope)

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

    def _embed_one(self, fields: dict[str, str], turn: bool = False) -> np.ndarray:
        vector = self.embedder.embed([embedding_text(**embedded_fields(fields, turn))], kind="document")[0]
        return np.asarray(vector, dtype=np.float32)

    def _prepare(self, req: UploadRequest, actor: Actor, *, embed: bool = True) -> _Prepared:
        """Check, redact, type and summarize; embed too unless the caller embeds many at once."""
        fields = {"content": req.content, "context": req.context, "resolution": req.resolution}
        self._check_sizes(fields)
        # Refuse bad input before any model call.
        if req.scope == "group" and not req.group:
            raise ValidationFailed("scope 'group' needs a group name")
        if req.scope == "group" and req.group not in actor.groups:
            raise ValidationFailed(f"agent {actor.agent_name!r} is not in group {req.group!r}")
        seen, policy = self._policy(actor.tenant_id)
        fields, tags, redacted = self._redact(fields, req.tags, policy.for_scope(req.scope))
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
            embedding=self._embed_one(fields, req.thread is not None) if embed else None,
            summary_l0=l0,
            overview_l1=l1,
            content_hash=content_hash(**fields),
            scope=req.scope,
            group=req.group if req.scope == "group" else None,
            thread=req.thread,
            position=req.position,
            occurred_at=req.occurred_at,
            policy_seen=seen,
        )

    def _nearest(self, session: Session, actor: Actor, p: _Prepared) -> list[tuple[UUID, float]]:
        walk = self._walks_index(session, actor.tenant_id)
        if walk:
            session.execute(text(PROBE_WALK))
        rows = session.execute(_nearest_sql(walk), _nearest_params(actor, p)).all()
        if walk:
            for reset in PROBE_DEFAULT:
                session.execute(text(reset))
        return [(row.id, float(row.similarity)) for row in rows]

    def _locked_nearest(
        self, session: Session, actor: Actor, p: _Prepared, create: UUID | None = None
    ) -> tuple[Any, list[tuple[UUID, float]], dict[str, str] | None, Any]:
        """Read the tenant's stored redaction policy, take the upload's dedup lock, then probe under it
        (`_nearest`): the three statements, and the transaction's BEGIN when they open it, go to the server
        in one psycopg pipeline, one round trip. The server still runs them one after the other, so the
        probe's snapshot is taken once the lock is granted, exactly as when they are sent apart.
        `create`: the new memory's id, when the upload knows the policy it was prepared under; the probe
        is then probe_or_create_memory, which also writes the memory when nothing is near enough to merge
        and the policy is unchanged, and the supersede probe of that memory follows in the same pipeline
        (one round trip for the whole upload but its commit).
        Returns (the stored policy, the probe, the text of the probe's nearest memory, None if none, and
        (its row, its supersede probe's rows) if the probe wrote the new memory, else None): the probe
        reads the text under the lock, so the merge checks need no statement of their own to load it."""
        raw = session.connection().connection.driver_connection
        assert raw is not None  # a checked-out connection always has one; SQLAlchemy types it Optional
        dialect = session.get_bind().dialect
        walk = self._walks_index(session, actor.tenant_id)
        linking = None
        with transaction_pipeline(raw):  # the BEGIN, when it opens the transaction, goes with the rest
            policy = raw.execute(_driver_sql(_TENANT_POLICY, dialect), {"tenant_id": actor.tenant_id})
            raw.execute(_DEDUP_LOCK, (DEDUP_LOCK_NAMESPACE, self._dedup_key(actor, p)))
            if walk:
                raw.execute(PROBE_WALK)
            cursor = raw.cursor(row_factory=namedtuple_row)
            if create is None:
                cursor.execute(_driver_sql(_nearest_sql(walk), dialect), _nearest_params(actor, p))
            else:
                params = {**_new_memory_params(create, actor, p), **_nearest_params(actor, p)}
                params["redacted_entities"] = Jsonb(params["redacted_entities"])
                params["pending_max"] = indexing.PENDING_MAX
                params["soft"], params["hard"] = self.soft_threshold, self.hard_threshold
                params["policy"] = None if p.policy_seen is None else Jsonb(p.policy_seen)
                # `$n` placeholders sent as they are: the statement is over psycopg's 4 KB cache of converted
                # queries, and converting its `%(name)s` cost ~0.3 ms an upload
                sql, names = _raw_sql(_probe_or_create_sql(walk), dialect)
                # what a merge decided in the soft band rolls back: the statement may write the memory
                # beside a memory the judge then finds the same (`_upload`)
                raw.execute(_SPECULATIVE)
                cursor = RawCursor(raw, row_factory=namedtuple_row)
                cursor.execute(sql, [params[name] for name in names])
                # The supersede probe of the memory it wrote (no row when it wrote none), same round trip;
                # none for a memory no other could be linked with (supersede.may_supersede).
                if supersede.may_supersede(_superseding_view(p)):
                    linking = _send_supersede_probe(raw, dialect, create, actor.tenant_id, walk)
            if walk:
                _send_probe_default(raw)
        found = policy.fetchone()
        stored = None if found is None else found[0]
        rows = cursor.fetchall()
        written = None
        if rows and create is not None and rows[0].created:
            written = (rows[0], linking.fetchall() if linking is not None else [])
            rows = rows[1:]  # the probe's memories at SOFT or above, for the judge
        top = None
        if rows:
            top = {"content": rows[0].content, "context": rows[0].context, "resolution": rows[0].resolution}
        return stored, [(row.id, float(row.similarity)) for row in rows], top, written

    def _fields_of(
        self, session: Session, actor: Actor, memory_id: UUID, known: dict[str, str] | None = None
    ) -> dict[str, str]:
        """A memory's text for the merge checks: `known` when the dedup probe read it already."""
        if known is not None:
            return known
        m = session.get(Memory, (memory_id, actor.tenant_id))
        assert m is not None  # from the tenant's own dedup probe
        return {"content": m.content, "context": m.context, "resolution": m.resolution}

    def _judge(
        self,
        session: Session,
        actor: Actor,
        p: _Prepared,
        memory_id: UUID,
        known: dict[str, str] | None = None,
    ) -> bool:
        existing = self._fields_of(session, actor, memory_id, known)
        # The offline content checks veto any judge (a chat model too), and spare it the call; an update
        # of a value is never a duplicate.
        return (
            may_merge_judged(existing, p.fields)
            and not _is_update(p, existing)
            and bool(self.intelligence.judge_same(existing, p.fields))
        )

    # --- upload --------------------------------------------------------------------------------

    def prepare(self, req: UploadRequest, actor: Actor) -> _Prepared:
        """The provider work of an upload (redact, type, summarize, embed), needing no database: run it
        before opening the write transaction and pass the result to `upload(..., prepared=)`."""
        return self._prepare(req, actor)

    def prepare_batch(self, reqs: Sequence[UploadRequest | UltronError], actor: Actor) -> list[Any]:
        """`prepare` for many uploads: the NER model runs over all their texts in a few batched passes and
        the embedder gets one call; an item that fails its checks becomes its error (it is refused, the
        others go on). A provider failure fails the whole batch, before anything is written."""
        if self.redactor is not None and hasattr(self.redactor, "warm"):
            by_scope: dict[str, list[str]] = {}
            for r in reqs:
                if isinstance(r, UploadRequest):
                    by_scope.setdefault(r.scope, []).extend([r.content, r.context, r.resolution, *r.tags])
            for scope, texts in by_scope.items():
                self.redactor.warm(texts, self.scope_policy(actor.tenant_id, scope))
        out: list[Any] = []
        for r in reqs:
            if not isinstance(r, UploadRequest):
                out.append(r)
                continue
            try:
                out.append(self._prepare(r, actor, embed=False))
            except ValidationFailed as exc:
                out.append(exc)
        todo = [p for p in out if isinstance(p, _Prepared)]
        vectors = self.embedder.embed(
            [embedding_text(**embedded_fields(p.fields, p.thread is not None)) for p in todo], kind="document"
        )
        for p, vector in zip(todo, vectors, strict=True):
            p.embedding = np.asarray(vector, dtype=np.float32)
        return out

    def upload_batch(
        self, session: Session, actor: Actor, reqs: Sequence[Any], prepared: Sequence[Any]
    ) -> list[UploadResult | UltronError]:
        """Store prepared uploads in order, in the caller's one transaction, each decided exactly as a
        single upload would be after the ones before it.

        The dedup locks of every (type, scope, owner) the batch touches are taken up front in key order,
        so two batches never wait on each other in a cycle; with a chat-model judge, its calls happen
        before the locks, as a single upload's do. Under the locks every item's single dedup probe is sent
        at once (`_batch_probe`); those probes see the stored memories only, so the batch's own new
        memories are compared by exact cosine (same key). An item that merges into a stored memory merges
        at once; new items are inserted together (`_create_many`). An item whose nearest is a new memory of
        the batch is decided against it in memory (`_new_verdict`: the automatic merge's test, the judge in
        the soft band), and stays new without a write when that is clear; when it merges, when the cosine
        is too close to a threshold or to another memory's to call, or when its key had a memory's text
        rewritten by a merge earlier in the batch (its probe is stale), it is probed again as a single
        upload is, after the pending new memories of its key are inserted."""
        items = [
            (i, r, p) for i, (r, p) in enumerate(zip(reqs, prepared, strict=True)) if isinstance(p, _Prepared)
        ]
        judged = {i: self._prejudge(session, actor, p) for i, _, p in items}
        for key in sorted({self._dedup_key(actor, p) for _, _, p in items}):
            session.execute(
                text("SELECT pg_advisory_xact_lock(:ns, :key)"), {"ns": DEDUP_LOCK_NAMESPACE, "key": key}
            )
        probes, loaded = self._batch_probe(session, actor, [p for _, _, p in items])
        results: list[UploadResult | UltronError] = list(prepared)
        pending: list[tuple[int, Any, _Prepared, UUID]] = []
        new: dict[int, _NewMemories] = {}  # the batch's new memories so far, by dedup key
        stale: set[int] = set()  # keys with a memory whose text a merge of this batch rewrote
        for (i, req, p), probe in zip(items, probes, strict=True):
            key = self._dedup_key(actor, p)
            stored, near_new = self._batch_nearest(p, probe, new.get(key))
            if near_new and key not in stale and self._new_verdict(p, new[key], stored, judged[i]) is False:
                merged = None  # its nearest is a new memory of the batch, and it is no duplicate of it
            else:
                if near_new or key in stale:  # probe again, as a single upload would, the database caught up
                    if any(self._dedup_key(actor, q) == key for _, _, q, _ in pending):
                        self._create_many(session, actor, pending, results)
                        pending = []
                    nearest = self._nearest(session, actor, p)
                    stored = nearest[0] if nearest else None
                merged = self._merge_into(session, actor, p, judged[i], *stored) if stored else None
            if merged is None:
                memory_id = uuid4()
                pending.append((i, req, p, memory_id))
                new.setdefault(key, _NewMemories()).add(memory_id, p)
                continue
            results[i] = self._finish(session, actor, req, merged)
            if merged.merged_text:
                stale.add(key)
        self._create_many(session, actor, pending, results)
        del loaded
        return results

    def _finish(self, session: Session, actor: Actor, req: Any, result: UploadResult) -> UploadResult:
        if self.companion is not None:
            result = self.companion.after_upload(session, actor, req, result)
        record_upload(result.decision)
        return result

    def _batch_probe(
        self, session: Session, actor: Actor, ps: list[_Prepared]
    ) -> tuple[list[list[tuple[UUID, float]]], list[Memory]]:
        """`_nearest` of every item, against the stored memories: the same statement, sent for all items
        in one round trip (psycopg's executemany pipelines them), so each is planned and answered as a
        single upload's probe is. And the memories at the top of a probe at SOFT or above, loaded in one
        statement for the merge checks that read their text (`_fields_of` finds them in the session while
        the caller holds the list)."""
        if not ps:
            return [], []
        raw = session.connection().connection.driver_connection
        assert raw is not None  # a checked-out connection always has one; SQLAlchemy types it Optional
        probes: list[list[tuple[UUID, float]]] = []
        walk = self._walks_index(session, actor.tenant_id)
        with raw.cursor() as cursor:
            if walk:
                cursor.execute(PROBE_WALK)
            cursor.executemany(
                _driver_sql(_nearest_sql(walk), session.get_bind().dialect),
                [_nearest_params(actor, p) for p in ps],
                returning=True,
            )
            while True:
                probes.append([(row[0], float(row[1])) for row in cursor.fetchall()])
                if not cursor.nextset():
                    break
            if walk:
                _send_probe_default(cursor)
        near = {probe[0][0] for probe in probes if probe and probe[0][1] >= self.soft_threshold - SIM_MARGIN}
        stmt = select(Memory).where(Memory.tenant_id == actor.tenant_id, Memory.id.in_(near))
        return probes, list(session.execute(stmt).scalars()) if near else []

    def _batch_nearest(
        self, p: _Prepared, probe: list[tuple[UUID, float]], new: _NewMemories | None
    ) -> tuple[tuple[UUID, float] | None, bool]:
        """What the dedup probe of a single upload of `p`, made after the batch's earlier items, would put
        first, from `p`'s probe of the stored memories and the batch's earlier new memories of its key:
        (the stored memory at the top of the probe, if it is at SOFT or above, and False) or (None, True)
        when a new memory of the batch could be first (equal content hash, or cosine at SOFT as close as
        the stored one). The margin sends float-rounding ties to the exact path."""
        best = probe[0] if probe and probe[0][1] >= self.soft_threshold - SIM_MARGIN else None
        if new is not None:
            if p.content_hash in new.hashes:
                return None, True
            top = new.top(p.embedding)
            if top >= self.soft_threshold - SIM_MARGIN and (best is None or top >= best[1] - SIM_MARGIN):
                return None, True
        return best, False

    def _new_verdict(
        self, p: _Prepared, new: _NewMemories, stored: tuple[UUID, float] | None, judged: dict[UUID, bool]
    ) -> bool | None:
        """For an item whose nearest could be a new memory of the batch (`_batch_nearest`), what the single
        upload's decision would be, found without writing the batch's pending memories: False when the
        new memory it is closest to is clearly first and clearly no duplicate (below HARD or disagreeing
        tokens, and in the soft band the judge says different), None when it must take the exact path (a
        merge, a repeated content hash, a cosine within SIM_MARGIN of a threshold or of the next memory's).
        The judge's verdict on a merge is kept in `judged` for that path."""
        if p.content_hash in new.hashes:
            return None
        place, sim, second = new.nearest(p.embedding)
        if second > sim - SIM_MARGIN or (stored is not None and stored[1] > sim - SIM_MARGIN):
            return None
        if min(abs(sim - self.hard_threshold), abs(sim - self.soft_threshold)) < SIM_MARGIN:
            return None
        fields = new.fields[place]
        if sim >= self.hard_threshold and may_merge_automatically(fields, p.fields):
            return None  # merged automatically
        if sim >= self.soft_threshold:
            same = may_merge_judged(fields, p.fields) and bool(self.intelligence.judge_same(fields, p.fields))
            if same:
                judged[new.ids[place]] = True
                return None
        return False

    def _create_many(
        self,
        session: Session,
        actor: Actor,
        pending: list[tuple[int, Any, _Prepared, UUID]],
        results: list[UploadResult | UltronError],
    ) -> None:
        """`_create` for many new memories: their rows inserted by one statement that returns what their
        records need, their contributions, activity and the shared ones' cluster queue rows by one each;
        the companion's hook once for them all (`after_create_many`)."""
        if not pending:
            return
        created = [(memory_id, req, p) for _, req, p, memory_id in pending]
        # their rows, contributions, activity and the shared ones' cluster queue rows in one statement; their
        # graph entries are the worker's while the tenant's waiting ones stay under PENDING_MAX
        # (ultron/memory/indexing.py), the rest are indexed by this INSERT
        rows = session.execute(
            q("create_memories"), _create_memories_params(actor, [(m, p) for m, _, p in created])
        ).all()
        by_id = {row.id: row for row in rows}
        # in order, as single uploads link (_joined), with one probe for them all
        supersede.link_new_many(
            session,
            actor.tenant_id,
            [(memory_id, _superseding_view(p)) for memory_id, _, p in created],
            self._walks_index(session, actor.tenant_id),
        )
        done = [
            (req, UploadResult(record=to_record(by_id[memory_id], actor.agent_name, 1), decision="created"))
            for memory_id, req, _ in created
        ]
        out = (
            [r for _, r in done]
            if self.companion is None
            else self.companion.after_create_many(session, actor, done)
        )
        for (i, _, _, _), result in zip(pending, out, strict=True):
            record_upload(result.decision)
            results[i] = result
        if self.term_stats is not None:
            self.term_stats.changed(actor.tenant_id, len(created))

    @counts_upload
    def upload(
        self, session: Session, actor: Actor, req: UploadRequest, *, prepared: _Prepared | None = None
    ) -> UploadResult:
        """Redact, type, embed and summarize; then merge into a near duplicate or insert a new memory."""
        if prepared is None and not self.policy_read(actor.tenant_id):
            self.load_tenant_policy(session, actor.tenant_id)  # this process's first upload of the tenant
        result = self._upload(session, actor, req, prepared)
        return result if self.companion is None else self.companion.after_upload(session, actor, req, result)

    def _automatic(
        self,
        session: Session,
        actor: Actor,
        p: _Prepared,
        memory_id: UUID,
        sim: float,
        known: dict[str, str] | None = None,
    ) -> bool:
        """A merge without the judge: cosine at or above HARD, agreeing distinguishing tokens (no other
        package, version, path, command, error code, number or date: heuristic.conflicts) and the same
        fact (faithful.disagreements: names and their roles, numbers, negation, the question's object)."""
        if sim < self.hard_threshold:
            return False
        existing = self._fields_of(session, actor, memory_id, known)
        return may_merge_automatically(existing, p.fields) and not _is_update(p, existing)

    def merge_verdict(
        self, existing: dict[str, str], incoming: dict[str, str], sim: float
    ) -> tuple[str | None, str]:
        """What the upload path decides today for an upload at cosine `sim` from a memory, and why:
        ('merged' | 'merged_judge' | None, reason). Used by `ultron memory repair-merges`."""
        clash = conflicts(existing, incoming)
        if sim >= self.hard_threshold and may_merge_automatically(existing, incoming):
            return "merged", f"cosine {sim:.4f} >= HARD and the texts state the same fact"
        if sim < self.soft_threshold:
            why = f"cosine {sim:.4f} is below SOFT {self.soft_threshold:.4f}"
            return None, why + (f"; different {', '.join(clash)}" if clash else "")
        clash += disagreements(existing, incoming, strict=False)
        if not clash and self.intelligence.judge_same(existing, incoming):
            return "merged_judge", "the judge says same"
        if clash:
            return None, "different " + ", ".join(clash)
        return None, "the judge says different"

    def _upload(
        self, session: Session, actor: Actor, req: UploadRequest, prepared: _Prepared | None = None
    ) -> UploadResult:
        """The tenant's redaction policy is read in the upload's transaction, with the dedup lock and
        probe (one round trip): the upload was prepared under the policy last read, and if the one stored
        now differs, it is prepared again under that before anything is written."""
        p = prepared if prepared is not None else self._prepare(req, actor)
        while True:
            judged = self._prejudge(session, actor, p)
            known = p.policy_seen is not _NOT_READ
            stored, nearest, top, row = self._locked_nearest(session, actor, p, uuid4() if known else None)
            if row is not None:  # written by the probe's own statement: nothing at HARD or above
                # A memory in the soft band: the judge decides, as `_decide` would; a merge undoes the write.
                decision = None
                if nearest:
                    decision = self._merge_decision(session, actor, p, judged, *nearest[0], top)
                if decision is None:
                    return self._created(session, actor, p, *row)
                self._undo_speculative(session)
                return self._merge(session, actor, p, nearest[0][0], nearest[0][1], decision)
            if p.policy_seen is not _NOT_READ and stored == p.policy_seen:
                return self._decide(session, actor, p, judged, nearest, top)
            self._use_policy(actor.tenant_id, stored)
            p = self._prepare(req, actor)

    def _dedup_key(self, actor: Actor, p: _Prepared) -> int:
        """The advisory lock an upload's dedup holds: one per (tenant, type, scope, owner), never per agent
        for shared memories, so agents uploading different kinds of memories never wait on each other."""
        owner = str(actor.agent_id) if p.scope == "private" else (p.group or "")
        return _lock_key(actor, p.memory_type, p.scope, owner)

    def _prejudge(self, session: Session, actor: Actor, p: _Prepared) -> dict[UUID, bool]:
        """A chat model judges the soft band: ask it before taking the lock, so the lock is never held
        across a network call; the neighbours are re-checked under the lock. The offline judge is a local
        heuristic, so offline the one probe under the lock is all an upload needs."""
        judged: dict[UUID, bool] = {}
        if getattr(self.intelligence, "llm_available", False):
            for memory_id, sim in self._nearest(session, actor, p)[:1]:
                if sim >= self.soft_threshold and not self._automatic(session, actor, p, memory_id, sim):
                    judged[memory_id] = self._judge(session, actor, p, memory_id)
        return judged

    def _decide(
        self,
        session: Session,
        actor: Actor,
        p: _Prepared,
        judged: dict[UUID, bool],
        nearest: list[tuple[UUID, float]] | None = None,
        top: dict[str, str] | None = None,
    ) -> UploadResult:
        """Under the dedup lock: merge into the nearest same-type memory, or create a new one. `nearest`:
        the probe, when the caller made it under the lock already; `top`: its nearest memory's text as the
        probe read it."""
        if nearest is None:
            nearest, top = self._nearest(session, actor, p), None
        merged = self._merge_into(session, actor, p, judged, *nearest[0], top) if nearest else None
        return merged if merged is not None else self._create(session, actor, p)

    def _merge_into(
        self,
        session: Session,
        actor: Actor,
        p: _Prepared,
        judged: dict[UUID, bool],
        memory_id: UUID,
        sim: float,
        known: dict[str, str] | None = None,
    ) -> UploadResult | None:
        """Merge into the nearest memory if it is the same lesson (automatically, or by the judge in the
        soft band); None when the upload is a memory of its own. `known`: that memory's text, when the
        probe read it."""
        decision = self._merge_decision(session, actor, p, judged, memory_id, sim, known)
        return None if decision is None else self._merge(session, actor, p, memory_id, sim, decision)

    def _merge_decision(
        self,
        session: Session,
        actor: Actor,
        p: _Prepared,
        judged: dict[UUID, bool],
        memory_id: UUID,
        sim: float,
        known: dict[str, str] | None = None,
    ) -> str | None:
        """`_merge_into`'s decision alone ("merged", "merged_judge" or None): it writes nothing."""
        if self._automatic(session, actor, p, memory_id, sim, known):
            return "merged"
        if sim >= self.soft_threshold:
            same = judged.get(memory_id)
            if same is None:
                same = self._judge(session, actor, p, memory_id, known)
            if same:
                return "merged_judge"
        return None

    def _undo_speculative(self, session: Session) -> None:
        """Roll back what probe_or_create_memory wrote after `_SPECULATIVE` (the memory and its rows, and the
        RESETs of the probe's settings that followed it): the dedup lock, taken before it, is kept. The
        settings are put back again (a RESET of a setting the probe did not change does nothing)."""
        raw = session.connection().connection.driver_connection
        assert raw is not None  # a checked-out connection always has one; SQLAlchemy types it Optional
        with raw.pipeline():
            raw.execute(_UNDO_SPECULATIVE)
            _send_probe_default(raw)

    def _create(self, session: Session, actor: Actor, p: _Prepared) -> UploadResult:
        """A new memory with its "created" contribution and its activity row, in one statement (sql/
        memory.sql, create_memory); the record is built from the row its INSERT returns (its one
        contribution is this one, its agent the uploader) rather than read back. Sent on the driver's
        connection, in the session's transaction, as the dedup probe is: SQLAlchemy's statement execution
        and row building cost ~0.5 ms of CPU more per upload. The new memory's supersede probe goes in the
        same pipeline (one round trip for both, as in `_locked_nearest`)."""
        memory_id = uuid4()
        raw = session.connection().connection.driver_connection
        assert raw is not None  # a checked-out connection always has one; SQLAlchemy types it Optional
        dialect = session.get_bind().dialect
        walk = self._walks_index(session, actor.tenant_id)
        params = _new_memory_params(memory_id, actor, p)
        params["redacted_entities"] = Jsonb(params["redacted_entities"])
        params["pending_max"] = indexing.PENDING_MAX
        linking = supersede.may_supersede(_superseding_view(p))
        with raw.pipeline():
            cursor = raw.cursor(row_factory=namedtuple_row)
            cursor.execute(_driver_sql(_create_memory(), dialect), params)
            probe = None
            if linking:
                if walk:
                    raw.execute(PROBE_WALK)
                probe = _send_supersede_probe(raw, dialect, memory_id, actor.tenant_id, walk)
                if walk:
                    _send_probe_default(raw)
        row = cursor.fetchone()
        assert row is not None  # INSERT ... RETURNING of one row
        return self._created(session, actor, p, row, probe.fetchall() if probe is not None else [])

    def _created(
        self, session: Session, actor: Actor, p: _Prepared, row: Any, candidates: Any = None
    ) -> UploadResult:
        """A new memory's row as its INSERT returned it: what follows the INSERT (`_joined`), the result."""
        self._joined(session, actor.tenant_id, row.id, p, candidates)
        return UploadResult(record=to_record(row, actor.agent_name, 1), decision="created")

    def _new_memory(self, session: Session, tenant_id: UUID, agent_id: UUID | None, p: _Prepared) -> Memory:
        memory = Memory(**_memory_row(tenant_id, agent_id, p))
        session.add(memory)
        session.flush()
        if p.scope == "shared":  # its cluster is the worker's, as an upload's (create_memory's queue row)
            session.add(ClusterQueueItem(memory_id=memory.id, tenant_id=tenant_id))
        self._joined(session, tenant_id, memory.id, p)
        return memory

    def _joined(
        self, session: Session, tenant_id: UUID, memory_id: UUID, p: _Prepared, candidates: Any = None
    ) -> None:
        """What follows a new memory's INSERT: the term statistics' change count, its link to a memory it
        updates (supersede.link_new; `candidates`: its probe's rows when the upload's pipeline read them)."""
        if candidates is None:
            walk = self._walks_index(session, tenant_id)
            supersede.link_new(session, tenant_id, memory_id, _superseding_view(p), walk)
        else:
            supersede.link_found(session, tenant_id, memory_id, _superseding_view(p), candidates)
        # Its cluster is the worker's (the queue row create_memory wrote): no caller waits for it.
        if self.term_stats is not None:
            self.term_stats.changed(tenant_id)

    def _merge(
        self, session: Session, actor: Actor, p: _Prepared, memory_id: UUID, sim: float, decision: str
    ) -> UploadResult:
        memory = session.get(Memory, (memory_id, actor.tenant_id), with_for_update=True)
        assert memory is not None
        existing = {"content": memory.content, "context": memory.context, "resolution": memory.resolution}
        # A pinned memory's text is never rewritten by a merge: the upload adds a contribution and a hit.
        merged = None if memory.pinned else self.intelligence.merge(existing, p.fields)
        text_changed = False
        more: dict[str, int] = {}
        if merged is not None:
            merged = {k: (merged.get(k) or existing[k]) for k in TEXT_FIELDS}
            self._check_sizes(merged)
            merged, _, more = self._redact(merged, [], self.scope_policy(actor.tenant_id, memory.scope))
            text_changed = merged != existing
        # A pinned memory's tags stay as its owner set them too (the upload's stay in its contribution).
        tags = memory.tags if memory.pinned else list(dict.fromkeys([*memory.tags, *p.tags]))
        tags = tags[: self.settings.max_tags]
        if not text_changed:
            self._merge_counted(session, actor, p, memory, sim, decision, tags)
        else:
            assert merged is not None  # text_changed
            self._log_contribution(session, actor, memory_id, p, decision, sim)
            self.record_hits(session, actor, [memory_id], "merge")
            self._apply_text(memory, merged)
            memory.redacted_entities = _add_counts(memory.redacted_entities, more)
            memory.tags = tags
            _defer_graph_entry(memory, actor)
            session.flush()
            document.rebuild(session, memory)  # the new text, and every contribution's (this one's too)
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

    def _merge_counted(
        self,
        session: Session,
        actor: Actor,
        p: _Prepared,
        memory: Memory,
        sim: float,
        decision: str,
        tags: list[str],
    ) -> None:
        """A merge that leaves the memory's text as it is (offline, a pinned memory): what the upload adds
        is counted in one pipeline, one round trip (sql/memory.sql, `merge_counted`, then its merge hit):
        the contribution, its words in the memory's document (lossless: they stay findable), the tags'
        union, the redaction counts, `updated_at` and the activity row. Through the ORM these were five
        round trips. The memory's loaded attributes are expired: the next read sees the row as written."""
        session.flush()  # nothing of the session's may follow these statements unsent
        added = document.added_text(memory, p.fields, p.tags)
        raw = session.connection().connection.driver_connection
        assert raw is not None  # a checked-out connection always has one; SQLAlchemy types it Optional
        dialect = session.get_bind().dialect
        params = {
            **_contribution_row(actor, memory.id, p, decision, sim),
            "memory_tags": tags,
            "doc": added,
            "redacted_entities": Jsonb(_add_counts(memory.redacted_entities, p.redacted)),
            "updated_at": datetime.now(UTC),
            "pending_max": indexing.PENDING_MAX,
            "detail": Jsonb({"similarity": round(sim, 4), "decision": decision}),
        }
        with raw.pipeline():
            raw.execute(_driver_sql(q("merge_counted"), dialect), params)
            raw.execute(_driver_sql(q("record_hits"), dialect), self._hit_params(actor, [memory.id], "merge"))
        session.expire(memory)

    def absorb(self, session: Session, actor: Actor, winner_id: UUID, loser_id: UUID, sim: float) -> bool:
        """Consolidation: merge the loser into the winner as an upload would, then archive it with a link.

        Returns False (and changes nothing) when either is no longer active or the loser is pinned.
        """
        loser = session.get(Memory, (loser_id, actor.tenant_id), with_for_update=True, populate_existing=True)
        winner = session.get(
            Memory, (winner_id, actor.tenant_id), with_for_update=True, populate_existing=True
        )
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

    # --- split --------------------------------------------------------------------------------

    def split(self, session: Session, actor: Actor, memory_id: UUID, contribution_id: int) -> SplitResult:
        """Undo a merge: a merged contribution becomes its own memory, with its own embedding, summaries
        and document; the memory it leaves no longer indexes its text.

        Only the contribution's own agent, the memory's owner or an admin may split it out (403 otherwise);
        a contribution that created its memory cannot be split from it (422), nor one out of an archived
        memory (409)."""
        self.get(session, actor, memory_id)  # 404 when the memory is not visible to this agent
        memory = session.get(
            Memory, (memory_id, actor.tenant_id), with_for_update=True, populate_existing=True
        )
        assert memory is not None
        c = session.get(MemoryContribution, (contribution_id, actor.tenant_id), with_for_update=True)
        if c is None or c.memory_id != memory_id or c.tenant_id != actor.tenant_id:
            raise NotFound(f"contribution {contribution_id} is not part of memory {memory_id}")
        if not actor.is_admin and actor.agent_id not in (c.agent_id, memory.agent_id):
            raise Forbidden(
                f"agent {actor.agent_name!r} did not upload contribution {contribution_id}; only its "
                "contributor, the memory's owner or an admin agent may split it out"
            )
        if c.decision not in ("merged", "merged_judge"):
            raise ValidationFailed(
                f"contribution {contribution_id} is the memory's own upload ({c.decision}); only merged "
                "contributions can be split out"
            )
        if memory.status != "active":
            # An archived memory stays archived with what it holds: no active copy of part of it.
            raise Conflict(f"memory {memory_id} is archived; a contribution cannot be split out of it")
        owner = str(memory.agent_id) if memory.scope == "private" else (memory.group_name or "")
        session.execute(
            text("SELECT pg_advisory_xact_lock(:ns, :key)"),
            {"ns": DEDUP_LOCK_NAMESPACE, "key": _lock_key(actor, memory.memory_type, memory.scope, owner)},
        )
        new = self._memory_of(session, actor, memory, c)
        c.memory_id, c.decision = new.id, "split"
        session.flush()
        self._unmerge_text(session, memory, c)
        document.rebuild(session, memory)
        memory.updated_at = datetime.now(UTC)
        session.flush()
        self._activity(
            session, actor, "split", memory_id, {"contribution_id": contribution_id, "into": str(new.id)}
        )
        return SplitResult(
            memory=self.get(session, actor, memory_id),
            split=self.get(session, actor, new.id),
            contribution_id=contribution_id,
        )

    def purge_contribution(
        self, session: Session, actor: Actor, memory_id: UUID, contribution_id: int
    ) -> None:
        """Take a merged upload's text out of a memory for good (its words stop finding the memory). Its
        contributor or an admin deletes it; the memory's owner, who may not destroy another agent's upload,
        moves it to a memory of that agent's own (a split). The base upload follows edits: not purgeable."""
        memory = session.get(Memory, (memory_id, actor.tenant_id), with_for_update=True)
        self.get(session, actor, memory_id)  # 404 when the memory is not visible to this agent
        assert memory is not None
        c = session.get(MemoryContribution, (contribution_id, actor.tenant_id), with_for_update=True)
        if c is None or c.memory_id != memory_id:
            raise NotFound(f"contribution {contribution_id} is not part of memory {memory_id}")
        if c.decision not in ownership.MERGED_DECISIONS:
            raise ValidationFailed(
                f"contribution {contribution_id} is the memory's own upload: edit the memory (PATCH) or "
                "delete it"
            )
        own = c.agent_id == actor.agent_id or actor.is_admin
        if not own and memory.agent_id != actor.agent_id:
            raise Forbidden(
                f"agent {actor.agent_name!r} may not purge contribution {contribution_id}: only its "
                "contributor, the memory's owner or an admin agent may"
            )
        if not own:
            self.split(session, actor, memory_id, contribution_id)
            return
        session.delete(c)
        session.flush()
        self._unmerge_text(session, memory, c)
        document.rebuild(session, memory)
        memory.updated_at = datetime.now(UTC)
        session.flush()
        self._activity(session, actor, "purge", memory_id, {"contribution_id": contribution_id})

    def _memory_of(self, session: Session, actor: Actor, memory: Memory, c: MemoryContribution) -> Memory:
        """A new memory of a contribution's own (its embedding, summaries, document), in the scope of the
        memory it was merged into; the caller moves the contribution to it."""
        fields = {"content": c.content, "context": c.context, "resolution": c.resolution}
        memory_type = self.intelligence.infer_type(**fields)
        l0, l1 = self.intelligence.summarize(**fields)
        prepared = _Prepared(
            fields=fields,
            tags=list(c.tags)[: self.settings.max_tags],
            redacted={},  # counted on the memory it was merged into, which keeps the count
            memory_type=memory_type if memory_type in MEMORY_TYPES else "pattern",
            embedding=self._embed_one(fields, memory.thread is not None),
            summary_l0=l0,
            overview_l1=l1,
            content_hash=content_hash(**fields),
            scope=memory.scope,
            group=memory.group_name,
        )
        return self._new_memory(session, actor.tenant_id, c.agent_id, prepared)

    def _unmerge_text(self, session: Session, memory: Memory, c: MemoryContribution) -> None:
        """Take back from the memory's text and tags what only the split-out contribution brought: a
        resolution filled from it, an "Alternative: ..." line an older offline merge appended, its tags."""
        remaining = session.execute(
            select(MemoryContribution.decision, MemoryContribution.resolution, MemoryContribution.tags)
            .where(
                MemoryContribution.memory_id == memory.id, MemoryContribution.tenant_id == memory.tenant_id
            )
            .order_by(MemoryContribution.created_at, MemoryContribution.id)
            .limit(document.MAX_CONTRIBUTIONS)
        ).all()
        kept_tags = {tag for row in remaining for tag in (row.tags or [])}
        memory.tags = [tag for tag in memory.tags if tag in kept_tags or tag not in c.tags]
        fields = {"content": memory.content, "context": memory.context, "resolution": memory.resolution}
        theirs = " ".join(c.resolution.split())
        if theirs:
            lines = fields["resolution"].split("\n")
            kept = [
                line
                for line in lines
                if not (
                    line.startswith("Alternative: ")
                    and theirs.startswith(" ".join(line[len("Alternative: ") :].split()).rstrip(". …"))
                )
            ]
            fields["resolution"] = "\n".join(kept)
            if " ".join(fields["resolution"].split()) == theirs:
                fields["resolution"] = ownership.resolution_after_split(
                    fields["resolution"], theirs, remaining
                )
        if fields != {"content": memory.content, "context": memory.context, "resolution": memory.resolution}:
            self._apply_text(memory, fields)

    def _apply_text(self, memory: Memory, fields: dict[str, str]) -> None:
        """New text: re-embed, re-summarize (the caller re-indexes: document.rebuild)."""
        memory.content, memory.context, memory.resolution = (fields[k] for k in TEXT_FIELDS)
        memory.embedding = self._embed_one(fields, memory.thread is not None)
        memory.summary_l0, memory.overview_l1 = self.intelligence.summarize(**fields)
        memory.content_hash = content_hash(**fields)

    def _log_contribution(
        self, session: Session, actor: Actor, memory_id: UUID, p: _Prepared, decision: str, sim: float | None
    ) -> None:
        session.add(MemoryContribution(**_contribution_row(actor, memory_id, p, decision, sim)))

    def _activity(
        self, session: Session, actor: Actor, kind: str, memory_id: UUID | None, detail: dict[str, Any]
    ) -> None:
        session.add(ActivityEvent(**_activity_row(actor, kind, memory_id, detail)))

    # --- edit / delete -------------------------------------------------------------------------

    def _owned(self, session: Session, actor: Actor, memory_id: UUID) -> Memory:
        """The memory, locked for change, if this agent may change it (its contributor or an admin)."""
        self.get(session, actor, memory_id)
        memory = session.get(Memory, (memory_id, actor.tenant_id), with_for_update=True)
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
            # What the owner edited out stops being indexed, and a later split restores what it set.
            ownership.follow_edit(session, memory, [*new_text, *(["tags"] if "tags" in changes else [])])
            document.rebuild(session, memory)
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
        """Forget a memory for good: its hit log and its owner's uploads go with it. Other agents' uploads
        merged into it are acknowledged data of theirs: each becomes a memory of its own agent (in the
        memory's scope and status), as a split would make it."""
        memory = self._owned(session, actor, memory_id)
        kept = []
        for c in ownership.others_uploads(session, memory):
            new = self._memory_of(session, actor, memory, c)
            if memory.status != "active":
                new.status, new.archived_at, new.archived_reason = "archived", memory.archived_at, "deleted"
            c.memory_id, c.decision = new.id, "split"
            kept.append(str(new.id))
        session.flush()
        session.execute(delete(Memory).where(Memory.id == memory_id, Memory.tenant_id == actor.tenant_id))
        self._activity(session, actor, "delete", memory_id, {"kept": kept} if kept else {})
