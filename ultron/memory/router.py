"""HTTP endpoints of memories: upload (one or a batch), search, details, stats, get, contributions,
split, thread, edit, delete.

Handlers are plain `def`: FastAPI runs them in its threadpool, so database, embedding and LLM calls
never block the event loop. Each request authenticates in one short read-only transaction and does its
work in one more; no transaction is open while a provider (embedding, LLM) is called (docs/security.md).
"""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Response
from pydantic import BaseModel, ConfigDict, Field

from ultron.memory.batch import check_batch_cost, check_items, summarize
from ultron.memory.filters import FILTER_FIELDS, SearchFilters, search_filters
from ultron.memory.prefix import ids_with_prefix
from ultron.memory.schemas import (
    Contribution,
    DetailLevel,
    MemoryPatch,
    MemoryRecord,
    MemoryStats,
    SearchResult,
    SplitResult,
    Tier,
    UploadBatchRequest,
    UploadBatchResult,
    UploadRequest,
    UploadResult,
)
from ultron.memory.service import MemoryService
from ultron.routing.deps import SettingsDep, UnitDep, hub_part
from ultron.routing.errors import ERROR_RESPONSES
from ultron.tenancy import Actor

MemoryDep = Annotated[MemoryService, Depends(hub_part("memory"))]


class SearchRequest(SearchFilters):
    """A search and its filters (AND across fields, OR within a list; docs/ranking.md)."""

    model_config = ConfigDict(extra="ignore")

    query: str = Field(..., min_length=1, max_length=4000)
    tier: Tier | None = None
    limit: int | None = Field(None, ge=1, le=200)
    detail_level: DetailLevel = "l0"
    explain: bool = False
    valence: float | None = Field(None, ge=-1, le=1, description="Mood to resonate with (companion)")
    arousal: float | None = Field(None, ge=0, le=1, description="Arousal to resonate with (companion)")
    serendipity: bool | None = Field(None, description="Surface old memories when little is found")
    min_relevance: float | None = Field(
        None,
        ge=-1,
        le=1,
        description="Relevance floor for this search (default: the model's; docs/ranking.md)",
    )


class SearchResponse(BaseModel):
    count: int
    results: list[SearchResult]


class DetailsRequest(BaseModel):
    ids: list[UUID] = Field(..., min_length=1, max_length=100)


class DetailsResponse(BaseModel):
    count: int
    records: list[MemoryRecord]


router = APIRouter(prefix="/memories", tags=["memories"], responses=ERROR_RESPONSES)


@router.post(
    "/upload",
    response_model=UploadResult,
    status_code=200,
    responses={201: {"model": UploadResult, "description": "Created: a new memory (200: merged)"}},
)
def upload_memory(body: UploadRequest, response: Response, unit: UnitDep, memory: MemoryDep) -> UploadResult:
    """Store an experience. The hub infers its type, summarizes, embeds and merges near duplicates:
    201 with a new memory, 200 when merged into an existing one."""

    def prepare(actor: Actor) -> Any:
        if not memory.policy_read(actor.tenant_id):  # once read, the upload's transaction re-checks it
            with unit.session() as session:  # the tenant's redaction policy, in a short read of its own
                memory.load_tenant_policy(session, actor.tenant_id)
        return memory.prepare(body, actor)

    result = unit.prepared(prepare, lambda s, a, prepared: memory.upload(s, a, body, prepared=prepared))
    response.status_code = 201 if result.decision == "created" else 200
    return result


@router.post("/upload-batch", response_model=UploadBatchResult)
def upload_memories_batch(
    body: UploadBatchRequest, unit: UnitDep, memory: MemoryDep, settings: SettingsDep
) -> UploadBatchResult:
    """Up to 500 uploads in one call, each checked, redacted, typed and de-duplicated exactly as a single
    upload is (an item that repeats an earlier one of the batch merges into it). Results come in the
    batch's order; an item that fails its checks is refused with the reason and the others are stored."""
    reqs = check_items(body.items)
    check_batch_cost(reqs, settings.max_batch_chars)

    def prepare(actor: Actor) -> Any:
        with unit.session() as session:  # the tenant's redaction policy, in a short read of its own
            memory.load_tenant_policy(session, actor.tenant_id)
        return memory.prepare_batch(reqs, actor)

    results = unit.prepared(prepare, lambda s, a, prepared: memory.upload_batch(s, a, reqs, prepared))
    return summarize(results)


