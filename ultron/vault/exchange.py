"""The vault as it crosses the wire: pages of (path, text) files out, chunks of files in.

Rendering and parsing stay on the hub; reading and writing the files happen where the CLI runs, so
`ultron export markdown DIR` exports what the caller's key may see, from any hub.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from uuid import UUID

from sqlalchemy.orm import Session

from ultron.errors import ValidationFailed
from ultron.memory.service import MemoryService
from ultron.skills.service import SkillService
from ultron.tenancy import Actor
from ultron.vault.markdown import Vault
from ultron.vault.schemas import ExportPage, ImportResult, VaultFile

SKILL_PAGE = 100


def _cursor(raw: str | None) -> tuple[datetime, UUID] | None:
    if raw is None:
        return None
    try:
        when, _, memory_id = raw.partition("|")
        return datetime.fromisoformat(when), UUID(memory_id)
    except ValueError:
        raise ValidationFailed("after: not a cursor this endpoint returned") from None


def skill_files(skills: SkillService | None, session: Session, actor: Actor) -> Iterator[tuple[str, str]]:
    """(slug, SKILL.md) of the latest version of every active skill of the tenant, a page at a time."""
    if skills is None:
        return
    offset = 0
    while True:
        page = skills.list_skills(session, actor.tenant_id, status="active", limit=SKILL_PAGE, offset=offset)
        for summary in page:
            latest = skills.latest(session, actor.tenant_id, summary.slug, summary.version)
            yield summary.slug, skills.skill_md(latest)
        if len(page) < SKILL_PAGE:
            return
        offset += SKILL_PAGE


def export_page(
    memory: MemoryService, skills: SkillService | None, session: Session, actor: Actor, after: str | None
) -> ExportPage:
    """One page of memory files after the cursor; the last page adds the entity pages and the skills."""
    vault = Vault(memory)
    files, last = vault.export_page(session, actor, _cursor(after))
    if last is None:
        files += vault.extra_files(session, actor, skill_files(skills, session, actor))
    cursor = None if last is None else f"{last[0].isoformat()}|{last[1]}"
    return ExportPage(files=[VaultFile(path=p, text=t) for p, t in files], next=cursor)


def import_files(
    memory: MemoryService, session: Session, actor: Actor, files: list[VaultFile]
) -> ImportResult:
    report = Vault(memory).import_files(session, actor, [(f.path, f.text) for f in files])
    return ImportResult(created=report.created, updated=report.updated, skipped=report.skipped)
