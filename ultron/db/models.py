"""ORM models. Every row that holds user data carries its tenant; all times are timestamptz (UTC)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Identity,
    Index,
    Integer,
    LargeBinary,
    SmallInteger,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR, UUID
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

MEMORY_TYPE_CHECK = (
    "memory_type IN ('error','security','correction','pattern','preference','life','reflection')"
)


class Base(DeclarativeBase):
    pass


def _uuid_pk() -> Mapped[uuid.UUID]:
    return mapped_column(UUID(as_uuid=True), primary_key=True, server_default=text("gen_random_uuid()"))


def _now() -> Mapped[datetime]:
    return mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())


# Every key of a tenant table holds the tenant (migration 0012), the distribution column of a sharded or
# partitioned deployment (docs/scaling.md): primary keys and uniques end with it, foreign keys between
# tenant tables are (x_id, tenant_id) -> (id, tenant_id). tests/db/test_schema_keys.py checks the live schema.


def _tenant_key() -> Mapped[uuid.UUID]:
    """tenant_id as the last column of the primary key."""
    return mapped_column(
        UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True, nullable=False
    )


def _tenant_fk(table: str, column: str, parent: str, ondelete: str) -> ForeignKeyConstraint:
    """(column, tenant_id) -> parent (id, tenant_id); SET NULL clears the reference only, never the tenant."""
    action = f"SET NULL ({column})" if ondelete == "SET NULL" else ondelete
    return ForeignKeyConstraint(
        [column, "tenant_id"],
        [f"{parent}.id", f"{parent}.tenant_id"],
        ondelete=action,
        name=f"{table}_{column}_fkey",
    )


class Tenant(Base):
    __tablename__ = "tenants"

    id: Mapped[uuid.UUID] = _uuid_pk()
    name: Mapped[str] = mapped_column(Text, nullable=False, unique=True)
    settings: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default=text("'{}'"))
    created_at: Mapped[datetime] = _now()


class Agent(Base):
    __tablename__ = "agents"
    __table_args__ = (
        UniqueConstraint("tenant_id", "name", name="uq_agents_tenant_name"),
        # Authentication looks a key up by its hash alone: the index leads with it.
        UniqueConstraint("key_hash", "tenant_id", name="uq_agents_key_hash"),
    )

    id: Mapped[uuid.UUID] = _uuid_pk()
    tenant_id: Mapped[uuid.UUID] = _tenant_key()
    name: Mapped[str] = mapped_column(Text, nullable=False)
    # sha256 of the full key; the prefix lets an operator recognise a key without storing it.
    key_hash: Mapped[str | None] = mapped_column(Text)
    key_prefix: Mapped[str | None] = mapped_column(Text)
    # Admin agents may edit and delete any memory of their tenant; others only their own.
    is_admin: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=text("false"))
    created_at: Mapped[datetime] = _now()
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_seen_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class AgentGroup(Base):
    """A named group of agents in a tenant; memories with scope 'group' are visible to its members only."""

    __tablename__ = "agent_groups"
    __table_args__ = (UniqueConstraint("tenant_id", "name", name="uq_agent_groups_tenant_name"),)

    id: Mapped[uuid.UUID] = _uuid_pk()
    tenant_id: Mapped[uuid.UUID] = _tenant_key()
    name: Mapped[str] = mapped_column(Text, nullable=False)
    created_at: Mapped[datetime] = _now()


class GroupMember(Base):
    __tablename__ = "group_members"
    __table_args__ = (
        Index("ix_group_members_agent", "agent_id"),
        _tenant_fk("group_members", "group_id", "agent_groups", "CASCADE"),
        _tenant_fk("group_members", "agent_id", "agents", "CASCADE"),
    )

    group_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    agent_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    tenant_id: Mapped[uuid.UUID] = _tenant_key()  # the group's (migration 0012)
    added_at: Mapped[datetime] = _now()


class EmbeddingProfile(Base):
    """The one embedding model a database is built for."""

    __tablename__ = "embedding_profile"
    __table_args__ = (CheckConstraint("id = 1", name="ck_embedding_profile_singleton"),)

    id: Mapped[int] = mapped_column(SmallInteger, primary_key=True, server_default=text("1"))
    provider: Mapped[str] = mapped_column(Text, nullable=False)
    model_name: Mapped[str] = mapped_column(Text, nullable=False)
    dimension: Mapped[int] = mapped_column(Integer, nullable=False)
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()
    # The dedup band in force for this model (ultron/db/vectors.py dedup_thresholds; migration 0009).
    dedup_hard: Mapped[float | None] = mapped_column(Float)
    dedup_soft: Mapped[float | None] = mapped_column(Float)


class Memory(Base):
    __tablename__ = "memories"
    __table_args__ = (
        CheckConstraint(MEMORY_TYPE_CHECK, name="ck_memories_type"),
        CheckConstraint("tier IN ('hot','warm','cold')", name="ck_memories_tier"),
        CheckConstraint("status IN ('active','archived')", name="ck_memories_status"),
        CheckConstraint("scope IN ('shared','private','group')", name="ck_memories_scope"),
        CheckConstraint("importance BETWEEN 1 AND 10", name="ck_memories_importance"),
        # No index holds `tier`, and the table keeps 20 % of each page free (fillfactor 80, migration
        # 0003): a rebalance that moves a memory between tiers is then a HOT update, which writes no new
        # HNSW/GIN entry (see docs/worker.md).
        Index("ix_memories_tenant_status", "tenant_id", "status"),
        Index("ix_memories_tenant_type_status", "tenant_id", "memory_type", "status"),
        Index("ix_memories_tenant_hash", "tenant_id", "content_hash"),
        Index("ix_memories_tenant_created", "tenant_id", "created_at"),
        Index(
            "ix_memories_thread",
            "tenant_id",
            "thread",
            "position",
            postgresql_where=text("thread IS NOT NULL"),
        ),
        # A new upload's memory until the worker puts its vector in the HNSW graph (migration 0020): the
        # exact pass the probes make beside their walk reads these rows only.
        Index(
            "ix_memories_unindexed",
            "tenant_id",
            postgresql_where=text("status = 'active' AND NOT indexed"),
        ),
        Index(
            "ix_memories_search_tsv",
            "search_tsv",
            postgresql_using="gin",
            postgresql_with={"fastupdate": "off"},
        ),
        _tenant_fk("memories", "agent_id", "agents", "SET NULL"),
        _tenant_fk("memories", "merged_into_id", "memories", "SET NULL"),
        _tenant_fk("memories", "superseded_by_id", "memories", "SET NULL"),
    )

    id: Mapped[uuid.UUID] = _uuid_pk()
    tenant_id: Mapped[uuid.UUID] = _tenant_key()
    agent_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    memory_type: Mapped[str] = mapped_column(Text, nullable=False)
    content: Mapped[str] = mapped_column(Text, nullable=False)
    context: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    resolution: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    tags: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False, server_default=text("'{}'"))
    summary_l0: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    overview_l1: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    # Dimension is fixed when the embedding profile is recorded (see ultron/db/vectors.py).
    embedding: Mapped[Any] = mapped_column(Vector(), nullable=True)
    content_hash: Mapped[str] = mapped_column(Text, nullable=False)
    search_tsv: Mapped[Any] = mapped_column(TSVECTOR, nullable=False)
    tier: Mapped[str] = mapped_column(Text, nullable=False, server_default="warm")
    status: Mapped[str] = mapped_column(Text, nullable=False, server_default="active")
    # Whether its vector is in the HNSW graph: an upload writes false, the worker's `index` step sets it
    # (migration 0020); rows written any other way are indexed at once.
    indexed: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=text("true"))
    hit_count: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    last_hit_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Companion features (scope, pinning, emotion) are columns from day one so later work needs no rewrite.
    scope: Mapped[str] = mapped_column(Text, nullable=False, server_default="shared")
    group_name: Mapped[str | None] = mapped_column(Text)
    pinned: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=text("false"))
    valence: Mapped[float | None] = mapped_column(Float)
    arousal: Mapped[float | None] = mapped_column(Float)
    # 1-10, 5 neutral: a factor in companion ranking; resolved memories sink (migration 0011).
    importance: Mapped[int] = mapped_column(SmallInteger, nullable=False, server_default="5")
    resolved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    redacted_entities: Mapped[dict[str, int]] = mapped_column(
        JSONB, nullable=False, server_default=text("'{}'")
    )
    merged_into_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    # The newer memory that updates this one (same subject, changed value; migration 0017): search ranks
    # that one first and flags this one as superseded.
    superseded_by_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    archived_reason: Mapped[str | None] = mapped_column(Text)
    archived_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # A memory's conversation or session and its place there, and when what it tells happened (all
    # optional; migration 0010). Search credits a neighbour's match and matches a query's dates on them.
    thread: Mapped[str | None] = mapped_column(Text)
    position: Mapped[int | None] = mapped_column(Integer)
    occurred_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()


class TermStat(Base):
    """Document frequency of one full-text lexeme among a tenant's active shared memories (the ranker's IDF;
    shared only, so that no agent's ranking depends on memories it cannot see: migration 0016).

    Refreshed as a whole by ultron_refresh_term_stats(tenant) (migration 0010), which the worker runs."""

    __tablename__ = "term_stats"

    tenant_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    lexeme: Mapped[str] = mapped_column(Text, primary_key=True)
    ndoc: Mapped[int] = mapped_column(Integer, nullable=False)


class TermTotals(Base):
    """How many active memories a tenant had, and their mean lexeme count, when term_stats was refreshed."""

    __tablename__ = "term_totals"

    tenant_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    docs: Mapped[int] = mapped_column(Integer, nullable=False)
    avg_len: Mapped[float] = mapped_column(Float, nullable=False)
    refreshed_at: Mapped[datetime] = _now()


class MemoryEntity(Base):
    """A person, place or project a memory names (ultron/companion/entities.py)."""

    __tablename__ = "memory_entities"
    __table_args__ = (
        CheckConstraint("kind IN ('person', 'place', 'project')", name="ck_memory_entities_kind"),
        Index("ix_memory_entities_tenant_name", "tenant_id", "name"),
        _tenant_fk("memory_entities", "memory_id", "memories", "CASCADE"),
    )

    memory_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    kind: Mapped[str] = mapped_column(Text, primary_key=True)
    name: Mapped[str] = mapped_column(Text, primary_key=True)
    tenant_id: Mapped[uuid.UUID] = _tenant_key()


class MemoryContribution(Base):
    """Every upload that created or merged into a memory, with its original (redacted) text."""

    __tablename__ = "memory_contributions"
    __table_args__ = (
        Index("ix_contributions_memory", "memory_id", "created_at"),
        _tenant_fk("memory_contributions", "memory_id", "memories", "CASCADE"),
        _tenant_fk("memory_contributions", "agent_id", "agents", "SET NULL"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    tenant_id: Mapped[uuid.UUID] = _tenant_key()
    memory_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    agent_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    decision: Mapped[str] = mapped_column(Text, nullable=False)
    similarity: Mapped[float | None] = mapped_column(Float)
    content: Mapped[str] = mapped_column(Text, nullable=False)
    context: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    resolution: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    tags: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False, server_default=text("'{}'"))
    created_at: Mapped[datetime] = _now()


class HitEvent(Base):
    """Each use of a memory. `counted` is false when the agent already hit it in the window."""

    __tablename__ = "hit_events"
    __table_args__ = (
        CheckConstraint("signal IN ('search','details','merge')", name="ck_hit_events_signal"),
        Index("ix_hit_events_memory_agent", "memory_id", "agent_id", "signal", "created_at"),
        Index("ix_hit_events_tenant_created", "tenant_id", "created_at"),
        _tenant_fk("hit_events", "memory_id", "memories", "CASCADE"),
        _tenant_fk("hit_events", "agent_id", "agents", "SET NULL"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    tenant_id: Mapped[uuid.UUID] = _tenant_key()
    memory_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    agent_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    signal: Mapped[str] = mapped_column(Text, nullable=False)
    weight: Mapped[int] = mapped_column(Integer, nullable=False)
    counted: Mapped[bool] = mapped_column(Boolean, nullable=False)
    created_at: Mapped[datetime] = _now()


class ActivityEvent(Base):
    """Uploads, merges and searches over time (the dashboard's charts and `/metrics` read these)."""

    __tablename__ = "activity_events"
    __table_args__ = (
        Index("ix_activity_tenant_kind_created", "tenant_id", "kind", "created_at"),
        _tenant_fk("activity_events", "agent_id", "agents", "SET NULL"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    tenant_id: Mapped[uuid.UUID] = _tenant_key()
    agent_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    kind: Mapped[str] = mapped_column(Text, nullable=False)
    memory_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    detail: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default=text("'{}'"))
    created_at: Mapped[datetime] = _now()


class WorkerProcess(Base):
    """A running (or stopped) worker and its last heartbeat; operational, holds no user data."""

    __tablename__ = "workers"

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    hostname: Mapped[str] = mapped_column(Text, nullable=False)
    pid: Mapped[int] = mapped_column(Integer, nullable=False)
    started_at: Mapped[datetime] = _now()
    heartbeat_at: Mapped[datetime] = _now()
    stopped_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    current_step: Mapped[str | None] = mapped_column(Text)


class WorkerRun(Base):
    """One step of one worker cycle: when it ran, what it did (counts) and what failed (errors)."""

    __tablename__ = "worker_runs"
    __table_args__ = (
        CheckConstraint(
            "status IN ('running','ok','failed','skipped','interrupted')", name="ck_worker_runs_status"
        ),
        Index("ix_worker_runs_started", "started_at"),
        Index("ix_worker_runs_cycle", "cycle_id"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    cycle_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    worker_id: Mapped[str] = mapped_column(Text, nullable=False)
    step: Mapped[str] = mapped_column(Text, nullable=False)
    status: Mapped[str] = mapped_column(Text, nullable=False, server_default="running")
    started_at: Mapped[datetime] = _now()
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    counts: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default=text("'{}'"))
    errors: Mapped[list[Any]] = mapped_column(JSONB, nullable=False, server_default=text("'[]'"))


# --- ingestion and the Trajectory Hub (issue 3) ---------------------------------------------------

SEGMENT_STAGE_CHECK = "stage IN ('score','extract','done','skipped','superseded')"


class ImportJob(Base):
    """One import of a chat-history export; its state lives here so it can be paused and resumed."""

    __tablename__ = "import_jobs"
    __table_args__ = (
        CheckConstraint(
            "kind IN ('chatgpt','claude','deepseek','markdown','text')", name="ck_import_jobs_kind"
        ),
        CheckConstraint("status IN ('running','paused','done','failed')", name="ck_import_jobs_status"),
        Index("ix_import_jobs_tenant_created", "tenant_id", "created_at"),
        _tenant_fk("import_jobs", "agent_id", "agents", "SET NULL"),
    )

    id: Mapped[uuid.UUID] = _uuid_pk()
    tenant_id: Mapped[uuid.UUID] = _tenant_key()
    agent_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    agent_name: Mapped[str] = mapped_column(Text, nullable=False)
    kind: Mapped[str] = mapped_column(Text, nullable=False)
    name: Mapped[str] = mapped_column(Text, nullable=False)
    status: Mapped[str] = mapped_column(Text, nullable=False, server_default="running")
    total: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    done: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    failed: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Leased:
    """A work-queue row's lease and retry state (sessions to segment, segments to score or extract); the
    statements that lease, claim, fail and park such rows are in sql/worker.sql."""

    lease_owner: Mapped[str | None] = mapped_column(Text)
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    next_attempt_at: Mapped[datetime] = _now()
    last_error: Mapped[str | None] = mapped_column(Text)
    parked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class SessionRecord(Leased, Base):
    """One conversation: an ingested session file or an imported conversation, with its work state."""

    __tablename__ = "sessions"
    __table_args__ = (
        UniqueConstraint("tenant_id", "agent_name", "source", name="uq_sessions_tenant_agent_source"),
        CheckConstraint(
            "review_status IN ('none','pending','approved','discarded')", name="ck_sessions_review"
        ),
        Index("ix_sessions_tenant_updated", "tenant_id", "updated_at"),
        Index("ix_sessions_import", "import_id"),
        Index(
            "ix_sessions_pending",
            "next_attempt_at",
            postgresql_where=text("needs_segmentation AND parked_at IS NULL"),
        ),
        _tenant_fk("sessions", "agent_id", "agents", "SET NULL"),
        _tenant_fk("sessions", "import_id", "import_jobs", "SET NULL"),
    )

    id: Mapped[uuid.UUID] = _uuid_pk()
    tenant_id: Mapped[uuid.UUID] = _tenant_key()
    agent_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    # The dedup key is (tenant, agent name, source): the same file from the same agent is one session.
    agent_name: Mapped[str] = mapped_column(Text, nullable=False)
    source: Mapped[str] = mapped_column(Text, nullable=False)
    format: Mapped[str] = mapped_column(Text, nullable=False)
    message_count: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    meta: Mapped[dict[str, Any]] = mapped_column(
        "metadata", JSONB, nullable=False, server_default=text("'{}'")
    )
    import_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    review_status: Mapped[str] = mapped_column(Text, nullable=False, server_default="none")
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    needs_segmentation: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=text("true"))
    segmented_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()


class SessionMessage(Base):
    """One message of a session, normalized and redacted. `seq` is its 0-based position."""

    __tablename__ = "session_messages"
    __table_args__ = (_tenant_fk("session_messages", "session_id", "sessions", "CASCADE"),)

    session_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    tenant_id: Mapped[uuid.UUID] = _tenant_key()
    role: Mapped[str] = mapped_column(Text, nullable=False)
    content: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    reasoning: Mapped[str | None] = mapped_column(Text)
    tool_calls: Mapped[list[Any] | None] = mapped_column(JSONB)
    tool_call_id: Mapped[str | None] = mapped_column(Text)
    name: Mapped[str | None] = mapped_column(Text)
    is_error: Mapped[bool | None] = mapped_column(Boolean)
    stop_reason: Mapped[str | None] = mapped_column(Text)
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # 16-hex digest of the canonical message: how a re-ingest finds where a session changed.
    digest: Mapped[str] = mapped_column(Text, nullable=False)


class TaskSegment(Leased, Base):
    """A contiguous run of messages about one task, scored and (if good enough) mined for memories."""

    __tablename__ = "task_segments"
    __table_args__ = (
        CheckConstraint(SEGMENT_STAGE_CHECK, name="ck_task_segments_stage"),
        CheckConstraint("end_seq >= start_seq", name="ck_task_segments_range"),
        Index("ix_task_segments_session", "session_id", "segment_index"),
        Index("ix_task_segments_tenant_stage", "tenant_id", "stage"),
        Index(
            "ix_task_segments_pending",
            "next_attempt_at",
            postgresql_where=text("stage IN ('score','extract') AND parked_at IS NULL"),
        ),
        _tenant_fk("task_segments", "session_id", "sessions", "CASCADE"),
    )

    id: Mapped[uuid.UUID] = _uuid_pk()
    tenant_id: Mapped[uuid.UUID] = _tenant_key()
    session_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    segment_index: Mapped[int] = mapped_column(Integer, nullable=False)
    start_seq: Mapped[int] = mapped_column(Integer, nullable=False)
    end_seq: Mapped[int] = mapped_column(Integer, nullable=False)
    topic: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    fingerprint: Mapped[str] = mapped_column(Text, nullable=False)
    segmenter: Mapped[str] = mapped_column(Text, nullable=False)
    stage: Mapped[str] = mapped_column(Text, nullable=False, server_default="score")
    score: Mapped[float | None] = mapped_column(Float)
    # {metric: {value, weight, detail}}: every metric's value, not only the total.
    metrics: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default=text("'{}'"))
    rationale: Mapped[str | None] = mapped_column(Text)
    scored_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    extracted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()


class MemorySource(Base):
    """Which segment (and session) a memory was extracted from. A row, not a tag, so merges keep it."""

    __tablename__ = "memory_sources"
    __table_args__ = (
        Index("ix_memory_sources_segment", "segment_id"),
        Index("ix_memory_sources_session", "session_id"),
        _tenant_fk("memory_sources", "memory_id", "memories", "CASCADE"),
        _tenant_fk("memory_sources", "segment_id", "task_segments", "CASCADE"),
        _tenant_fk("memory_sources", "session_id", "sessions", "CASCADE"),
    )

    memory_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    segment_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    session_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    tenant_id: Mapped[uuid.UUID] = _tenant_key()
    # created: the segment's upload made the memory; merged: it merged into an existing one.
    decision: Mapped[str] = mapped_column(Text, nullable=False)
    # Uploads from this segment into the memory; compared with its contributions to see who else wrote it.
    contributions: Mapped[int] = mapped_column(Integer, nullable=False, server_default="1")
    created_at: Mapped[datetime] = _now()


class RawUpload(Base):
    """The raw (redacted) bytes of every ingested file and ingest_text payload, up to the archive cap."""

    __tablename__ = "raw_user_uploads"
    __table_args__ = (
        CheckConstraint("kind IN ('ingest_file','ingest_text')", name="ck_raw_uploads_kind"),
        Index("ix_raw_uploads_tenant_sha", "tenant_id", "sha256"),
        Index("ix_raw_uploads_tenant_created", "tenant_id", "created_at"),
        _tenant_fk("raw_user_uploads", "agent_id", "agents", "SET NULL"),
        _tenant_fk("raw_user_uploads", "session_id", "sessions", "SET NULL"),
    )

    id: Mapped[uuid.UUID] = _uuid_pk()
    tenant_id: Mapped[uuid.UUID] = _tenant_key()
    agent_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    agent_name: Mapped[str] = mapped_column(Text, nullable=False)
    kind: Mapped[str] = mapped_column(Text, nullable=False)
    name: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    size_bytes: Mapped[int] = mapped_column(BigInteger, nullable=False)
    # Digest of the bytes as sent (before redaction): recognises a re-sent file without keeping it.
    sha256: Mapped[str] = mapped_column(Text, nullable=False)
    content: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    redacted_entities: Mapped[dict[str, int]] = mapped_column(
        JSONB, nullable=False, server_default=text("'{}'")
    )
    session_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    created_at: Mapped[datetime] = _now()


class ImportItem(Base):
    """One conversation of an import: parsed and redacted up front, turned into a session in batches."""

    __tablename__ = "import_items"
    __table_args__ = (
        CheckConstraint("status IN ('pending','imported','failed')", name="ck_import_items_status"),
        Index("ix_import_items_job_status", "job_id", "status", "position"),
        _tenant_fk("import_items", "job_id", "import_jobs", "CASCADE"),
        _tenant_fk("import_items", "session_id", "sessions", "SET NULL"),
    )

    id: Mapped[uuid.UUID] = _uuid_pk()
    job_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    tenant_id: Mapped[uuid.UUID] = _tenant_key()
    position: Mapped[int] = mapped_column(Integer, nullable=False)
    external_id: Mapped[str] = mapped_column(Text, nullable=False)
    title: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    messages: Mapped[list[Any]] = mapped_column(JSONB, nullable=False)
    status: Mapped[str] = mapped_column(Text, nullable=False, server_default="pending")
    error: Mapped[str | None] = mapped_column(Text)
    session_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    created_at: Mapped[datetime] = _now()


class ReflectionMark(Base):
    """An agent reflected on a memory (the dream call stops offering it to that agent)."""

    __tablename__ = "reflection_marks"
    __table_args__ = (
        UniqueConstraint("agent_id", "memory_id", "tenant_id", name="uq_reflection_marks_agent_memory"),
        _tenant_fk("reflection_marks", "agent_id", "agents", "CASCADE"),
        _tenant_fk("reflection_marks", "memory_id", "memories", "CASCADE"),
        _tenant_fk("reflection_marks", "reflection_id", "memories", "SET NULL"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    tenant_id: Mapped[uuid.UUID] = _tenant_key()
    agent_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    memory_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    reflection_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    created_at: Mapped[datetime] = _now()


class RuntimeSetting(Base):
    """A setting an admin changed at run time for one tenant (ultron/settings_store.py)."""

    __tablename__ = "runtime_settings"
    __table_args__ = (_tenant_fk("runtime_settings", "updated_by", "agents", "SET NULL"),)

    tenant_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(Text, primary_key=True)
    value: Mapped[Any] = mapped_column(JSONB, nullable=True)
    updated_at: Mapped[datetime] = _now()
    updated_by: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))


class MemoryRipple(Base):
    """Time ripple: using one memory slightly activates memories created within +-48 h of it."""

    __tablename__ = "memory_ripples"
    __table_args__ = (
        Index("ix_memory_ripples_memory_created", "memory_id", "created_at"),
        _tenant_fk("memory_ripples", "memory_id", "memories", "CASCADE"),
        _tenant_fk("memory_ripples", "source_id", "memories", "CASCADE"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    tenant_id: Mapped[uuid.UUID] = _tenant_key()
    memory_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    source_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    weight: Mapped[float] = mapped_column(Float, nullable=False)
    created_at: Mapped[datetime] = _now()


class KnowledgeCluster(Base):
    """A group of semantically close memories: the raw material of one skill (ultron/clusters/)."""

    __tablename__ = "knowledge_clusters"
    # No index holds member_count (it changes at every join), and the table keeps 20 % of each page free
    # (fillfactor 80, migration 0007): a join that leaves `centroid` alone is then a HOT update.
    __table_args__ = (
        Index("ix_knowledge_clusters_tenant", "tenant_id"),
        # The clusters not yet in the HNSW index (migration 0014; ultron/clusters/service.py): the probe's
        # exact pass. Only `centroid` in the predicate: a predicate's column blocks HOT like a key column.
        Index("ix_knowledge_clusters_unindexed", "tenant_id", postgresql_where=text("centroid IS NULL")),
    )

    id: Mapped[uuid.UUID] = _uuid_pk()
    tenant_id: Mapped[uuid.UUID] = _tenant_key()
    topic: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    # HNSW-indexed, normalized: the direction of `mean` as of its last refresh, rewritten only when the
    # mean has drifted from it (ultron/clusters/service.py), so most joins insert no index entry.
    centroid: Mapped[Any] = mapped_column(Vector(), nullable=True)
    # The length of `mean`.
    centroid_norm: Mapped[float] = mapped_column(Float, nullable=False, server_default="0")
    member_count: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    skill_slug: Mapped[str | None] = mapped_column(Text)
    superseded_slugs: Mapped[list[str]] = mapped_column(
        ARRAY(Text), nullable=False, server_default=text("'{}'")
    )
    members_at_last_version: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    failed_attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    next_attempt_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()
    # The members' exact mean vector (not normalized, not indexed): every join and leave updates it, so a
    # member can leave exactly and a join is decided on the exact cosine to it.
    mean: Mapped[Any] = mapped_column(Vector(), nullable=True)


class ClusterMember(Base):
    """A memory's cluster (at most one), with the vector it joined with so leaving is exact."""

    __tablename__ = "cluster_members"
    __table_args__ = (
        Index("ix_cluster_members_cluster_joined", "cluster_id", "joined_at"),
        _tenant_fk("cluster_members", "memory_id", "memories", "CASCADE"),
        _tenant_fk("cluster_members", "cluster_id", "knowledge_clusters", "CASCADE"),
    )

    memory_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    cluster_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    # No key on tenants of its own (migration 0015): the two composite keys above carry the tenant.
    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, nullable=False)
    embedding: Mapped[Any] = mapped_column(Vector(), nullable=True)
    joined_at: Mapped[datetime] = _now()


class ClusterQueueItem(Leased, Base):
    """A shared memory waiting for its cluster: the upload writes the row with the memory, the worker's
    `cluster` step leases rows in `seq` (upload) order, assigns them in batches and deletes them."""

    __tablename__ = "cluster_queue"
    __table_args__ = (
        Index("ix_cluster_queue_ready", "next_attempt_at", "seq", postgresql_where=text("parked_at IS NULL")),
        _tenant_fk("cluster_queue", "memory_id", "memories", "CASCADE"),
    )

    memory_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, nullable=False)
    seq: Mapped[int] = mapped_column(BigInteger, Identity(always=False), nullable=False)


class Skill(Base):
    """One version of a skill; versions are integer columns so 1.10.0 sorts above 1.9.0."""

    __tablename__ = "skills"
    __table_args__ = (
        CheckConstraint("status IN ('active','superseded')", name="ck_skills_status"),
        UniqueConstraint(
            "tenant_id", "slug", "version_major", "version_minor", "version_patch", name="uq_skills_version"
        ),
        Index("ix_skills_tenant_status", "tenant_id", "status"),
        _tenant_fk("skills", "source_cluster_id", "knowledge_clusters", "SET NULL"),
    )

    id: Mapped[uuid.UUID] = _uuid_pk()
    tenant_id: Mapped[uuid.UUID] = _tenant_key()
    slug: Mapped[str] = mapped_column(Text, nullable=False)
    version_major: Mapped[int] = mapped_column(Integer, nullable=False)
    version_minor: Mapped[int] = mapped_column(Integer, nullable=False)
    version_patch: Mapped[int] = mapped_column(Integer, nullable=False)
    name: Mapped[str] = mapped_column(Text, nullable=False)
    description: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    body: Mapped[str] = mapped_column(Text, nullable=False)
    categories: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False, server_default=text("'{}'"))
    embedding: Mapped[Any] = mapped_column(Vector(), nullable=True)
    status: Mapped[str] = mapped_column(Text, nullable=False, server_default="active")
    score: Mapped[float | None] = mapped_column(Float)
    source_cluster_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    # An uploaded SKILL.md's own front matter, written back on export (migration 0008):
    # {"extra": {top-level keys}, "metadata": {metadata keys}} minus what the hub writes itself.
    front_matter: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default=text("'{}'"))
    created_at: Mapped[datetime] = _now()


