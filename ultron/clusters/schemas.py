"""Typed shapes of the knowledge-cluster views (`GET /clusters`, `GET /clusters/{id}`) and of a skill's
summary, which a cluster's detail shows (ultron/skills/ builds on it; clusters never import skills)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, Field


# The Skill Hub's catalogue entry, here because a cluster's detail shows its skill (ultron/skills/schemas.py
# re-exports it): skills import clusters, never the reverse.
class SkillSummary(BaseModel):
    slug: str
    name: str
    description: str
    version: str
    categories: list[str]
    score: float | None
    status: Literal["active", "superseded"]
    source_cluster_id: UUID | None = Field(None, description="The cluster it was crystallized from")
    created_at: datetime


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