@router.post("/search", response_model=SearchResponse)
def search_memories(body: SearchRequest, unit: UnitDep, memory: MemoryDep) -> SearchResponse:
    """Hybrid (vector + full-text) search; each returned memory counts one hit. Results come confident
    first, then those flagged `confidence: "low"`, each group by score."""
    results = unit.read(
        lambda s, a: memory.search(
            s,
            a,
            body.query,
            tier=body.tier,
            limit=body.limit,
            detail_level=body.detail_level,
            explain=body.explain,
            valence=body.valence,
            arousal=body.arousal,
            serendipity=body.serendipity,
            min_relevance=body.min_relevance,
            filters=search_filters(**{f: getattr(body, f) for f in FILTER_FIELDS}),
        )
    )
    return SearchResponse(count=len(results), results=results)


@router.post("/details", response_model=DetailsResponse)
def memory_details(body: DetailsRequest, unit: UnitDep, memory: MemoryDep) -> DetailsResponse:
    """Full records; each counts two hits (the agent chose to read it)."""
    records = unit.write(lambda s, a: memory.details(s, a, body.ids))
    return DetailsResponse(count=len(records), records=records)


@router.get("/stats", response_model=MemoryStats)
def memory_stats(unit: UnitDep, memory: MemoryDep) -> MemoryStats:
    return unit.read(memory.stats)


@router.get("/by-prefix/{prefix}", response_model=list[UUID])
def memory_ids_by_prefix(prefix: str, unit: UnitDep) -> list[UUID]:
    """Ids (at most 10) of the memories you may see that start with `prefix` (6+ hex characters): how a
    short id (`dc066691`) becomes a full one. More than one means the prefix is ambiguous."""
    return unit.read(lambda s, a: ids_with_prefix(s, a, prefix))


@router.get("/{memory_id}", response_model=MemoryRecord)
def get_memory(memory_id: UUID, unit: UnitDep, memory: MemoryDep) -> MemoryRecord:
    """One memory in full, without counting a hit."""
    return unit.read(lambda s, a: memory.get(s, a, memory_id))


@router.get("/{memory_id}/contributions", response_model=list[Contribution])
def memory_contributions(memory_id: UUID, unit: UnitDep, memory: MemoryDep) -> list[Contribution]:
    """Every upload merged into this memory: who sent what, when."""
    return unit.read(lambda s, a: memory.contributions(s, a, memory_id))


class SplitRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    contribution_id: int = Field(
        ..., description="Id of a merged contribution (GET /memories/{id}/contributions)"
    )


@router.post("/{memory_id}/split", response_model=SplitResult)
def split_memory(memory_id: UUID, body: SplitRequest, unit: UnitDep, memory: MemoryDep) -> SplitResult:
    """Undo a merge: the contribution becomes its own memory again (its contributor, the memory's owner or
    an admin; else 403). Not out of an archived memory (409)."""
    return unit.write(lambda s, a: memory.split(s, a, memory_id, body.contribution_id))


@router.delete("/{memory_id}/contributions/{contribution_id}", status_code=204)
def purge_contribution(memory_id: UUID, contribution_id: int, unit: UnitDep, memory: MemoryDep) -> Response:
    """Take a merged upload's text out of a memory: its contributor or an admin deletes it; the memory's
    owner moves it to a memory of its contributor's own (a split). The memory's own upload: 422 (PATCH it)."""
    unit.write(lambda s, a: memory.purge_contribution(s, a, memory_id, contribution_id))
    return Response(status_code=204)


@router.get("/{memory_id}/thread", response_model=list[MemoryRecord])
def memory_thread(memory_id: UUID, unit: UnitDep, memory: MemoryDep, span: int = 2) -> list[MemoryRecord]:
    """The memory with its neighbouring turns of the same thread (position within span), in order."""
    return unit.read(lambda s, a: memory.thread(s, a, memory_id, span))


@router.patch("/{memory_id}", response_model=MemoryRecord)
def edit_memory(memory_id: UUID, body: MemoryPatch, unit: UnitDep, memory: MemoryDep) -> MemoryRecord:
    return unit.write(lambda s, a: memory.edit(s, a, memory_id, body))


@router.delete("/{memory_id}", status_code=204)
def delete_memory(memory_id: UUID, unit: UnitDep, memory: MemoryDep) -> Response:
    """Forget a memory (its contributor or an admin). Other agents' uploads merged into it are kept: each
    becomes a memory of its own agent, as a split would make it."""
    unit.write(lambda s, a: memory.delete(s, a, memory_id))
    return Response(status_code=204)
