"""Typed shapes of memories, shared by the service, the HTTP API and both SDK clients."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ultron.validation import INT4_MAX

Tier = Literal["hot", "warm", "cold"]
Status = Literal["active", "archived"]
Scope = Literal["shared", "private", "group"]
DetailLevel = Literal["l0", "l1"]
MemoryType = Literal["error", "security", "correction", "pattern", "preference", "life", "reflection"]

MAX_TAG_CHARS = 64


def _clean_tags(tags: list[str]) -> list[str]:
    out: dict[str, None] = {}
    for tag in tags:
        tag = tag.strip()
        if not tag:
            continue
        if len(tag) > MAX_TAG_CHARS:
            raise ValueError(f"a tag is longer than {MAX_TAG_CHARS} characters")
        out.setdefault(tag, None)
    return list(out)


class UploadRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str = Field(..., description="What happened / what was learned (required)")
    context: str = Field("", description="Where it happened: task, environment, versions")
    resolution: str = Field("", description="What fixed it or what to do")
    tags: list[str] = Field(default_factory=list, max_length=50)
    scope: Scope = Field("shared", description="shared with the tenant, private to the agent, or a group")
    group: str | None = Field(None, max_length=100, description="Group name when scope is 'group'")
    valence: float | None = Field(None, ge=-1, le=1, description="Emotional valence, -1 (negative) to 1")
    arousal: float | None = Field(None, ge=0, le=1, description="Emotional arousal, 0 (calm) to 1 (intense)")
    thread: str | None = Field(
        None, min_length=1, max_length=200, description="The conversation or session this memory comes from"
    )
    position: int | None = Field(
        None, ge=0, le=INT4_MAX, description="Its place in the thread (turn number, at most 2**31 - 1)"
    )
    occurred_at: datetime | None = Field(
        None, description="When what it tells happened (ISO 8601, with a timezone); distinct from created_at"
    )

    @field_validator("occurred_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("occurred_at needs a timezone (e.g. 2026-03-14T19:00:00Z)")
        return value

    importance: int | None = Field(None, ge=1, le=10, description="1 (trivial) to 10 (vital); default 5")

    @field_validator("content")
    @classmethod
    def _content_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("content must not be empty")
        return value

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: list[str]) -> list[str]:
        return _clean_tags(value)


class MemoryPatch(BaseModel):
    """Fields an agent may edit. Changing text re-redacts, re-embeds and re-summarizes."""

    model_config = ConfigDict(extra="forbid")

    content: str | None = None
    context: str | None = None
    resolution: str | None = None
    tags: list[str] | None = Field(None, max_length=50)
    tier: Tier | None = None
    status: Status | None = None
    pinned: bool | None = None
    valence: float | None = Field(None, ge=-1, le=1)
    arousal: float | None = Field(None, ge=0, le=1)
    importance: int | None = Field(None, ge=1, le=10)

    @field_validator("content")
    @classmethod
    def _content_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("content must not be empty")
        return value

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else _clean_tags(value)


class MemoryRecord(BaseModel):
    """A memory. In l0/l1 search projections the full-text fields are blanked."""

    id: UUID
    memory_type: MemoryType
    content: str
    context: str
    resolution: str
    tags: list[str]
    summary_l0: str
    overview_l1: str
    tier: Tier
    status: Status
    scope: Scope
    group: str | None = None
    pinned: bool = False
    hit_count: int
    last_hit_at: datetime | None
    created_at: datetime
    updated_at: datetime
    agent: str | None = Field(None, description="Name of the agent that first contributed it")
    redacted_entities: dict[str, int] = Field(default_factory=dict)
    contributions: int = Field(1, description="Uploads merged into this memory, the first included")
    valence: float | None = Field(None, description="Emotional valence -1..1, when given or inferred")
    arousal: float | None = Field(None, description="Emotional arousal 0..1, when given or inferred")
    thread: str | None = Field(None, description="The conversation or session it comes from")
    position: int | None = Field(None, description="Its place in the thread")
    occurred_at: datetime | None = Field(None, description="When what it tells happened")
    importance: int = Field(5, description="1 (trivial) to 10 (vital)")
    resolved_at: datetime | None = Field(None, description="When it was resolved: it then sinks in ranking")
    superseded_by: UUID | None = Field(
        None,
        description="The newer memory that updates this one (same subject, changed value): it ranks first",
    )


class ScoreComponents(BaseModel):
    """Every factor of a search score (`explain=true`)."""

    vector_similarity: float = Field(..., description="Cosine to the query (dense leg)")
    vector_rank: int = Field(0, description="Rank among the candidates by cosine (1 = nearest)")
    text_rank: float = Field(..., description="Lexical score: BM25-like term IDF plus phrase credit")
    text_rank_position: int | None = Field(None, description="Rank among the candidates by text_rank")
    text_coverage: float = Field(0.0, description="Share of the query's term IDF this memory matches")
    content_coverage: float = Field(
        0.0,
        description="Share of the IDF of the query's terms beyond the names it mentions this memory matches",
    )
    fusion: str = Field("rrf", description="How the legs were fused: rrf or weighted")
    fused: float = Field(0.0, description="The fused score of the two legs, 0..1")
    neighbour_credit: float = Field(0.0, description="Credit from the adjacent turn of its thread")
    time_match: bool = Field(False, description="occurred_at falls in the dates the query names")
    phrase_match: bool = Field(False, description="Holds the query's words in order (+ phrase_match_boost)")
    dense_z: float = Field(
        0.0, description="Cosine in standard deviations above the mean of the dense leg's candidates"
    )
    calibrated_relevance: float = Field(
        0.0, description="Relevance on the model-independent 0..1 scale the confidence floor applies to"
    )
    relevance: float
    tier_boost: float
    hotness: float
    days_since_hit: float
    decay_weight: float
    from_vector: bool
    from_text: bool
    score: float
    # Companion signals (ultron/companion/): present only when they applied to this result.
    resonance: float | None = Field(None, description="Emotional closeness to the asked mood, 0..1")
    ripple: float | None = Field(None, description="Time-ripple activation added as score x (1 + ripple)")
    ripple_count: int | None = Field(None, description="Recent uses of neighbours that rippled here")
    serendipity: bool = Field(False, description="Surfaced at random because the search found little")
    matched_contribution: int | None = Field(
        None,
        description="Id of the contribution whose text matched most query terms (merged uploads)",
    )
    importance: float | None = Field(None, description="Factor of the memory's importance (5 is 1.0)")
    resolved: float | None = Field(None, description="Factor a resolved memory is sunk by")
    urgency: float | None = Field(None, description="Factor high arousal adds")
    freshness: float | None = Field(None, description="Factor a memory gets in its first hours")
    question: float | None = Field(
        None, description="Factor a memory that only asks is sunk by (a question with no resolution)"
    )
    reply_to: UUID | None = Field(
        None,
        description="The memory that only asks whose place this reply took (the turn before it in its "
        "thread); a reply brought in so carries that question's components",
    )
    superseded_by: UUID | None = Field(
        None, description="This memory is superseded by that newer one: its score was x superseded_weight"
    )
    supersedes: UUID | None = Field(
        None, description="The superseded memory this current one was ranked above (brought in for it)"
    )
    entity: float | None = Field(None, description="Factor for people/places/projects shared with the query")
    entities: list[str] | None = Field(None, description="The entities this memory shares with the query")


class SearchResult(BaseModel):
    record: MemoryRecord
    similarity_score: float = Field(
        ..., description="Calibrated relevance 0..1: the scale the confidence floor applies to"
    )
    score: float = Field(..., description="Final ranking score")
    explain: ScoreComponents | None = None
    confidence: Literal["high", "low"] = Field(
        "high",
        description="low: probably unrelated to the query (below the model's relevance floor), or a memory "
        "that only asks (a question, no resolution)",
    )
    serendipity: bool = Field(False, description="A low-weight old memory surfaced at random, not a match")


class UploadResult(BaseModel):
    record: MemoryRecord
    decision: Literal["created", "merged", "merged_judge"]
    similarity: float | None = Field(None, description="Cosine to the memory it merged into")
    merged_text: bool = Field(False, description="Whether the merge changed the stored text")


MAX_BATCH_ITEMS = 500


class UploadBatchRequest(BaseModel):
    """Many uploads in one call. Each item is checked as a single upload is; a bad item is refused on its
    own (its result says why) and the others are stored."""

    model_config = ConfigDict(extra="forbid")

    items: list[dict[str, Any]] = Field(
        ...,
        min_length=1,
        max_length=MAX_BATCH_ITEMS,
        description=f"Up to {MAX_BATCH_ITEMS} uploads, each with the fields of POST /memories/upload",
    )


class BatchItemResult(BaseModel):
    """What became of one item of a batch, in the batch's order."""

    index: int = Field(..., description="Position of the item in the batch")
    decision: Literal["created", "merged", "merged_judge", "refused"]
    memory_id: UUID | None = Field(None, description="The memory it created or merged into")
    memory_type: MemoryType | None = None
    similarity: float | None = Field(None, description="Cosine to the memory it merged into")
    merged_text: bool = Field(False, description="Whether the merge changed the stored text")
    reason: str | None = Field(None, description="Why the item was refused")


class UploadBatchResult(BaseModel):
    created: int
    merged: int
    refused: int
    results: list[BatchItemResult]


class MemoryStats(BaseModel):
    total: int
    by_tier: dict[str, int]
    by_type: dict[str, int]
    by_status: dict[str, int]
    by_scope: dict[str, int]
    redacted_entities: dict[str, int]
    contributions: int
    embedding_model: str | None


class Contribution(BaseModel):
    id: int = Field(..., description="Stable id of this upload's contribution (for split)")
    agent: str | None
    decision: str
    similarity: float | None
    content: str
    context: str
    resolution: str
    tags: list[str]
    created_at: datetime


class SplitResult(BaseModel):
    """A contribution split out of a memory: the memory as it is now, and the new memory."""

    memory: MemoryRecord
    split: MemoryRecord
    contribution_id: int
