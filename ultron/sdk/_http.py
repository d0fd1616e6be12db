"""HTTP backend: the same calls as the in-process backend, over the hub's JSON API."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ultron.clusters.schemas import ClusterDetail, ClusterSummary
from ultron.companion.schemas import Brief, Dream, ReflectionRequest, ReflectionResult
from ultron.errors import (
    Conflict,
    DatabaseSetupError,
    Forbidden,
    NotFound,
    PayloadTooLarge,
    UltronError,
    Unauthorized,
    ValidationFailed,
)
from ultron.groups.schemas import GroupInfo
from ultron.ingestion.schemas import (
    ImportStatus,
    IngestFile,
    IngestResult,
    IngestTextResult,
)
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
from ultron.skills import bundle
from ultron.skills.schemas import (
    EvolutionEntry,
    SkillDetail,
    SkillHit,
    SkillStatusFilter,
    SkillSummary,
    SkillUploadResult,
)
from ultron.trajectory.schemas import SegmentInfo, SessionInfo
from ultron.vault.schemas import ExportPage, ImportResult

if TYPE_CHECKING:  # its module imports SQLAlchemy: loaded on first use (worker_status)
    from ultron.worker.status import WorkerStatus

IMPORT_POLL_SECONDS = 0.5
_ERRORS: dict[int, type[UltronError]] = {
    400: UltronError,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: ValidationFailed,
    503: DatabaseSetupError,
}


_WRITTEN = "X-Ultron-Written-LSN"  # ultron.routing.deps.WRITTEN_HEADER (not imported: the SDK stays light)
_READ_AFTER = "X-Ultron-Read-After"


def _lsn(value: str | None) -> tuple[int, str] | None:
    high, sep, low = (value or "").partition("/")
    try:
        return ((int(high, 16) << 32) | int(low, 16), value) if sep else None  # type: ignore[return-value]
    except ValueError:
        return None


def _raise_for(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        body = response.json()
        detail = _detail(body.get("detail")) or response.text
    except ValueError:
        detail = response.text or response.reason_phrase
    raise _ERRORS.get(response.status_code, UltronError)(f"{detail}")


def _detail(detail: Any) -> str:
    """FastAPI's 422 detail is a list of errors: one `field: message` per error, joined."""
    if isinstance(detail, list):
        return "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', [])[1:]) or 'body'}: {e.get('msg')}"
            if isinstance(e, dict)
            else str(e)
            for e in detail
        )
    return "" if detail is None else str(detail)


