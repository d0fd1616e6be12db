"""Typed shapes of the Skill Hub's HTTP API and SDK."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from ultron.clusters.schemas import SkillSummary as SkillSummary  # re-exported: defined with the clusters

SkillStatusFilter = Literal["active", "superseded", "all"]


class SkillSearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(..., min_length=1, max_length=2000)
    limit: int = Field(5, ge=1, le=50)


class SkillHit(BaseModel):
    """The latest active version of a skill, with its cosine to the query."""

    slug: str
    name: str
    description: str
    version: str
    categories: list[str]
    similarity: float
    score: float | None = Field(None, description="The verifier's score; none for uploaded skills")


class SkillDetail(SkillSummary):
    versions: list[str] = Field(..., description="Every version of the slug, newest first")
    body: str = Field(..., description="The SKILL.md body (Markdown, no front matter)")
    files: list[str] = Field(default_factory=list, description="Paths of the files besides SKILL.md")


class EvolutionEntry(BaseModel):
    """One crystallization, recrystallization or upload, and its outcome."""

    id: int
    cluster_id: UUID | None
    skill_slug: str | None
    trigger: str = Field(..., description="crystallize, recrystallize or upload")
    status: str = Field(..., description="published, quality_failed, verify_failed, reverted or running")
    old_version: str | None
    new_version: str | None
    old_score: float | None
    new_score: float | None
    detail: str
    memory_ids: list[UUID] = Field(..., description="The members shown to the synthesizer")
    started_at: datetime
    finished_at: datetime | None


class SkillUpload(BaseModel):
    """An existing skill folder sent by content: `{"SKILL.md": "...", "scripts/run.sh": "..."}`."""

    model_config = ConfigDict(extra="forbid")

    files: dict[str, str] = Field(
        ..., description="Relative path -> text; SKILL.md at the root, no '..', no hidden segments"
    )


class SkillUploadResult(BaseModel):
    skill: SkillDetail
    previous_version: str | None = Field(None, description="The version this upload follows, if any")
    redacted: dict[str, int] = Field(default_factory=dict, description="Entities redacted, by type")
