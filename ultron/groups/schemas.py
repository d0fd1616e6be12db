"""Request and response shapes of the group endpoints."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

GROUP_NAME = r"^[\w.@-]{1,100}$"


class GroupCreate(BaseModel):
    name: str = Field(..., pattern=GROUP_NAME, description="Letters, digits, '_', '.', '@', '-'; 1-100")


class GroupInfo(BaseModel):
    name: str
    members: list[str] = Field(description="Names of the member agents, sorted")
    memories: int = Field(description="Memories (any status) stored with this group's scope")
    created_at: datetime
