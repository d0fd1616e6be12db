"""Typed shapes of sessions, their messages and their task segments (views, HTTP API and SDK)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel, Field


class SessionInfo(BaseModel):
    id: UUID
    agent: str
    source: str
    format: str
    message_count: int
    metadata: dict[str, Any]
    import_id: UUID | None
    review_status: str
    needs_segmentation: bool
    attempts: int
    last_error: str | None
    parked: bool
    started_at: datetime | None
    ended_at: datetime | None
    segmented_at: datetime | None
    created_at: datetime
    updated_at: datetime
    segments: int = 0
    memories: int = 0


class SegmentInfo(BaseModel):
    id: UUID
    session_id: UUID
    segment_index: int
    start_seq: int
    end_seq: int
    topic: str
    fingerprint: str
    segmenter: str
    stage: str
    score: float | None
    metrics: dict[str, Any]
    rationale: str | None
    attempts: int
    last_error: str | None
    scored_at: datetime | None
    extracted_at: datetime | None
    created_at: datetime
    memory_ids: list[UUID] = Field(default_factory=list)


class MessageInfo(BaseModel):
    seq: int
    role: str
    content: str
    reasoning: str | None = None
    tool_calls: list[Any] | None = None
    tool_call_id: str | None = None
    is_error: bool | None = None
    sent_at: datetime | None = None


class SessionDetail(BaseModel):
    session: SessionInfo
    segments: list[SegmentInfo]
