"""Search filters: which memories a search may return, checked once for REST, the SDK, MCP and the CLI.

AND across fields, OR within a list field. The statement applies them inside every candidate leg (dense
and full-text, sql/memory.sql, lines marked `-- filter:<field>`), so a filtered search still fills its
limit when enough memories pass; a filter is never a cut after the limit.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ultron.errors import ValidationFailed
from ultron.memory.schemas import MemoryType, Scope, _clean_tags
from ultron.validation import text_problem

# Values a list filter may hold; more is a mistake, not a query.
MAX_FILTER_VALUES = 50
MAX_AGENT_NAME_CHARS = 200
FILTER_FIELDS = (
    "types",
    "tags",
    "agents",
    "scopes",
    "thread",
    "occurred_after",
    "occurred_before",
    "created_after",
    "created_before",
)


class SearchFilters(BaseModel):
    """The filters a search takes (all optional; a memory must pass every one given)."""

    model_config = ConfigDict(extra="forbid")

    types: list[MemoryType] | None = Field(
        None, min_length=1, max_length=MAX_FILTER_VALUES, description="Only these memory types (any of them)"
    )
    tags: list[str] | None = Field(
        None, min_length=1, max_length=MAX_FILTER_VALUES, description="Only memories with any of these tags"
    )
    agents: list[str] | None = Field(
        None,
        min_length=1,
        max_length=MAX_FILTER_VALUES,
        description="Only memories uploaded by these agents (names within the caller's tenant)",
    )
    scopes: list[Scope] | None = Field(
        None, min_length=1, max_length=3, description="Only these scopes (shared, private, group)"
    )
    thread: str | None = Field(
        None, min_length=1, max_length=200, description="Only the memories of this conversation or session"
    )
    occurred_after: datetime | None = Field(
        None,
        description="It happened (occurred_at, else created_at) at or after this (ISO 8601; UTC if no zone)",
    )
    occurred_before: datetime | None = Field(None, description="When it happened before this")
    created_after: datetime | None = Field(None, description="Stored at or after this")
    created_before: datetime | None = Field(None, description="Stored before this")

    @field_validator("tags", "agents", "thread", mode="before")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        # a NUL or a lone surrogate cannot reach Postgres: refused here, with the same words as everywhere
        for item in value if isinstance(value, list) else [value]:
            problem = text_problem(item) if isinstance(item, str) else None
            if problem is not None:
                raise ValueError(problem)
        return value

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        cleaned = _clean_tags(value)
        if not cleaned:
            raise ValueError("tags must name at least one non-blank tag")
        return cleaned

    @field_validator("agents")
    @classmethod
    def _agents(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        names = list(dict.fromkeys(v.strip() for v in value if v.strip()))
        if not names:
            raise ValueError("agents must name at least one agent")
        if any(len(n) > MAX_AGENT_NAME_CHARS for n in names):
            raise ValueError(f"an agent name is longer than {MAX_AGENT_NAME_CHARS} characters")
        return names

    @field_validator("occurred_after", "occurred_before", "created_after", "created_before")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        # a bound without a zone is read as UTC (every stored time is): a filter, unlike a stored fact, loses
        # nothing by the assumption
        return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value

    @model_validator(mode="after")
    def _ranges(self) -> SearchFilters:
        for what in ("occurred", "created"):
            after, before = getattr(self, f"{what}_after"), getattr(self, f"{what}_before")
            if after is not None and before is not None and after >= before:
                raise ValueError(f"{what}_after must be earlier than {what}_before")
        return self

    def given(self) -> frozenset[str]:
        """The fields set: the statement keeps only their lines (one prepared plan per combination)."""
        return frozenset(f for f in FILTER_FIELDS if getattr(self, f) is not None)

    def params(self) -> dict[str, Any]:
        """The statement's parameters (`f_<field>`), each field's value or None."""
        return {f"f_{f}": getattr(self, f) for f in FILTER_FIELDS}


NO_FILTERS_PARAMS = {f"f_{f}": None for f in FILTER_FIELDS}


def search_filters(
    value: SearchFilters | dict[str, Any] | None = None, **fields: Any
) -> SearchFilters | None:
    """A SearchFilters from a model, a dict or keyword fields (None values dropped); None when nothing is
    filtered. A bad value raises ValidationFailed (422 over HTTP) with one line naming the field."""
    if isinstance(value, SearchFilters):
        filters = value
    else:
        given = {k: v for k, v in {**(value or {}), **fields}.items() if v is not None}
        if not given:
            return None
        try:
            filters = SearchFilters.model_validate(given)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'filters'}: {e['msg'].removeprefix('Value error, ')}"
                for e in exc.errors()
            )
            raise ValidationFailed(f"invalid filter: {problems}") from None
    return filters if filters.given() else None