class EvolutionRecord(Base):
    """One crystallization or recrystallization attempt and its outcome."""

    __tablename__ = "evolution_records"
    __table_args__ = (
        Index("ix_evolution_records_cluster", "cluster_id", "started_at"),
        _tenant_fk("evolution_records", "cluster_id", "knowledge_clusters", "SET NULL"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    tenant_id: Mapped[uuid.UUID] = _tenant_key()
    cluster_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    skill_slug: Mapped[str | None] = mapped_column(Text)
    old_version: Mapped[str | None] = mapped_column(Text)
    new_version: Mapped[str | None] = mapped_column(Text)
    old_score: Mapped[float | None] = mapped_column(Float)
    new_score: Mapped[float | None] = mapped_column(Float)
    status: Mapped[str] = mapped_column(Text, nullable=False)
    trigger: Mapped[str] = mapped_column(Text, nullable=False)
    detail: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    memory_ids: Mapped[list[uuid.UUID]] = mapped_column(
        ARRAY(UUID(as_uuid=True)), nullable=False, server_default=text("'{}'")
    )
    started_at: Mapped[datetime] = _now()
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class SkillFile(Base):
    """A file of a skill version besides its SKILL.md (`scripts/run.sh`, `reference.md`); text only."""

    __tablename__ = "skill_files"
    __table_args__ = (
        UniqueConstraint("skill_id", "path", "tenant_id", name="uq_skill_files_path"),
        _tenant_fk("skill_files", "skill_id", "skills", "CASCADE"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    tenant_id: Mapped[uuid.UUID] = _tenant_key()
    skill_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    path: Mapped[str] = mapped_column(Text, nullable=False)
    content: Mapped[str] = mapped_column(Text, nullable=False)
    sha256: Mapped[str] = mapped_column(Text, nullable=False)
