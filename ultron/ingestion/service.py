"""IngestionService: session files and free text in, sessions and memories out.

The hub stores what the client sent (never a path to read later): each file is parsed, normalized,
redacted (ultron/ingestion/redaction.py), stored as a session with its messages and archived raw. A
re-sent file writes nothing; a grown one writes only its new messages and queues re-segmentation.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any
from uuid import UUID

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from ultron.config import Settings
from ultron.db.engine import Database
from ultron.db.models import RawUpload
from ultron.errors import PayloadTooLarge, ValidationFailed
from ultron.ingestion.batch import (
    BulkConflict,
    Prepared,
    create_sessions,
    existing_sources,
    unchanged_results,
)
from ultron.ingestion.formats import parse_session
from ultron.ingestion.imports import ImportService, Segmenter
from ultron.ingestion.redaction import Scrubber
from ultron.ingestion.schemas import FileResult, IngestFile, IngestResult, IngestTextResult, LineProblem
from ultron.memory.schemas import UploadRequest, UploadResult
from ultron.memory.service import MemoryService
from ultron.tenancy import Actor
from ultron.trajectory.sessions import notify_work, store_session, unchanged_session

log = logging.getLogger(__name__)

MAX_NAME_CHARS = 1000
# Fewer new files than this take the per-file path (the bulk path's fixed cost is a few statements).
BULK_MIN_FILES = 2
# Malformed lines listed per file; the count beyond is still reported.
MAX_LINE_PROBLEMS = 100


class IngestionService:
    def __init__(
        self,
        settings: Settings,
        db: Database,
        intelligence: Any,
        memory: MemoryService,
        redactor: Any,
        segment: Segmenter,
    ):
        self.settings = settings
        self.intelligence = intelligence  # extracts memories from free text; splits sessions (heuristic)
        self.memory = memory
        self.segment = segment
        self.scrubber = Scrubber(redactor)
        # Imported conversations are segmented as they are stored when a file would be (segment_inline).
        self.imports = ImportService(settings, db, self.scrubber, segment if self.segment_inline else None)

    # --- raw archive -------------------------------------------------------------------------

    def archive(
        self,
        session: Session,
        actor: Actor,
        kind: str,
        name: str,
        data: bytes,
        session_id: UUID | None = None,
    ) -> bool:
        """Keep the redacted raw bytes (up to the cap, once per content). Never blocks ingestion: a failure
        rolls back only its own savepoint and is logged."""
        if len(data) > self.settings.raw_archive_max_bytes:
            return False
        digest = hashlib.sha256(data).hexdigest()
        try:
            seen = session.execute(
                select(RawUpload.id).where(
                    RawUpload.tenant_id == actor.tenant_id, RawUpload.sha256 == digest, RawUpload.kind == kind
                )
            ).first()
            if seen is not None:
                return True
            with session.begin_nested():
                clean, counts = self.scrubber.raw(data)
                session.add(
                    RawUpload(
                        tenant_id=actor.tenant_id,
                        agent_id=actor.agent_id,
                        agent_name=actor.agent_name,
                        kind=kind,
                        name=name,
                        size_bytes=len(data),
                        sha256=digest,
                        content=clean,
                        redacted_entities=counts,
                        session_id=session_id,
                    )
                )
                session.flush()
            return True
        except (SQLAlchemyError, ValueError, RuntimeError) as exc:
            log.warning("raw archive of %s failed (%s); ingestion goes on", kind, type(exc).__name__)
            return False

    # --- files -------------------------------------------------------------------------------

    def _check(self, files: list[IngestFile]) -> None:
        limit = self.settings.ingest_max_file_bytes
        for f in files:
            if len(f.content) > limit:
                raise PayloadTooLarge(f"{f.name!r} is {len(f.content)} bytes; the per-file limit is {limit}")
            if not f.name.strip() or len(f.name) > MAX_NAME_CHARS:
                raise ValidationFailed(f"a file name must be 1-{MAX_NAME_CHARS} characters")

    def ingest_files(self, session: Session, actor: Actor, files: list[IngestFile]) -> IngestResult:
        """Store each file as a session. New sessions go in bulk; the others one savepoint each, so one
        bad file does not sink the others."""
        self._check(files)
        done: dict[int, FileResult] = {}
        prepared: dict[int, Prepared] = {}
        for i, f in enumerate(files):
            outcome = self._prepare(f)
            if isinstance(outcome, FileResult):
                done[i] = outcome
            else:
                prepared[i] = outcome
        done.update(self._bulk_new(session, actor, prepared))
        for i, p in prepared.items():
            if i in done:
                continue
            try:
                done[i] = self._ingest_one(session, actor, p)
            except SQLAlchemyError as exc:
                log.warning("ingest of %s failed: %s", p.file.name, type(exc).__name__)
                error = f"database error: {type(exc).__name__}"
                done[i] = FileResult(name=p.file.name, status="failed", error=error)
        results = [done[i] for i in range(len(files))]
        if any(r.status in ("created", "appended", "replaced") for r in results):
            notify_work(session, actor.tenant_id)
        errors = [f"{r.name}: {r.error}" for r in results if r.error]
        errors += [f"{r.name}: line {p.line}: {p.error}" for r in results for p in r.malformed_lines]
        return IngestResult(
            total_files=len(files),
            successful=sum(1 for r in results if r.status != "failed"),
            new_segments=sum(r.new_segments for r in results),
            results=results,
            errors=errors,
        )

    def _prepare(self, f: IngestFile) -> Prepared | FileResult:
        """Parse and redact one file (no database); a FileResult when it holds no message."""
        parsed = parse_session(f.content)
        problems = [LineProblem(line=e.line, error=e.error) for e in parsed.errors[:MAX_LINE_PROBLEMS]]
        if len(parsed.errors) > MAX_LINE_PROBLEMS:
            more = len(parsed.errors) - MAX_LINE_PROBLEMS
            problems.append(LineProblem(line=0, error=f"{more} more malformed lines"))
        if not parsed.messages:
            return FileResult(
                name=f.name,
                status="failed",
                error="no messages found",
                malformed_lines=problems,
                format=parsed.format,
            )
        self.scrubber.messages(parsed.messages)
        return Prepared(f, parsed, problems)

    def _bulk_new(
        self, session: Session, actor: Actor, prepared: dict[int, Prepared]
    ) -> dict[int, FileResult]:
        """Files already stored as they are (unchanged) and files that are new sessions, stored in bulk;
        the rest, or all new ones if the bulk insert fails, take the per-file path."""
        known = existing_sources(session, actor, [p.file.name for p in prepared.values()])
        done = unchanged_results(self, session, actor, prepared, known)
        exists = set(known)
        fresh: dict[int, Prepared] = {}
        for i, p in prepared.items():
            if p.file.name not in exists:
                exists.add(p.file.name)  # a name twice in one request: the second takes the per-file path
                fresh[i] = p
        if len(fresh) < BULK_MIN_FILES:
            return done
        try:
            with session.begin_nested():
                results = create_sessions(self, session, actor, list(fresh.values()))
        except (SQLAlchemyError, BulkConflict) as exc:
            log.info("bulk ingest fell back to one file at a time (%s)", type(exc).__name__)
            return done
        return {**done, **dict(zip(fresh, results, strict=True))}

    def _ingest_one(self, session: Session, actor: Actor, p: Prepared) -> FileResult:
        f, parsed = p.file, p.parsed
        # A re-sent file is recognised in one read, without a savepoint or a lock.
        outcome = unchanged_session(session, actor, f.name, parsed.messages)
        new_segments = 0
        if outcome is None:
            with session.begin_nested():  # one savepoint per file: a failing file does not sink the others
                metadata, _ = self.scrubber.json(parsed.metadata)
                outcome = store_session(
                    session, actor, f.name, parsed.format, parsed.messages, metadata or {}
                )
                if outcome.status != "unchanged" and self.segment_inline:
                    new_segments = self.segment(session, outcome.session_id, messages=parsed.messages)
        archived = self.archive(session, actor, "ingest_file", f.name, f.content, outcome.session_id)
        return FileResult(
            name=f.name,
            status=outcome.status,
            session_id=outcome.session_id,
            format=parsed.format,
            messages=outcome.message_count,
            new_messages=outcome.new_messages,
            new_segments=new_segments,
            archived=archived,
            malformed_lines=p.problems,
        )

    @property
    def segment_inline(self) -> bool:
        # The heuristic splitter is cheap and cannot fail on a model; an LLM's work belongs in the worker.
        return self.settings.ingest_segment_inline and not self.intelligence.llm_available

    # --- text --------------------------------------------------------------------------------

    def ingest_text(self, session: Session, actor: Actor, text: str) -> IngestTextResult:
        """Extract memories from free text with the main LLM (offline: the heuristic) and upload each."""
        if not text.strip():
            raise ValidationFailed("text is empty")
        if len(text) > self.settings.ingest_text_max_chars:
            raise PayloadTooLarge(
                f"text is {len(text)} characters; the limit is {self.settings.ingest_text_max_chars}"
            )
        clean, _ = self.scrubber.text(text)
        self.archive(session, actor, "ingest_text", "", text.encode("utf-8"))
        items = self.intelligence.extract(clean)
        uploaded: list[UploadResult] = []
        limit = self.settings.max_field_chars
        for item in items:
            request = UploadRequest(
                content=str(item["content"])[:limit],
                context=str(item.get("context") or "")[:limit],
                resolution=str(item.get("resolution") or "")[:limit],
                tags=[str(t)[:64] for t in item.get("tags") or []][:10],
            )
            uploaded.append(self.memory.upload(session, actor, request))
        return IngestTextResult(
            memories_extracted=len(items), memories_uploaded=len(uploaded), memories=uploaded
        )
