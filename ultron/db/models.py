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
    Index,
    Integer,
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


class Tenant(Base):
    __tablename__ = "tenants"

    id: Mapped[uuid.UUID] = _uuid_pk()
    name: Mapped[str] = mapped_column(Text, nullable=False, unique=True)
    settings: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default=text("'{}'"))
    created_at: Mapped[datetime] = _now()


class Agent(Base):
    __tablename__ = "agents"
    __table_args__ = (UniqueConstraint("tenant_id", "name", name="uq_agents_tenant_name"),)

    id: Mapped[uuid.UUID] = _uuid_pk()
    tenant_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False
    )
    name: Mapped[str] = mapped_column(Text, nullable=False)
    # sha256 of the full key; the prefix lets an operator recognise a key without storing it.
    key_hash: Mapped[str | None] = mapped_column(Text, unique=True)
    key_prefix: Mapped[str | None] = mapped_column(Text)
    groups: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False, server_default=text("'{}'"))
    # Admin agents may edit and delete any memory of their tenant; others only their own.
    is_admin: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=text("false"))
    created_at: Mapped[datetime] = _now()
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_seen_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


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


class Memory(Base):
    __tablename__ = "memories"
    __table_args__ = (
        CheckConstraint(MEMORY_TYPE_CHECK, name="ck_memories_type"),
        CheckConstraint("tier IN ('hot','warm','cold')", name="ck_memories_tier"),
        CheckConstraint("status IN ('active','archived')", name="ck_memories_status"),
        CheckConstraint("scope IN ('shared','private','group')", name="ck_memories_scope"),
        Index("ix_memories_tenant_status_tier", "tenant_id", "status", "tier"),
        Index("ix_memories_tenant_type_status", "tenant_id", "memory_type", "status"),
        Index("ix_memories_tenant_hash", "tenant_id", "content_hash"),
        Index("ix_memories_tenant_created", "tenant_id", "created_at"),
        Index(
            "ix_memories_search_tsv",
            "search_tsv",
            postgresql_using="gin",
            postgresql_with={"fastupdate": "off"},
        ),
    )

    id: Mapped[uuid.UUID] = _uuid_pk()
    tenant_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False
    )
    agent_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("agents.id", ondelete="SET NULL")
    )
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
    hit_count: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    last_hit_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Companion features (scope, pinning, emotion) are columns from day one so later work needs no rewrite.
    scope: Mapped[str] = mapped_column(Text, nullable=False, server_default="shared")
    group_name: Mapped[str | None] = mapped_column(Text)
    pinned: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=text("false"))
    valence: Mapped[float | None] = mapped_column(Float)
    arousal: Mapped[float | None] = mapped_column(Float)
    redacted_entities: Mapped[dict[str, int]] = mapped_column(
        JSONB, nullable=False, server_default=text("'{}'")
    )
    merged_into_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("memories.id", ondelete="SET NULL")
    )
    archived_reason: Mapped[str | None] = mapped_column(Text)
    archived_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()


class MemoryContribution(Base):
    """Every upload that created or merged into a memory, with its original (redacted) text."""

    __tablename__ = "memory_contributions"
    __table_args__ = (Index("ix_contributions_memory", "memory_id", "created_at"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    tenant_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False
    )
    memory_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("memories.id", ondelete="CASCADE"), nullable=False
    )
    agent_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("agents.id", ondelete="SET NULL")
    )
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
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    tenant_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False
    )
    memory_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("memories.id", ondelete="CASCADE"), nullable=False
    )
    agent_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("agents.id", ondelete="SET NULL")
    )
    signal: Mapped[str] = mapped_column(Text, nullable=False)
    weight: Mapped[int] = mapped_column(Integer, nullable=False)
    counted: Mapped[bool] = mapped_column(Boolean, nullable=False)
    created_at: Mapped[datetime] = _now()


class ActivityEvent(Base):
    """Uploads, merges and searches over time (the dashboard's charts and `/metrics` read these)."""

    __tablename__ = "activity_events"
    __table_args__ = (Index("ix_activity_tenant_kind_created", "tenant_id", "kind", "created_at"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    tenant_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False
    )
    agent_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("agents.id", ondelete="SET NULL")
    )
    kind: Mapped[str] = mapped_column(Text, nullable=False)
    memory_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    detail: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default=text("'{}'"))
    created_at: Mapped[datetime] = _now()


class ReflectionMark(Base):
    """An agent reflected on a memory (the dream call stops offering it to that agent)."""

    __tablename__ = "reflection_marks"
    __table_args__ = (UniqueConstraint("agent_id", "memory_id", name="uq_reflection_marks_agent_memory"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    tenant_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False
    )
    agent_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("agents.id", ondelete="CASCADE"), nullable=False
    )
    memory_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("memories.id", ondelete="CASCADE"), nullable=False
    )
    reflection_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("memories.id", ondelete="SET NULL")
    )
    created_at: Mapped[datetime] = _now()


class MemoryRipple(Base):
    """Time ripple: using one memory slightly activates memories created within +-48 h of it."""

    __tablename__ = "memory_ripples"
    __table_args__ = (Index("ix_memory_ripples_memory_created", "memory_id", "created_at"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    tenant_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False
    )
    memory_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("memories.id", ondelete="CASCADE"), nullable=False
    )
    source_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("memories.id", ondelete="CASCADE"), nullable=False
    )
    weight: Mapped[float] = mapped_column(Float, nullable=False)
    created_at: Mapped[datetime] = _now()
