"""Typed shapes of ingestion and imports (service, HTTP API, SDK); sessions: trajectory/schemas.py."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, Field

from ultron.ingestion.kinds import IMPORT_KINDS as IMPORT_KINDS  # re-exported
from ultron.memory.schemas import UploadResult
from ultron.validation import PathName

ImportKind = Literal["chatgpt", "claude", "deepseek", "markdown", "text"]


@dataclass(frozen=True)
class IngestFile:
    """A file as the client read it: its name (a path on the client's machine) and its bytes."""

    name: str
    content: bytes


class LineProblem(BaseModel):
    line: int
    error: str


class FileResult(BaseModel):
    name: str
    status: Literal["created", "appended", "replaced", "unchanged", "failed"]
    session_id: UUID | None = None
    format: str | None = None
    messages: int = 0
    new_messages: int = 0
    new_segments: int = 0
    archived: bool = False
    malformed_lines: list[LineProblem] = Field(default_factory=list)
    error: str | None = None


class IngestResult(BaseModel):
    total_files: int
    successful: int
    new_segments: int
    results: list[FileResult]
    errors: list[str]


class IngestTextResult(BaseModel):
    memories_extracted: int
    memories_uploaded: int
    memories: list[UploadResult]


class FileContent(BaseModel):
    """One file in a JSON ingest request: text as is, or bytes as base64."""

    name: PathName = Field(..., min_length=1, max_length=1000)
    content: str | None = None
    content_base64: str | None = None


class IngestRequest(BaseModel):
    files: list[FileContent] = Field(..., min_length=1, max_length=10_000)


class IngestTextRequest(BaseModel):
    text: str = Field(..., min_length=1)


class ImportStatus(BaseModel):
    id: UUID
    kind: str
    name: str
    status: str
    total: int
    done: int
    failed: int
    progress: float
    last_error: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None


class ImportStartRequest(BaseModel):
    kind: ImportKind
    name: PathName = Field("import", min_length=1, max_length=1000)
    content: str | None = None
    content_base64: str | None = None


class ReviewItem(BaseModel):
    item_id: UUID
    title: str
    status: str
    session_id: UUID | None
    review_status: str | None
    messages: int
    segments: int
    memory_ids: list[UUID]


class ReviewDecision(BaseModel):
    approve: list[UUID] = Field(default_factory=list, max_length=10_000)
    discard: list[UUID] = Field(default_factory=list, max_length=10_000)


class ReviewOutcome(BaseModel):
    approved: int
    discarded: int
    memories_archived: int
