"""`Ultron`: one interface and one set of typed results and errors, in-process or over HTTP."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

import httpx

from ultron.memory.filters import search_filters
from ultron.memory.schemas import (
    Contribution,
    MemoryPatch,
    MemoryRecord,
    MemoryStats,
    SearchResult,
    SplitResult,
    UploadBatchResult,
    UploadRequest,
    UploadResult,
)
from ultron.vault.files import VaultReport, read_files, write_files

if TYPE_CHECKING:  # loaded where used: a CLI search needs the memory schemas and nothing else
    from ultron.clusters.schemas import ClusterDetail, ClusterSummary
    from ultron.companion.schemas import Brief, Dream, ReflectionResult
    from ultron.config import Settings
    from ultron.groups.schemas import GroupInfo
    from ultron.ingestion.schemas import (
        ImportStatus,
        IngestResult,
        IngestTextResult,
    )
    from ultron.skills.schemas import (
        EvolutionEntry,
        SkillDetail,
        SkillHit,
        SkillStatusFilter,
        SkillSummary,
        SkillUploadResult,
    )
    from ultron.trajectory.schemas import SegmentInfo, SessionInfo
    from ultron.worker.status import WorkerStatus


def _uuid(value: UUID | str) -> UUID:
    return value if isinstance(value, UUID) else UUID(str(value))


def _listed(value: Sequence[str] | str | None) -> list[str] | None:
    """A list filter; one value alone is a list of one (types="error")."""
    if value is None:
        return None
    return [value] if isinstance(value, str) else list(value)


class Ultron:
    """Shared memory for agents.

    `Ultron()` runs the hub's services in this process (embedded Postgres in ~/.ultron unless
    ULTRON_DATABASE_URL is set). `Ultron(base_url=..., api_key=...)` talks to a running hub over HTTP.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        settings: Settings | None = None,
        agent: str | None = None,
        tenant: str = "default",
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
        hub: Any = None,
    ):
        self._backend: Any
        if base_url is not None:
            # start-up: each backend loads only when chosen (an HTTP client never imports the hub)
            from ultron.sdk._http import HttpBackend

            self._backend = HttpBackend(base_url, api_key, timeout=timeout, transport=transport)
        else:
            # start-up: the in-process backend and the hub, only for a local client
            from ultron.hub import Hub
            from ultron.sdk._local import LocalBackend

            owns = hub is None
            if hub is None:
                # start-up: pydantic-settings, only for a local client
                from ultron.config import Settings

                hub = Hub.open(settings or Settings())
            self._backend = LocalBackend(hub, agent=agent, tenant=tenant, owns_hub=owns)

    @classmethod
    def _of(cls, backend: Any) -> Ultron:
        """A client over a backend built elsewhere (the CLI's in-process one, which never creates agents)."""
        client = cls.__new__(cls)
        client._backend = backend
        return client

    # --- memories ------------------------------------------------------------------------------

    def upload_memory(
        self,
        content: str,
        context: str = "",
        resolution: str = "",
        tags: Sequence[str] | None = None,
        *,
        scope: str = "shared",
        group: str | None = None,
        valence: float | None = None,
        arousal: float | None = None,
        importance: int | None = None,
    ) -> MemoryRecord:
        """Store an experience; returns the memory it became (new or merged into)."""
        return self.upload(
            content,
            context,
            resolution,
            tags,
            scope=scope,
            group=group,
            valence=valence,
            arousal=arousal,
            importance=importance,
        ).record

    def upload(
        self,
        content: str,
        context: str = "",
        resolution: str = "",
        tags: Sequence[str] | None = None,
        *,
        scope: str = "shared",
        group: str | None = None,
        valence: float | None = None,
        arousal: float | None = None,
        importance: int | None = None,
    ) -> UploadResult:
        """Like upload_memory, with the dedup decision and similarity."""
        req = UploadRequest(
            content=content,
            context=context,
            resolution=resolution,
            tags=list(tags or []),
            scope=scope,
            group=group,
            valence=valence,
            arousal=arousal,
            importance=importance,
        )  # type: ignore[arg-type]
        return self._backend.upload(req)

    def upload_batch(self, items: Sequence[UploadRequest | Mapping[str, Any]]) -> UploadBatchResult:
        """Up to 500 uploads in one call (each an `UploadRequest` or a dict of its fields), de-duplicated
        exactly as the same uploads one by one would be; per-item results in order (created, merged,
        or refused with the reason: a bad item does not stop the others)."""
        return self._backend.upload_batch(
            [i.model_dump(mode="json") if isinstance(i, UploadRequest) else dict(i) for i in items]
        )

    def search_memories(
        self,
        query: str,
        tier: str | None = None,
        limit: int | None = None,
        detail_level: str = "l0",
        *,
        explain: bool = False,
        valence: float | None = None,
        arousal: float | None = None,
        serendipity: bool | None = None,
        min_relevance: float | None = None,
        types: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        agents: Sequence[str] | None = None,
        scopes: Sequence[str] | None = None,
        thread: str | None = None,
        occurred_after: datetime | str | None = None,
        occurred_before: datetime | str | None = None,
        created_after: datetime | str | None = None,
        created_before: datetime | str | None = None,
    ) -> list[SearchResult]:
        """Hybrid search; a mood (valence/arousal) adds emotional resonance, serendipity old surprises.

        Each result carries `confidence` ("low" below the relevance floor; min_relevance overrides it).
        Filters: AND across fields, OR within a list (types, tags, agents by name, scopes); the time bounds
        are ISO 8601 or datetimes (UTC when they name no zone). A bad filter raises ValidationFailed."""
        filters = search_filters(
            types=_listed(types),
            tags=_listed(tags),
            agents=_listed(agents),
            scopes=_listed(scopes),
            thread=thread,
            occurred_after=occurred_after,
            occurred_before=occurred_before,
            created_after=created_after,
            created_before=created_before,
        )
        signals = {
            "valence": valence,
            "arousal": arousal,
            "serendipity": serendipity,
            "min_relevance": min_relevance,
            "filters": filters,
        }
        return self._backend.search(
            query,
            tier=tier,
            limit=limit,
            detail_level=detail_level,
            explain=explain,
            **{k: v for k, v in signals.items() if v is not None},
        )

    def get_memory_details(self, ids: Sequence[UUID | str]) -> list[MemoryRecord]:
        return self._backend.details([_uuid(i) for i in ids])

    def get_memory(self, memory_id: UUID | str) -> MemoryRecord:
        return self._backend.get(_uuid(memory_id))

    def find_memory_ids(self, prefix: str) -> list[UUID]:
        """Ids of the memories you may see starting with `prefix` (6+ hex characters; at most 10)."""
        return self._backend.ids_with_prefix(prefix)

    def get_thread(self, memory_id: UUID | str, span: int = 2) -> list[MemoryRecord]:
        """The memory with its neighbouring turns of the same conversation (position within span)."""
        return self._backend.thread(_uuid(memory_id), span)

    def get_contributions(self, memory_id: UUID | str) -> list[Contribution]:
        return self._backend.contributions(_uuid(memory_id))

    def split_memory(self, memory_id: UUID | str, contribution_id: int) -> SplitResult:
        """Undo a merge: the contribution becomes its own memory again (its contributor or an admin)."""
        return self._backend.split(_uuid(memory_id), int(contribution_id))

    def edit_memory(self, memory_id: UUID | str, **changes: Any) -> MemoryRecord:
        return self._backend.edit(_uuid(memory_id), MemoryPatch(**changes))

    def delete_memory(self, memory_id: UUID | str) -> None:
        self._backend.delete(_uuid(memory_id))

    def get_memory_stats(self) -> MemoryStats:
        return self._backend.stats()

    def export_markdown(self, directory: str | os.PathLike[str]) -> tuple[int, int]:
        """Write the Markdown vault of what you may see into `directory` (written here, rendered by the
        hub); returns (memories, skills) written."""
        memories = skills = 0
        after: str | None = None
        while True:
            page = self._backend.vault_export_page(after)
            files = [(f.path, f.text) for f in page.files]
            write_files(Path(directory), files)
            skills += sum(1 for p, _ in files if p.startswith("skills/"))
            memories += sum(1 for p, _ in files if not p.startswith(("skills/", "entities/")))
            if page.next is None:
                return memories, skills
            after = page.next

    def import_markdown(self, directory: str | os.PathLike[str]) -> VaultReport:
        """Create or update the memories of a Markdown vault (same ids), read here, stored by the hub."""
        report = VaultReport()
        for chunk in read_files(Path(directory)):
            done = self._backend.vault_import(chunk)
            report.add(VaultReport(created=done.created, updated=done.updated, skipped=done.skipped))
        return report

    # The names users of other memory libraries type first; each is the method it names, not a wrapper.
    add = upload_memory
    search = search_memories
    get = get_memory
    update = edit_memory
    delete = delete_memory

    # --- companion memory ----------------------------------------------------------------------

    def brief(self, task: str | None = None, max_tokens: int | None = None) -> Brief:
        """What to know at session start: pinned, personal, HOT memories relevant to `task`, skills."""
        return self._backend.brief(task, max_tokens)

    def pin_memory(self, memory_id: UUID | str) -> MemoryRecord:
        return self._backend.pin(_uuid(memory_id), True)

    def unpin_memory(self, memory_id: UUID | str) -> MemoryRecord:
        return self._backend.pin(_uuid(memory_id), False)

    def resolve_memory(self, memory_id: UUID | str, resolved: bool = True) -> MemoryRecord:
        """Resolve (or, with resolved=False, reopen): a resolved memory sinks in search and the brief."""
        return self._backend.resolve(_uuid(memory_id), resolved)

    def dream(self, limit: int = 10) -> Dream:
        """Recent memories not yet reflected on, with reflection prompts."""
        return self._backend.dream(limit)

    def reflect(
        self,
        content: str,
        context: str = "",
        resolution: str = "",
        tags: Sequence[str] | None = None,
        *,
        source_ids: Sequence[UUID | str] = (),
        scope: str = "private",
        group: str | None = None,
    ) -> ReflectionResult:
        """Store a reflection (the agent's own lesson) and mark `source_ids` as reflected on."""
        # start-up: loaded where used (a CLI search needs the memory schemas and nothing else)
        from ultron.companion.schemas import ReflectionRequest

        req = ReflectionRequest(
            content=content,
            context=context,
            resolution=resolution,
            tags=list(tags or []),
            source_ids=[_uuid(i) for i in source_ids],
            scope=scope,  # type: ignore[arg-type]
            group=group,
        )
        return self._backend.reflect(req)

    # --- groups -------------------------------------------------------------------------------------

    def list_groups(self) -> list[GroupInfo]:
        """Every group of the tenant (admin) or the caller's own, with members and memory counts."""
        return self._backend.list_groups()

    def agent_groups(self, agent: str | None = None) -> list[str]:
        """The groups of `agent` (default: this client's agent; another agent's needs an admin)."""
        return self._backend.agent_groups(agent)

    def create_group(self, name: str) -> GroupInfo:
        """Create a group (admin)."""
        return self._backend.create_group(name)

    def delete_group(self, name: str) -> None:
        """Delete a group (admin); refused while it still holds memories."""
        self._backend.delete_group(name)

    def add_to_group(self, group: str, agent: str) -> GroupInfo:
        """Add `agent` to `group` (admin)."""
        return self._backend.add_member(group, agent)

    def remove_from_group(self, group: str, agent: str) -> GroupInfo:
        """Remove `agent` from `group` (admin)."""
        return self._backend.remove_member(group, agent)

    # --- ingestion and trajectories -------------------------------------------------------------

    def ingest(self, paths: Sequence[str | os.PathLike[str]]) -> IngestResult:
        """Ingest session files: directories expand recursively to their .jsonl files (hidden segments and
        symlinks skipped). Files are read here, on this machine, and their contents sent to the hub."""
        # start-up: loaded where used (a CLI search needs the memory schemas and nothing else)
        from ultron.ingestion.paths import ingest_paths

        return ingest_paths(self._backend.ingest_files, paths)

    def ingest_text(self, text: str) -> IngestTextResult:
        """Extract memories from free text and upload each (no session is stored)."""
        return self._backend.ingest_text(text)

    def process_trajectories(self, limit: int = 100) -> dict[str, int]:
        """Segment, score and extract what is due now, instead of waiting for the worker."""
        return self._backend.process_trajectories(limit)

    def import_history(self, kind: str, path: str | os.PathLike[str], *, wait: bool = True) -> ImportStatus:
        """Import a chat-history export (chatgpt, claude, deepseek, markdown, text) read from this machine."""
        # start-up: loaded where used (a CLI search needs the memory schemas and nothing else)
        from pathlib import Path

        data = Path(path).expanduser().read_bytes()
        return self._backend.import_history(kind, Path(path).name, data, wait)

    def list_sessions(self, limit: int = 50) -> list[SessionInfo]:
        """Stored sessions of the tenant, most recently updated first."""
        return self._backend.list_sessions(limit)

    def list_segments(
        self, session_id: UUID | str | None = None, stage: str | None = None, limit: int = 100
    ) -> list[SegmentInfo]:
        """Task segments with their metric values (one session's, or the tenant's newest)."""
        sid = None if session_id is None else _uuid(session_id)
        return self._backend.list_segments(sid, stage, limit)

    def list_imports(self) -> list[ImportStatus]:
        return self._backend.list_imports()

    def import_status(self, job_id: UUID | str) -> ImportStatus:
        return self._backend.import_status(_uuid(job_id))

    def worker_status(self) -> WorkerStatus:
        """Live workers and recent step runs; queue depths and parked items of the tenant."""
        return self._backend.worker_status()

    # --- skills and knowledge clusters ----------------------------------------------------------

    def search_skills(self, query: str, limit: int = 5) -> list[SkillHit]:
        """The latest active version of each skill, nearest to the query first."""
        # start-up: loaded where used (a CLI search needs the memory schemas and nothing else)
        from ultron.skills.schemas import SkillSearchRequest

        req = SkillSearchRequest(query=query, limit=limit)
        return self._backend.search_skills(req.query, req.limit)

    def list_skills(
        self, status: SkillStatusFilter = "active", limit: int = 50, offset: int = 0
    ) -> list[SkillSummary]:
        """The latest version of each skill (`status`: active, superseded or all), newest first."""
        return self._backend.list_skills(status, limit, offset)

    def get_skill(self, slug: str, version: str | None = None) -> SkillDetail:
        return self._backend.get_skill(slug, version)

    def skill_md(self, slug: str, version: str | None = None) -> str:
        return self._backend.skill_md(slug, version)

    def skill_history(self, slug: str, limit: int = 50) -> list[EvolutionEntry]:
        return self._backend.skill_history(slug, limit)

    def export_skill(self, slug: str, directory: str | os.PathLike[str], version: str | None = None) -> Path:
        """Write the skill folder to `directory/<slug>/` (SKILL.md and its files); returns that folder."""
        # start-up: loaded where used (a CLI search needs the memory schemas and nothing else)
        from ultron.skills import bundle

        return bundle.write_dir(directory, slug, self._backend.skill_folder(slug, version))

    def upload_skill(self, directory: str | os.PathLike[str]) -> SkillUploadResult:
        """Upload a skill folder holding SKILL.md, read on this machine (hidden files and links skipped)."""
        # start-up: loaded where used (a CLI search needs the memory schemas and nothing else)
        from ultron.skills import bundle

        return self._backend.upload_skill(bundle.read_dir(directory))

    def list_clusters(self, limit: int = 50, offset: int = 0) -> list[ClusterSummary]:
        return self._backend.list_clusters(limit, offset)

    def get_cluster(self, cluster_id: UUID | str) -> ClusterDetail:
        return self._backend.get_cluster(_uuid(cluster_id))

    # --- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        self._backend.close()

    def __enter__(self) -> Ultron:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class UltronClient(Ultron):
    """The HTTP client: `UltronClient(base_url, api_key)`."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ):
        super().__init__(base_url, api_key, timeout=timeout, transport=transport)
