"""HTTP endpoints of the Markdown vault: export pages and import files, as the caller's key
(ultron/vault/exchange.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from ultron.memory.service import MemoryService
from ultron.routing.deps import UnitDep, hub_part
from ultron.routing.errors import ERROR_RESPONSES
from ultron.skills.service import SkillService
from ultron.vault.exchange import export_page, import_files
from ultron.vault.schemas import ExportPage, ExportRequest, ImportRequest, ImportResult

MemoryDep = Annotated[MemoryService, Depends(hub_part("memory"))]
SkillsDep = Annotated[SkillService | None, Depends(hub_part("skills"))]

router = APIRouter(prefix="/vault", tags=["vault"], responses=ERROR_RESPONSES)


@router.post("/export", response_model=ExportPage)
def export_vault(body: ExportRequest, unit: UnitDep, memory: MemoryDep, skills: SkillsDep) -> ExportPage:
    """One page of the Markdown vault of what you may see: memory files in (created, id) order; the last
    page (`next` null) adds the entity pages and the tenant's active skills (skills/<slug>/SKILL.md)."""
    return unit.read(lambda s, a: export_page(memory, skills, s, a, body.after))


@router.post("/import", response_model=ImportResult)
def import_vault(body: ImportRequest, unit: UnitDep, memory: MemoryDep) -> ImportResult:
    """Create or update the memories of vault files (same ids; re-embedded and redacted again); a file
    that cannot be stored is skipped, with why."""
    return unit.write(lambda s, a: import_files(memory, s, a, body.files))
