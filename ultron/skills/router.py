"""HTTP endpoints of the Skill Hub: search, the catalogue, SKILL.md and zip downloads, upload by content.

`POST /skills` reads its body on the event loop (JSON or a zip, bounded) and does the database and model
work in the threadpool, one transaction per request, like `POST /ingest`.
"""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from ultron.errors import PayloadTooLarge, ValidationFailed
from ultron.routing.deps import UnitDep, hub_part
from ultron.routing.errors import ERROR_RESPONSES
from ultron.skills import bundle
from ultron.skills.schemas import (
    EvolutionEntry,
    SkillDetail,
    SkillHit,
    SkillSearchRequest,
    SkillStatusFilter,
    SkillSummary,
    SkillUpload,
    SkillUploadResult,
)
from ultron.skills.service import SkillService

router = APIRouter(prefix="/skills", tags=["skills"], responses=ERROR_RESPONSES)
ZIP_TYPES = ("application/zip", "application/x-zip-compressed")
# JSON escapes can make a body several times larger than the text it carries.
MAX_UPLOAD_BODY = 4 * bundle.MAX_TOTAL_BYTES
VERSION = Query(None, max_length=40, description="MAJOR.MINOR.PATCH; default the latest")

_UPLOAD_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": SkillUpload.model_json_schema()},
            "application/zip": {"schema": {"type": "string", "format": "binary"}},
        },
    }
}
SkillsDep = Annotated[SkillService, Depends(hub_part("skills"))]


@router.post("/search", response_model=list[SkillHit])
def search_skills(body: SkillSearchRequest, unit: UnitDep, skills: SkillsDep) -> list[SkillHit]:
    """The latest active version of each skill, nearest to the query first; superseded skills never."""
    return unit.read(lambda s, a: skills.hits(s, a.tenant_id, body.query, body.limit))


@router.get("", response_model=list[SkillSummary])
def list_skills(
    unit: UnitDep,
    skills: SkillsDep,
    limit: int = Query(50, ge=1, le=500),
    offset: int = Query(0, ge=0),
    status: SkillStatusFilter = Query("active", description="The latest version's status"),
) -> list[SkillSummary]:
    """The latest version of each skill, newest first."""
    return unit.read(
        lambda s, a: skills.list_skills(s, a.tenant_id, status=status, limit=limit, offset=offset)
    )


async def _read_capped(request: Request, cap: int) -> bytes:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise PayloadTooLarge(f"a skill upload is limited to {cap} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _upload_files(content_type: str, data: bytes) -> dict[str, str]:
    if content_type.split(";", 1)[0].strip().lower() in ZIP_TYPES:
        return bundle.read_zip(data)
    try:
        return SkillUpload.model_validate(json.loads(data)).files
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ValidationFailed(problems) from None
    except ValueError as exc:
        raise ValidationFailed(f"request body is not valid JSON: {exc}") from None


@router.post("", response_model=SkillUploadResult, status_code=201, openapi_extra=_UPLOAD_BODY)
async def upload_skill(request: Request, unit: UnitDep, skills: SkillsDep) -> SkillUploadResult:
    """Upload an existing skill folder by content: JSON `{files: {path: text}}` or a zip
    (`Content-Type: application/zip`). A new slug starts at 1.0.0; a known one gets the next minor version.
    Paths are checked (relative, no `..`, no hidden segments) and text is redacted before it is stored."""
    data = await _read_capped(request, MAX_UPLOAD_BODY)
    files = await run_in_threadpool(_upload_files, request.headers.get("content-type", ""), data)
    return await run_in_threadpool(unit.write, lambda s, a: skills.upload(s, a, files))


@router.get("/{slug}", response_model=SkillDetail)
def get_skill(slug: str, unit: UnitDep, skills: SkillsDep, version: str | None = VERSION) -> SkillDetail:
    """One version of a skill in full (default the latest), with every version of the slug."""
    return unit.read(lambda s, a: skills.detail(s, a.tenant_id, slug, version))


@router.get("/{slug}/history", response_model=list[EvolutionEntry])
def skill_history(
    slug: str, unit: UnitDep, skills: SkillsDep, limit: int = Query(50, ge=1, le=500)
) -> list[EvolutionEntry]:
    """Evolution records of the skill and its clusters (attempts, publications, uploads), newest first."""
    return unit.read(lambda s, a: skills.history(s, a.tenant_id, slug, limit))


@router.get(
    "/{slug}/SKILL.md",
    response_class=Response,
    responses={200: {"content": {"text/markdown": {}}, "description": "The rendered SKILL.md"}},
)
def skill_md(slug: str, unit: UnitDep, skills: SkillsDep, version: str | None = VERSION) -> Response:
    """The SKILL.md of one version: YAML front matter (name, description, an uploaded skill's own keys,
    metadata), then the body."""
    text = unit.read(lambda s, a: skills.skill_md(skills.latest(s, a.tenant_id, slug, version)))
    return Response(text, media_type="text/markdown; charset=utf-8")


@router.get(
    "/{slug}/archive.zip",
    response_class=Response,
    responses={200: {"content": {"application/zip": {}}, "description": "`{slug}/SKILL.md` and its files"}},
)
def skill_archive(slug: str, unit: UnitDep, skills: SkillsDep, version: str | None = VERSION) -> Response:
    """The skill folder as a zip (`{slug}/SKILL.md` plus its files), ready to unzip into a skills folder."""
    files = unit.read(lambda s, a: skills.folder(s, a.tenant_id, slug, version))
    name = f"{slug}.zip"
    disposition = f"attachment; filename=\"{quote(name)}\"; filename*=UTF-8''{quote(name)}"
    return Response(
        bundle.write_zip(slug, files),
        media_type="application/zip",
        headers={"Content-Disposition": disposition},
    )