class HttpBackend:
    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ):
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport
        )
        # Read-your-writes with read replicas: the hub's WAL position after this client's last write,
        # sent back on every request so that any API process serves its reads from a replica only once
        # that replica has replayed it (docs/operations.md#read-replicas).
        self._read_after: tuple[int, str] | None = None

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._raw(method, path, **kwargs)
        return response.json() if response.content else None

    def _raw(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        if self._read_after is not None:
            kwargs["headers"] = {**(kwargs.get("headers") or {}), _READ_AFTER: self._read_after[1]}
        response = self._http.request(method, path, **kwargs)
        written = _lsn(response.headers.get(_WRITTEN))
        if written is not None and (self._read_after is None or written[0] > self._read_after[0]):
            self._read_after = written
        _raise_for(response)
        return response

    def upload(self, req: UploadRequest) -> UploadResult:
        return UploadResult.model_validate(self._request("POST", "/memories/upload", json=req.model_dump()))

    def upload_batch(self, items: list[dict[str, Any]]) -> UploadBatchResult:
        body = self._request("POST", "/memories/upload-batch", json={"items": items})
        return UploadBatchResult.model_validate(body)

    def search(self, query: str, **options: Any) -> list[SearchResult]:
        filters = options.pop("filters", None)
        body = {"query": query, **{k: v for k, v in options.items() if v is not None}}
        if filters is not None:  # the request takes them as its own fields
            body.update(filters.model_dump(mode="json", exclude_none=True))
        data = self._request("POST", "/memories/search", json=body)
        return [SearchResult.model_validate(r) for r in data["results"]]

    def details(self, ids: list[UUID]) -> list[MemoryRecord]:
        data = self._request("POST", "/memories/details", json={"ids": [str(i) for i in ids]})
        return [MemoryRecord.model_validate(r) for r in data["records"]]

    def get(self, memory_id: UUID) -> MemoryRecord:
        return MemoryRecord.model_validate(self._request("GET", f"/memories/{memory_id}"))

    def vault_export_page(self, after: str | None) -> ExportPage:
        return ExportPage.model_validate(self._request("POST", "/vault/export", json={"after": after}))

    def vault_import(self, files: list[tuple[str, str]]) -> ImportResult:
        body = {"files": [{"path": p, "text": t} for p, t in files]}
        return ImportResult.model_validate(self._request("POST", "/vault/import", json=body))

    def ids_with_prefix(self, prefix: str) -> list[UUID]:
        return [UUID(i) for i in self._request("GET", f"/memories/by-prefix/{quote(prefix, safe='')}")]

    def thread(self, memory_id: UUID, span: int) -> list[MemoryRecord]:
        data = self._request("GET", f"/memories/{memory_id}/thread", params={"span": span})
        return [MemoryRecord.model_validate(r) for r in data]

    def contributions(self, memory_id: UUID) -> list[Contribution]:
        return [
            Contribution.model_validate(c)
            for c in self._request("GET", f"/memories/{memory_id}/contributions")
        ]

    def split(self, memory_id: UUID, contribution_id: int) -> SplitResult:
        body = {"contribution_id": contribution_id}
        return SplitResult.model_validate(self._request("POST", f"/memories/{memory_id}/split", json=body))

    def edit(self, memory_id: UUID, patch: MemoryPatch) -> MemoryRecord:
        body = patch.model_dump(exclude_unset=True)
        return MemoryRecord.model_validate(self._request("PATCH", f"/memories/{memory_id}", json=body))

    def delete(self, memory_id: UUID) -> None:
        self._request("DELETE", f"/memories/{memory_id}")

    def stats(self) -> MemoryStats:
        return MemoryStats.model_validate(self._request("GET", "/memories/stats"))

    def brief(self, task: str | None, max_tokens: int | None) -> Brief:

        params = {k: v for k, v in {"task": task, "max_tokens": max_tokens}.items() if v is not None}
        return Brief.model_validate(self._request("GET", "/brief", params=params))

    def pin(self, memory_id: UUID, pinned: bool) -> MemoryRecord:
        path = f"/memories/{memory_id}/{'pin' if pinned else 'unpin'}"
        return MemoryRecord.model_validate(self._request("POST", path))

    def resolve(self, memory_id: UUID, resolved: bool) -> MemoryRecord:
        path = f"/memories/{memory_id}/{'resolve' if resolved else 'unresolve'}"
        return MemoryRecord.model_validate(self._request("POST", path))

    def dream(self, limit: int) -> Dream:

        return Dream.model_validate(self._request("GET", "/reflect", params={"limit": limit}))

    def reflect(self, req: ReflectionRequest) -> ReflectionResult:

        body = req.model_dump(mode="json")
        return ReflectionResult.model_validate(self._request("POST", "/reflections", json=body))

    def list_groups(self) -> list[GroupInfo]:
        return [GroupInfo.model_validate(g) for g in self._request("GET", "/groups")]

    def agent_groups(self, agent: str | None) -> list[str]:
        path = "/agents/me/groups" if agent is None else f"/agents/{quote(agent, safe='')}/groups"
        return list(self._request("GET", path))

    def create_group(self, name: str) -> GroupInfo:
        return GroupInfo.model_validate(self._request("POST", "/groups", json={"name": name}))

    def delete_group(self, name: str) -> None:
        self._request("DELETE", f"/groups/{quote(name, safe='')}")

    def add_member(self, group: str, agent: str) -> GroupInfo:
        path = f"/groups/{quote(group, safe='')}/members/{quote(agent, safe='')}"
        return GroupInfo.model_validate(self._request("PUT", path))

    def remove_member(self, group: str, agent: str) -> GroupInfo:
        path = f"/groups/{quote(group, safe='')}/members/{quote(agent, safe='')}"
        return GroupInfo.model_validate(self._request("DELETE", path))

    def ingest_files(self, files: list[IngestFile], timeout: float | None = None) -> IngestResult:
        """`timeout`: this request's wait, when the client's default does not fit what it carries."""
        parts = [("files", (f.name, f.content, "application/octet-stream")) for f in files]
        extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        return IngestResult.model_validate(self._request("POST", "/ingest", files=parts, **extra))

    def ingest_text(self, text: str) -> IngestTextResult:

        return IngestTextResult.model_validate(self._request("POST", "/ingest/text", json={"text": text}))

    def process_trajectories(self, limit: int) -> dict[str, int]:
        return dict(self._request("POST", "/trajectory/process", json={"limit": limit}))

    def import_history(self, kind: str, name: str, data: bytes, wait: bool) -> ImportStatus:

        files = {"file": (name, data, "application/octet-stream")}
        status = ImportStatus.model_validate(
            self._request("POST", "/imports", data={"kind": kind, "name": name}, files=files)
        )
        while wait and status.status == "running":
            time.sleep(IMPORT_POLL_SECONDS)
            status = ImportStatus.model_validate(self._request("GET", f"/imports/{status.id}"))
        return status

    def list_sessions(self, limit: int) -> list[SessionInfo]:

        data = self._request("GET", "/sessions", params={"limit": limit})
        return [SessionInfo.model_validate(r) for r in data]

    def list_segments(self, session_id: UUID | None, stage: str | None, limit: int) -> list[SegmentInfo]:

        params = {"session_id": session_id, "stage": stage, "limit": limit}
        data = self._request("GET", "/segments", params={k: v for k, v in params.items() if v is not None})
        return [SegmentInfo.model_validate(r) for r in data]

    def list_imports(self) -> list[ImportStatus]:

        return [ImportStatus.model_validate(r) for r in self._request("GET", "/imports")]

    def import_status(self, job_id: UUID) -> ImportStatus:

        return ImportStatus.model_validate(self._request("GET", f"/imports/{job_id}"))

    def worker_status(self) -> WorkerStatus:
        # start-up: the worker's status model imports SQLAlchemy; an HTTP client loads it on first use
        from ultron.worker.status import WorkerStatus

        return WorkerStatus.model_validate(self._request("GET", "/worker/status"))

    def search_skills(self, query: str, limit: int) -> list[SkillHit]:

        data = self._request("POST", "/skills/search", json={"query": query, "limit": limit})
        return [SkillHit.model_validate(h) for h in data]

    def list_skills(self, status: SkillStatusFilter, limit: int, offset: int) -> list[SkillSummary]:

        params = {"status": status, "limit": limit, "offset": offset}
        return [SkillSummary.model_validate(r) for r in self._request("GET", "/skills", params=params)]

    def get_skill(self, slug: str, version: str | None) -> SkillDetail:

        return SkillDetail.model_validate(self._request("GET", _skill(slug), params=_version(version)))

    def skill_md(self, slug: str, version: str | None) -> str:
        return self._raw("GET", f"{_skill(slug)}/SKILL.md", params=_version(version)).text

    def skill_folder(self, slug: str, version: str | None) -> dict[str, str]:
        data = self._raw("GET", f"{_skill(slug)}/archive.zip", params=_version(version)).content
        return bundle.read_zip(data)

    def skill_history(self, slug: str, limit: int) -> list[EvolutionEntry]:

        data = self._request("GET", f"{_skill(slug)}/history", params={"limit": limit})
        return [EvolutionEntry.model_validate(r) for r in data]

    def upload_skill(self, files: dict[str, str]) -> SkillUploadResult:

        return SkillUploadResult.model_validate(self._request("POST", "/skills", json={"files": files}))

    def list_clusters(self, limit: int, offset: int) -> list[ClusterSummary]:

        data = self._request("GET", "/clusters", params={"limit": limit, "offset": offset})
        return [ClusterSummary.model_validate(r) for r in data]

    def get_cluster(self, cluster_id: UUID) -> ClusterDetail:

        return ClusterDetail.model_validate(self._request("GET", f"/clusters/{cluster_id}"))

    def close(self) -> None:
        self._http.close()


def _skill(slug: str) -> str:
    return f"/skills/{quote(slug, safe='')}"


def _version(version: str | None) -> dict[str, str]:
    return {"version": version} if version is not None else {}
