"""HTTP endpoints: ingest files and text, sessions and segments, imports and their review.

`POST /ingest` and `POST /imports` read the body on the event loop (multipart or JSON) and do all
database and model work in the threadpool, one transaction per request.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import threading
from datetime import datetime
from typing import Any
from uuid import UUID

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from ultron.api.app import ERROR_RESPONSES, call
from ultron.errors import PayloadTooLarge, ValidationFailed
from ultron.hub import Hub
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
from ultron.tenancy import Actor
from ultron.trajectory import views
from ultron.trajectory.schemas import MessageInfo, SegmentInfo, SessionDetail, SessionInfo
from ultron.validation import check_path

log = logging.getLogger(__name__)

router = APIRouter(tags=["ingestion"], responses=ERROR_RESPONSES)
MAX_FORM_FILES = 10_000


class ProcessRequest(BaseModel):
    limit: int = Field(100, ge=1, le=10_000)


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
async def ingest(request: Request) -> IngestResult:
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
    hub: Hub = request.app.state.hub
    return await run_in_threadpool(call, request, lambda s, a: hub.ingestion.ingest_files(s, a, files))


@router.post("/ingest/text", response_model=IngestTextResult)
def ingest_text(request: Request, body: IngestTextRequest) -> IngestTextResult:
    """Extract memories from free text (main LLM; offline: the heuristic extractor) and upload each."""
    return call(request, lambda s, a: request.app.state.hub.ingestion.ingest_text(s, a, body.text))


# --- sessions and segments --------------------------------------------------------------------------


@router.get("/sessions", response_model=list[SessionInfo])
def list_sessions(
    request: Request,
    limit: int = Query(50, ge=1, le=500),
    before: datetime | None = Query(None, description="Page: the last row's updated_at"),
    import_id: UUID | None = None,
) -> list[SessionInfo]:
    return call(
        request, lambda s, a: views.list_sessions(s, a, limit=limit, before=before, import_id=import_id)
    )


@router.get("/sessions/{session_id}", response_model=SessionDetail)
def show_session(request: Request, session_id: UUID, superseded: bool = False) -> SessionDetail:
    """A session with its segments, each with every metric value and the memories extracted from it."""
    return call(request, lambda s, a: views.show_session(s, a, session_id, superseded=superseded))


@router.get("/sessions/{session_id}/messages", response_model=list[MessageInfo])
def session_messages(
    request: Request, session_id: UUID, start: int = Query(0, ge=0), limit: int = Query(200, ge=1, le=500)
) -> list[MessageInfo]:
    return call(request, lambda s, a: views.session_messages(s, a, session_id, start=start, limit=limit))


@router.post("/sessions/{session_id}/reprocess", response_model=SessionInfo)
def reprocess_session(request: Request, session_id: UUID) -> SessionInfo:
    return call(request, lambda s, a: views.reprocess_session(s, a, session_id))


@router.get("/segments", response_model=list[SegmentInfo])
def list_segments(
    request: Request,
    session_id: UUID | None = None,
    stage: str | None = Query(None, pattern="^(score|extract|done|skipped|superseded)$"),
    limit: int = Query(100, ge=1, le=500),
    before: datetime | None = Query(None, description="Page: the last row's created_at"),
) -> list[SegmentInfo]:
    return call(
        request,
        lambda s, a: views.list_segments(
            s, a, session_id=session_id, stage=stage, limit=limit, before=before
        ),
    )


@router.get("/segments/{segment_id}", response_model=SegmentInfo)
def show_segment(request: Request, segment_id: UUID) -> SegmentInfo:
    return call(request, lambda s, a: views.show_segment(s, a, segment_id))


@router.post("/segments/{segment_id}/reprocess", response_model=SegmentInfo)
def reprocess_segment(request: Request, segment_id: UUID) -> SegmentInfo:
    return call(request, lambda s, a: views.reprocess_segment(s, a, segment_id))


@router.post("/trajectory/process")
def process(request: Request, body: ProcessRequest | None = None) -> dict[str, int]:
    """Run due segmentation, scoring and extraction for the caller's tenant now, in this request."""
    # Through a worker's lease protocol (app.state.build_worker): the same code path as the worker loop.
    actor = call(request, lambda s, a: a)
    worker = request.app.state.build_worker()
    return worker.process_due(actor.tenant_id, (body or ProcessRequest()).limit)  # type: ignore[no-any-return]


# --- imports ----------------------------------------------------------------------------------------


def _run_in_background(hub: Hub, actor: Actor, job_id: UUID) -> None:
    """Advance an import batch by batch off the request; its state is in the database, so a restart or a
    pause loses nothing (resume starts a new runner)."""

    def run() -> None:
        try:
            hub.ingestion.imports.run(actor, job_id)
        except Exception:  # noqa: BLE001 - a background thread has nobody to raise to
            log.exception("import %s stopped with an error; resume it to continue", job_id)

    threading.Thread(target=run, name=f"import-{job_id}", daemon=True).start()


@router.post("/imports", response_model=ImportStatus, status_code=202)
async def start_import(request: Request) -> ImportStatus:
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
    hub: Hub = request.app.state.hub
    if len(data) > hub.settings.ingest_max_file_bytes:
        raise PayloadTooLarge(
            f"the export is {len(data)} bytes; the limit is {hub.settings.ingest_max_file_bytes}"
        )
    status, actor = await run_in_threadpool(
        call, request, lambda s, a: (hub.ingestion.imports.start(s, a, start.kind, start.name, data), a)
    )
    _run_in_background(hub, actor, status.id)
    return status


@router.get("/imports", response_model=list[ImportStatus])
def list_imports(request: Request, limit: int = Query(50, ge=1, le=500)) -> list[ImportStatus]:
    return call(request, lambda s, a: request.app.state.hub.ingestion.imports.list_jobs(s, a, limit))


@router.get("/imports/{job_id}", response_model=ImportStatus)
def import_status(request: Request, job_id: UUID) -> ImportStatus:
    return call(request, lambda s, a: request.app.state.hub.ingestion.imports.status(s, a, job_id))


@router.post("/imports/{job_id}/pause", response_model=ImportStatus)
def pause_import(request: Request, job_id: UUID) -> ImportStatus:
    return call(request, lambda s, a: request.app.state.hub.ingestion.imports.pause(s, a, job_id))


@router.post("/imports/{job_id}/resume", response_model=ImportStatus)
def resume_import(request: Request, job_id: UUID) -> ImportStatus:
    hub: Hub = request.app.state.hub
    status, actor = call(request, lambda s, a: (hub.ingestion.imports.resume(s, a, job_id), a))
    _run_in_background(hub, actor, job_id)
    return status


@router.get("/imports/{job_id}/review", response_model=list[ReviewItem])
def review_list(
    request: Request, job_id: UUID, limit: int = Query(100, ge=1, le=500), offset: int = Query(0, ge=0)
) -> list[ReviewItem]:
    """What the import produced: per conversation, its session, segments and memories."""
    return call(
        request,
        lambda s, a: request.app.state.hub.ingestion.imports.review_list(
            s, a, job_id, limit=limit, offset=offset
        ),
    )


@router.post("/imports/{job_id}/review", response_model=ReviewOutcome)
def review(request: Request, job_id: UUID, body: ReviewDecision) -> ReviewOutcome:
    """Approve conversations, or discard them (their memories are archived)."""
    return call(request, lambda s, a: request.app.state.hub.ingestion.imports.review(s, a, job_id, body))
