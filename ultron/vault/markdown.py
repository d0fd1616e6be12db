"""Export memories to a Markdown vault and import a vault back, without loss.

One file per memory, `<type>/<slug>-<id>.md`: YAML front matter (Obsidian reads it as properties; `tags`
is a list, so Obsidian's tag pane works) and the memory's content as the body. Skills, when a skill source
is given, go to `skills/<name>/SKILL.md`. Names come from the memory (type whitelist, slugged summary and
the id), never from a path a user chose, and every write and read is checked to stay inside the vault.

An import restores what a vault holds: the same ids, text, summaries, tiers, pins, hits and times. It does
not deduplicate (restoring a vault must reproduce it), re-embeds with the hub's model (vectors are not
exported: they belong to one embedding model), and runs redaction again before anything is stored.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ultron import safe_yaml
from ultron.db.models import Agent, Memory, MemoryContribution, MemoryEntity
from ultron.errors import UltronError, ValidationFailed
from ultron.memory import fulltext
from ultron.memory.records import visible_to
from ultron.memory.schemas import Scope, Status, Tier
from ultron.memory.service import MemoryService, content_hash
from ultron.memory.text import STORED_TYPES
from ultron.tenancy import Actor
from ultron.vault.files import MAX_FILE_BYTES, SKIPPED, VaultReport, read_files, write_files

PAGE_SIZE = 500
SLUG_CHARS = 60
FRONT = "---\n"


class FrontMatter(BaseModel):
    """The YAML properties of one memory file (everything but the content, which is the body)."""

    model_config = ConfigDict(extra="ignore")

    id: UUID | None = None
    memory_type: str = "pattern"
    tags: list[str] = Field(default_factory=list)
    tier: Tier = "warm"
    status: Status = "active"
    scope: Scope = "shared"
    group: str | None = None
    pinned: bool = False
    valence: float | None = Field(None, ge=-1, le=1)
    arousal: float | None = Field(None, ge=0, le=1)
    hit_count: int = Field(0, ge=0)
    last_hit_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    archived_at: datetime | None = None
    archived_reason: str | None = None
    agent: str | None = None
    summary_l0: str = ""
    overview_l1: str = ""
    context: str = ""
    resolution: str = ""
    redacted_entities: dict[str, int] = Field(default_factory=dict)


def slug(text: str) -> str:
    """A file-name-safe slug: letters and digits of any script, dashes; never a path."""
    text = unicodedata.normalize("NFKC", text)
    out = re.sub(r"[^\w]+", "-", text, flags=re.UNICODE).strip("-_").lower()
    return out[:SLUG_CHARS].rstrip("-_") or "memory"


def safe_name(name: str) -> str:
    """A skill or folder name reduced to one safe path component."""
    return slug(name.replace("..", "-"))


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def render(memory: Memory, agent: str | None) -> str:
    """One memory as a Markdown file: YAML front matter, then the content."""
    props: dict[str, Any] = {
        "id": str(memory.id),
        "memory_type": memory.memory_type,
        "tags": list(memory.tags),
        "tier": memory.tier,
        "status": memory.status,
        "scope": memory.scope,
        "group": memory.group_name,
        "pinned": memory.pinned,
        "valence": memory.valence,
        "arousal": memory.arousal,
        "hit_count": memory.hit_count,
        "last_hit_at": _iso(memory.last_hit_at),
        "created_at": _iso(memory.created_at),
        "updated_at": _iso(memory.updated_at),
        "archived_at": _iso(memory.archived_at),
        "archived_reason": memory.archived_reason,
        "agent": agent,
        "summary_l0": memory.summary_l0,
        "overview_l1": memory.overview_l1,
        "context": memory.context,
        "resolution": memory.resolution,
        "redacted_entities": dict(memory.redacted_entities or {}),
    }
    front = yaml.safe_dump(props, allow_unicode=True, sort_keys=False, width=100_000)
    return f"{FRONT}{front}{FRONT}{memory.content}\n"


def parse(text: str) -> tuple[FrontMatter, str]:
    """Front matter and content of one vault file; ValidationFailed when it is not one."""
    if not text.startswith(FRONT):
        raise ValidationFailed("no YAML front matter")
    end = text.find(f"\n{FRONT}", len(FRONT) - 1)
    if end < 0:
        raise ValidationFailed("unterminated YAML front matter")
    props = safe_yaml.load(text[len(FRONT) : end + 1], "front matter") or {}
    if not isinstance(props, dict):
        raise ValidationFailed("front matter is not a mapping")
    try:
        front = FrontMatter.model_validate(props)
    except ValidationError as exc:
        raise ValidationFailed(f"invalid front matter: {exc.errors()[0]['msg']}") from None
    if front.memory_type not in STORED_TYPES:
        raise ValidationFailed(f"unknown memory_type {front.memory_type!r}")
    body = text[end + 1 + len(FRONT) :]
    return front, body[:-1] if body.endswith("\n") else body


class Vault:
    def __init__(self, memory: MemoryService):
        self.memory = memory

    # --- export --------------------------------------------------------------------------------

    def _pages(
        self, session: Session, actor: Actor, after: tuple[datetime, UUID] | None = None
    ) -> Iterator[list[tuple[Memory, str | None]]]:
        """Every memory this agent may see after `after`, in (created_at, id) keyset pages."""
        while True:
            stmt = (
                select(Memory, Agent.name)
                .outerjoin(Agent, Agent.id == Memory.agent_id)
                .where(Memory.tenant_id == actor.tenant_id, visible_to(actor))
                .order_by(Memory.created_at, Memory.id)
                .limit(PAGE_SIZE)
            )
            if after is not None:
                stmt = stmt.where(func.row(Memory.created_at, Memory.id) > func.row(*after))
            page: list[tuple[Memory, str | None]] = [(m, name) for m, name in session.execute(stmt)]
            if not page:
                return
            yield page
            after = (page[-1][0].created_at, page[-1][0].id)
            session.expunge_all()

    @staticmethod
    def _memory_file(memory: Memory, agent: str | None) -> tuple[str, str]:
        folder = memory.memory_type if memory.memory_type in STORED_TYPES else "other"
        return f"{folder}/{slug(memory.summary_l0 or memory.content)}-{memory.id}.md", render(memory, agent)

    def export_page(
        self, session: Session, actor: Actor, after: tuple[datetime, UUID] | None
    ) -> tuple[list[tuple[str, str]], tuple[datetime, UUID] | None]:
        """One page of (vault path, file text) after the cursor, and the next cursor (None: the last)."""
        page = next(self._pages(session, actor, after), [])
        files = [self._memory_file(m, agent) for m, agent in page]
        last = (page[-1][0].created_at, page[-1][0].id) if len(page) == PAGE_SIZE else None
        return files, last

    def extra_files(
        self, session: Session, actor: Actor, skills: Iterable[tuple[str, str]] = ()
    ) -> list[tuple[str, str]]:
        """The entity pages and the given (name, SKILL.md) pairs, as (vault path, file text)."""
        files = list(self._entity_pages(session, actor))
        files += [(f"skills/{safe_name(name)}/SKILL.md", text) for name, text in skills]
        return files

    def export(
        self,
        session: Session,
        actor: Actor,
        directory: Path,
        skills: Iterable[tuple[str, str]] = (),
    ) -> VaultReport:
        """Write every memory the agent may see (archived ones too) and the given (name, SKILL.md) pairs."""
        root = directory.expanduser().resolve()
        report = VaultReport()
        for page in self._pages(session, actor):
            report.written += write_files(root, [self._memory_file(m, agent) for m, agent in page])
        write_files(root, self.extra_files(session, actor, skills))
        return report

    def _entity_pages(self, session: Session, actor: Actor) -> Iterator[tuple[str, str]]:
        """`entities/<kind>/<name>.md` per person, place and project, linking the memories that name it
        (only memories the agent may see; entity rows streamed in name order, one page open at a time)."""
        stmt = (
            select(
                MemoryEntity.kind,
                MemoryEntity.name,
                Memory.id,
                Memory.memory_type,
                Memory.summary_l0,
                Memory.content,
            )
            .join(Memory, Memory.id == MemoryEntity.memory_id)
            .where(MemoryEntity.tenant_id == actor.tenant_id, visible_to(actor))
            .order_by(MemoryEntity.kind, MemoryEntity.name, Memory.created_at, Memory.id)
            .execution_options(yield_per=PAGE_SIZE)
        )
        current: tuple[str, str] | None = None
        lines: list[str] = []

        def page() -> tuple[str, str]:
            assert current is not None
            kind, name = current
            text = f"# {name}\n\n{kind}, named in:\n\n" + "\n".join(lines) + "\n"
            return f"entities/{kind}/{safe_name(name)}.md", text

        for kind, name, memory_id, memory_type, summary, content in session.execute(stmt):
            if (kind, name) != current:
                if current is not None:
                    yield page()
                current, lines = (kind, name), []
            folder = memory_type if memory_type in STORED_TYPES else "other"
            name_md = f"{slug(summary or content)}-{memory_id}.md"
            lines.append(f"- [{(summary or content)[:80]}](../../{folder}/{name_md})")
        if current is not None:
            yield page()

    # --- import --------------------------------------------------------------------------------

    def import_(self, session: Session, actor: Actor, directory: Path) -> VaultReport:
        """Create or update the memories of a vault (same ids), as this agent."""
        report = VaultReport()
        for chunk in read_files(directory):
            report.add(self.import_files(session, actor, chunk))
        return report

    def import_files(self, session: Session, actor: Actor, files: Iterable[tuple[str, str]]) -> VaultReport:
        """Store (vault path, file text) pairs; a file that cannot be read or stored is skipped with why
        (each in its own savepoint: the others are kept). A text that starts with SKIPPED is a file the
        reader could not read, with its reason."""
        report = VaultReport()
        for rel, text in files:
            try:
                if text.startswith(SKIPPED):
                    raise ValidationFailed(text.removeprefix(SKIPPED))
                if len(text.encode("utf-8")) > MAX_FILE_BYTES:
                    raise ValidationFailed(f"larger than {MAX_FILE_BYTES} bytes")
                front, content = parse(text)
                with session.begin_nested():
                    created = self._store(session, actor, front, content)
            except UltronError as exc:
                report.skipped.append(f"{rel}: {exc.detail}")
                continue
            if created:
                report.created += 1
            else:
                report.updated += 1
        return report

    @staticmethod
    def _taken(session: Session, memory_id: UUID) -> bool:
        """Whether another tenant holds this id: keys are per tenant (migration 0012), ids stay unique."""
        return session.execute(select(Memory.id).where(Memory.id == memory_id).limit(1)).first() is not None

    def _owner(self, session: Session, actor: Actor, front: FrontMatter) -> UUID | None:
        """Admins restore each memory to its agent (when it exists here); anyone else imports as itself."""
        if not actor.is_admin or not front.agent:
            return actor.agent_id
        found = session.execute(
            select(Agent.id).where(Agent.tenant_id == actor.tenant_id, Agent.name == front.agent)
        ).scalar()
        return found or actor.agent_id

    def _store(self, session: Session, actor: Actor, front: FrontMatter, content: str) -> bool:
        if not content.strip():
            raise ValidationFailed("empty content")
        if front.scope == "group" and not front.group:
            raise ValidationFailed("scope 'group' needs a group")
        if front.scope == "group" and not actor.is_admin and front.group not in actor.groups:
            raise ValidationFailed(f"agent {actor.agent_name!r} is not in group {front.group!r}")
        fields = {"content": content, "context": front.context, "resolution": front.resolution}
        self.memory._check_sizes(fields)
        clean, tags, counts = self.memory._redact(fields, front.tags)
        existing = session.get(Memory, (front.id, actor.tenant_id)) if front.id is not None else None
        if existing is None and front.id is not None and self._taken(session, front.id):
            raise ValidationFailed("its id belongs to another tenant")
        if existing is not None:
            self.memory._owned(session, actor, existing.id)  # visible and changeable by this agent
            memory = existing
        else:
            memory = Memory(tenant_id=actor.tenant_id)
            if front.id is not None:
                memory.id = front.id
        memory.agent_id = self._owner(session, actor, front)
        memory.memory_type = front.memory_type
        memory.content, memory.context, memory.resolution = (
            clean[k] for k in ("content", "context", "resolution")
        )
        memory.tags = tags
        memory.embedding = self.memory._embed_one(clean)
        memory.content_hash = content_hash(**clean)
        memory.search_tsv = func.to_tsvector("simple", fulltext.index_text(*clean.values(), *tags))
        if front.summary_l0 and clean == fields:
            memory.summary_l0, memory.overview_l1 = front.summary_l0, front.overview_l1
        else:  # new or redacted text: summaries of the stored text, not of what the file said
            memory.summary_l0, memory.overview_l1 = self.memory.intelligence.summarize(**clean)
        memory.tier, memory.status, memory.pinned = front.tier, front.status, front.pinned
        memory.scope = front.scope
        memory.group_name = front.group if front.scope == "group" else None
        memory.valence, memory.arousal = front.valence, front.arousal
        memory.hit_count, memory.last_hit_at = front.hit_count, front.last_hit_at
        memory.archived_at, memory.archived_reason = front.archived_at, front.archived_reason
        entities = dict(front.redacted_entities)
        for key, value in counts.items():
            entities[key] = entities.get(key, 0) + value
        memory.redacted_entities = entities
        if front.created_at is not None:
            memory.created_at = front.created_at
        if front.updated_at is not None:
            memory.updated_at = front.updated_at
        if existing is None:
            session.add(memory)
            session.flush()
            # The per-upload history is not part of a vault; the import itself is this memory's first entry.
            session.add(
                MemoryContribution(
                    tenant_id=actor.tenant_id,
                    memory_id=memory.id,
                    agent_id=actor.agent_id,
                    decision="imported",
                    tags=tags,
                    **clean,
                )
            )
        session.flush()
        return existing is None
