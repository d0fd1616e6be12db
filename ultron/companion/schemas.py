"""Typed shapes of the brief, the reflect ("dream") call and reflections."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ultron.memory.schemas import MemoryRecord, Scope, _clean_tags


class BriefItem(BaseModel):
    kind: Literal["memory", "skill"]
    id: UUID | str
    section: Literal["pinned", "relevant", "personal", "hot", "skill"]
    reason: str = Field(..., description="Why this item is in the brief")
    memory_type: str | None = None
    text: str = Field(..., description="The line the brief shows for it")
    tokens: int
    similarity: float | None = Field(None, description="Cosine to the task hint, when one was given")
    relevance: float | None = Field(
        None, description="Calibrated relevance 0..1 to the task (for a memory its search found)"
    )
    confidence: Literal["high", "low"] | None = Field(
        None, description="With a task: high when the task's search is confident the memory bears on it"
    )
    slug: str | None = Field(None, description="A skill's slug: load it with get_skill / GET /skills/{slug}")
    version: str | None = Field(None, description="A skill's version (MAJOR.MINOR.PATCH)")
    name: str | None = Field(None, description="A skill's name")
    description: str | None = Field(None, description="A skill's description (when to use it)")


class PinSuggestion(BaseModel):
    """Three or more similar reflections: the lesson keeps coming back, so pinning it is suggested."""

    id: UUID = Field(..., description="The reflection to pin (the one closest to the most others)")
    summary: str
    similar_ids: list[UUID] = Field(..., description="The other reflections that repeat it")
    reason: str


class Brief(BaseModel):
    """What an agent should know at session start: pinned, personal, HOT, then skills; within budget."""

    task: str | None
    max_tokens: int
    tokens: int = Field(..., description="Token estimate of `text` (ultron.providers.tokens)")
    items: list[BriefItem]
    omitted: int = Field(0, description="Candidates left out because the budget was spent")
    skills_available: bool = Field(
        False, description="Whether the hub has skills (a skill source is registered)"
    )
    text: str
    suggestions: list[PinSuggestion] = Field(
        default_factory=list, description="Reflections that repeat (3+ similar): pin them"
    )


class DreamItem(BaseModel):
    record: MemoryRecord
    prompt: str = Field(..., description="A question to reflect on about this memory")


class Dream(BaseModel):
    """Recent memories this agent has not reflected on, with reflection prompts."""

    items: list[DreamItem]
    guidance: list[str]
    reflections: int = Field(..., description="Reflections this agent has written so far")


class ReflectionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str = Field(..., min_length=1, description="The lesson, in the agent's own words")
    context: str = ""
    resolution: str = ""
    tags: list[str] = Field(default_factory=list, max_length=50)
    source_ids: list[UUID] = Field(
        default_factory=list, max_length=100, description="Memories reflected on (marked as such)"
    )
    scope: Scope = Field("private", description="Reflections are the agent's own unless shared")
    group: str | None = Field(None, max_length=100)
    valence: float | None = Field(None, ge=-1, le=1)
    arousal: float | None = Field(None, ge=0, le=1)

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("content must not be empty")
        return value

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: list[str]) -> list[str]:
        return _clean_tags(value)


class ReflectionResult(BaseModel):
    record: MemoryRecord
    marked: list[UUID] = Field(..., description="Source memories newly marked as reflected on")
