"""Typed shapes of the knowledge-cluster views (`GET /clusters`, `GET /clusters/{id}`)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, Field

from ultron.skills.schemas import SkillSummary


class ClusterSummary(BaseModel):
    id: UUID
    topic: str
    member_count: int
    skill_slug: str | None
    readiness: Literal["crystallize", "recrystallize"] | None = Field(
        None, description="What the next evolution cycle would do with it (none: nothing, or backing off)"
    )
    created_at: datetime
    updated_at: datetime


class ClusterMemberInfo(BaseModel):
    id: UUID
    summary: str
    memory_type: str
    similarity: float = Field(..., description="Cosine of the member to the cluster's centroid")


class ClusterDetail(ClusterSummary):
    members: list[ClusterMemberInfo] = Field(
        ..., description="A bounded sample you may see, closest to the centroid first"
    )
    superseded_slugs: list[str]
    members_at_last_version: int
    skill: SkillSummary | None = Field(None, description="The latest version of the cluster's skill")
