"""What the vault endpoints send and take (light: the SDK loads it at start-up)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ultron.vault.files import IMPORT_CHUNK, MAX_FILE_BYTES


class VaultFile(BaseModel):
    path: str = Field(..., max_length=1000, description="Path inside the vault, e.g. error/slug-<id>.md")
    text: str = Field(..., max_length=MAX_FILE_BYTES)


class ExportRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    after: str | None = Field(None, description="The previous page's `next`; none for the first page")


class ExportPage(BaseModel):
    files: list[VaultFile]
    next: str | None = Field(None, description="Pass as `after` for the next page; null on the last")


class ImportRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    files: list[VaultFile] = Field(..., max_length=IMPORT_CHUNK)


class ImportResult(BaseModel):
    created: int
    updated: int
    skipped: list[str]
