"""HTTP endpoints: ingest files and text, imports and their review (sessions and segments:
ultron/trajectory/router.py).

`POST /ingest` and `POST /imports` read the body on the event loop (multipart or JSON) and do all
database and model work in the threadpool, one transaction per request.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import threading
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from ultron.errors import PayloadTooLarge, ValidationFailed
from ultron.ingestion.imports import ImportService
from ultron.ingestion.schemas import (
    ImportStartRequest,
    ImportStatus,
    IngestFile,
    IngestRequest,
    IngestResult,
    IngestTextRequest,
    IngestTextResult,
    ReviewDecision,
    ReviewItem,
    ReviewOutcome,
)
from ultron.ingestion.service import IngestionService
from ultron.routing.deps import SettingsDep, UnitDep, hub_part
from ultron.routing.errors import ERROR_RESPONSES
from ultron.tenancy import Actor
from ultron.validation import check_path

log = logging.getLogger(__name__)

router = APIRouter(tags=["ingestion"], responses=ERROR_RESPONSES)
imports = APIRouter(tags=["ingestion"], responses=ERROR_RESPONSES)  # included after trajectory's routes
MAX_FORM_FILES = 10_000
IngestionDep = Annotated[IngestionService, Depends(hub_part("ingestion"))]


async def _import_service(request: Request) -> ImportService:
    return request.app.state.hub.ingestion.imports  # type: ignore[no-any-return]


ImportsDep = Annotated[ImportService, Depends(_import_service)]


def _decode(name: str, text: str | None, b64: str | None) -> bytes:
    if (text is None) == (b64 is None):
        raise ValidationFailed(f"{name}: give exactly one of content or content_base64")
    if text is not None:
        return text.encode("utf-8")
    try:
        return base64.b64decode(b64 or "", validate=True)
    except (binascii.Error, ValueError):
        raise ValidationFailed(f"{name}: content_base64 is not valid base64") from None


async def _json_model(request: Request, model: type[BaseModel]) -> Any:
    try:
        return model.model_validate(json.loads(await request.body()))
    except ValueError as exc:
        if isinstance(exc, ValidationError):
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ValidationFailed(problems) from None
        raise ValidationFailed(f"request body is not valid JSON: {exc}") from None


def _is_form(request: Request) -> bool:
    return request.headers.get("content-type", "").startswith("multipart/form-data")


@router.post("/ingest", response_model=IngestResult)
async def ingest(request: Request, unit: UnitDep, ingestion: IngestionDep) -> IngestResult:
    """Session files as multipart `files` parts, or JSON `{files: [{name, content | content_base64}]}`.

    The client reads its own files and sends their contents: the hub never opens a path it is given."""
    if _is_form(request):
        form = await request.form(max_files=MAX_FORM_FILES)
        parts = [p for key in ("files", "file") for p in form.getlist(key) if isinstance(p, UploadFile)]
        names = [check_path(p.filename or f"upload-{i}.jsonl", "file name") for i, p in enumerate(parts)]
        files = [IngestFile(name, await p.read()) for name, p in zip(names, parts, strict=True)]
        await form.close()
    else:
        body: IngestRequest = await _json_model(request, IngestRequest)
        files = [IngestFile(f.name, _decode(f.name, f.content, f.content_base64)) for f in body.files]
    if not files:
        raise ValidationFailed("no files in the request")
    return await run_in_threadpool(unit.write, lambda s, a: ingestion.ingest_files(s, a, files))


@router.post("/ingest/text", response_model=IngestTextResult)
def ingest_text(body: IngestTextRequest, unit: UnitDep, ingestion: IngestionDep) -> IngestTextResult:
    """Extract memories from free text (main LLM; offline: the heuristic extractor) and upload each."""
    return unit.write(lambda s, a: ingestion.ingest_text(s, a, body.text))


# --- imports ----------------------------------------------------------------------------------------


def _run_in_background(imports: ImportService, actor: Actor, job_id: UUID) -> None:
    """Advance an import batch by batch off the request; its state is in the database, so a restart or a
    pause loses nothing (resume starts a new runner)."""

    def run() -> None:
        try:
            imports.run(actor, job_id)
        except Exception:  # noqa: BLE001 - a background thread has nobody to raise to
            log.exception("import %s stopped with an error; resume it to continue", job_id)

    threading.Thread(target=run, name=f"import-{job_id}", daemon=True).start()


@imports.post("/imports", response_model=ImportStatus, status_code=202)
async def start_import(
    request: Request, unit: UnitDep, service: ImportsDep, settings: SettingsDep
) -> ImportStatus:
    """Multipart (`kind`, `name`, `file`) or JSON `{kind, name, content | content_base64}`."""
    if _is_form(request):
        form = await request.form()
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise ValidationFailed("multipart import needs a `file` part")
        fields = {"kind": form.get("kind"), "name": form.get("name") or upload.filename or "import"}
        for key, value in fields.items():
            if isinstance(value, str):
                check_path(value, key)
        try:
            start = ImportStartRequest.model_validate({**fields, "content": ""})
        except ValidationError as exc:
            raise ValidationFailed(str(exc.errors()[0]["msg"])) from None
        data = await upload.read()
        await form.close()
    else:
        start = await _json_model(request, ImportStartRequest)
        data = _decode("import", start.content, start.content_base64)
    if len(data) > settings.ingest_max_file_bytes:
        raise PayloadTooLarge(
            f"the export is {len(data)} bytes; the limit is {settings.ingest_max_file_bytes}"
        )
    status, actor = await run_in_threadpool(
        unit.write, lambda s, a: (service.start(s, a, start.kind, start.name, data), a)
    )
    _run_in_background(service, actor, status.id)
    return status


@imports.get("/imports", response_model=list[ImportStatus])
def list_imports(
    unit: UnitDep, service: ImportsDep, limit: int = Query(50, ge=1, le=500)
) -> list[ImportStatus]:
    return unit.write(lambda s, a: service.list_jobs(s, a, limit))


@imports.get("/imports/{job_id}", response_model=ImportStatus)
def import_status(job_id: UUID, unit: UnitDep, service: ImportsDep) -> ImportStatus:
    return unit.write(lambda s, a: service.status(s, a, job_id))


@imports.post("/imports/{job_id}/pause", response_model=ImportStatus)
def pause_import(job_id: UUID, unit: UnitDep, service: ImportsDep) -> ImportStatus:
    return unit.write(lambda s, a: service.pause(s, a, job_id))


@imports.post("/imports/{job_id}/resume", response_model=ImportStatus)
def resume_import(job_id: UUID, unit: UnitDep, service: ImportsDep) -> ImportStatus:
    status, actor = unit.write(lambda s, a: (service.resume(s, a, job_id), a))
    _run_in_background(service, actor, job_id)
    return status


@imports.get("/imports/{job_id}/review", response_model=list[ReviewItem])
def review_list(
    job_id: UUID,
    unit: UnitDep,
    service: ImportsDep,
    limit: int = Query(100, ge=1, le=500),
    offset: int = Query(0, ge=0),
) -> list[ReviewItem]:
    """What the import produced: per conversation, its session, segments and memories."""
    return unit.write(lambda s, a: service.review_list(s, a, job_id, limit=limit, offset=offset))


@imports.post("/imports/{job_id}/review", response_model=ReviewOutcome)
def review(job_id: UUID, body: ReviewDecision, unit: UnitDep, service: ImportsDep) -> ReviewOutcome:
    """Approve conversations, or discard them (their memories are archived)."""
    return unit.write(lambda s, a: service.review(s, a, job_id, body))
