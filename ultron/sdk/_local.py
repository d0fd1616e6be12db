"""In-process backend: the hub's services on this process's own connection pool."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar
from uuid import UUID

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from ultron import validation
from ultron.clusters import views as cluster_views
from ultron.clusters.schemas import ClusterDetail, ClusterSummary
from ultron.companion.schemas import Brief, Dream, ReflectionRequest, ReflectionResult
from ultron.db.models import Agent, Tenant
from ultron.errors import NotFound
from ultron.groups import service as groups
from ultron.groups.schemas import GroupInfo
from ultron.hub import Hub, build_worker
from ultron.ingestion.schemas import (
    ImportStatus,
    IngestFile,
    IngestResult,
    IngestTextResult,
)
from ultron.memory.batch import check_items, summarize
from ultron.memory.prefix import ids_with_prefix
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
from ultron.skills.schemas import (
    EvolutionEntry,
    SkillDetail,
    SkillHit,
    SkillStatusFilter,
    SkillSummary,
    SkillUploadResult,
)
from ultron.tenancy import Actor, ensure_tenant, local_actor, member_groups
from ultron.trajectory import views
from ultron.trajectory.schemas import SegmentInfo, SessionInfo
from ultron.vault.exchange import export_page, import_files
from ultron.vault.schemas import ExportPage, ImportResult, VaultFile
from ultron.worker.status import WorkerStatus, worker_status

T = TypeVar("T")


class LocalBackend:
    def __init__(
        self,
        hub: Hub,
        *,
        agent: str | None = None,
        tenant: str = "default",
        owns_hub: bool = True,
        create_agent: bool = True,
    ):
        self.hub = hub
        self._owns_hub = owns_hub
        with hub.db.session() as session:
            if agent is None:
                self.actor = local_actor(session)
            elif create_agent:
                self.actor = _named_actor(session, agent, tenant)
            else:
                self.actor = existing_actor(session, agent, tenant)

    def _run(self, fn: Callable[[Session, Actor], T], *, read: bool = False) -> T:
        """`fn` as this agent; `read=True`: it writes nothing and may run on a read replica (like
        `RequestUnit.read` in ultron/routing/deps.py)."""
        db = self.hub.db
        key = (self.actor.tenant_id, self.actor.agent_id)
        if read and db.replicas:
            if self.actor.agent_id is not None:  # memberships from the primary, like authentication
                with db.session() as session:
                    self.actor = replace(self.actor, groups=member_groups(session, self.actor.agent_id))
            return db.read(lambda session: fn(session, self.actor), key)
        with db.session() as session:
            # Memberships change while a client lives (an admin adds it to a group): read them per call.
            if self.actor.agent_id is not None:
                self.actor = replace(self.actor, groups=member_groups(session, self.actor.agent_id))
            result = fn(session, self.actor)
        if not read:
            db.wrote(key)
        return result

    def upload(self, req: UploadRequest) -> UploadResult:
        return self._run(lambda s, a: self.hub.memory.upload(s, a, req))

    def upload_batch(self, items: list[dict[str, Any]]) -> UploadBatchResult:

        memory = self.hub.memory
        reqs = check_items(items)
        with self.hub.db.session() as session:  # the tenant's policy and groups, in a short read
            memory.load_tenant_policy(session, self.actor.tenant_id)
            if self.actor.agent_id is not None:
                self.actor = replace(self.actor, groups=member_groups(session, self.actor.agent_id))
        # The provider work (NER, typing, summaries, one embedding call) holds no connection.
        prepared = memory.prepare_batch(reqs, self.actor)
        return summarize(self._run(lambda s, a: memory.upload_batch(s, a, reqs, prepared)))

    def search(self, query: str, **options: Any) -> list[SearchResult]:
        validation.check_text(query, "query", max_chars=validation.MAX_QUERY_CHARS)
        return self._run(lambda s, a: self.hub.memory.search(s, a, query, **options), read=True)

    def details(self, ids: list[UUID]) -> list[MemoryRecord]:
        return self._run(lambda s, a: self.hub.memory.details(s, a, ids))

    def get(self, memory_id: UUID) -> MemoryRecord:
        return self._run(lambda s, a: self.hub.memory.get(s, a, memory_id), read=True)

    def vault_export_page(self, after: str | None) -> ExportPage:
        return self._run(lambda s, a: export_page(self.hub.memory, self.hub.skills, s, a, after), read=True)

    def vault_import(self, files: list[tuple[str, str]]) -> ImportResult:
        chunk = [VaultFile(path=p, text=t) for p, t in files]
        return self._run(lambda s, a: import_files(self.hub.memory, s, a, chunk))

    def ids_with_prefix(self, prefix: str) -> list[UUID]:
        return self._run(lambda s, a: ids_with_prefix(s, a, prefix), read=True)

    def thread(self, memory_id: UUID, span: int) -> list[MemoryRecord]:
        return self._run(lambda s, a: self.hub.memory.thread(s, a, memory_id, span), read=True)

    def contributions(self, memory_id: UUID) -> list[Contribution]:
        return self._run(lambda s, a: self.hub.memory.contributions(s, a, memory_id), read=True)

    def split(self, memory_id: UUID, contribution_id: int) -> SplitResult:
        return self._run(lambda s, a: self.hub.memory.split(s, a, memory_id, contribution_id))

    def edit(self, memory_id: UUID, patch: MemoryPatch) -> MemoryRecord:
        return self._run(lambda s, a: self.hub.memory.edit(s, a, memory_id, patch))

    def delete(self, memory_id: UUID) -> None:
        self._run(lambda s, a: self.hub.memory.delete(s, a, memory_id))

    def stats(self) -> MemoryStats:
        return self._run(lambda s, a: self.hub.memory.stats(s, a), read=True)

    def brief(self, task: str | None, max_tokens: int | None) -> Brief:
        if task is not None:
            validation.check_text(task, "task", max_chars=validation.MAX_TASK_CHARS)
        return self._run(lambda s, a: self.hub.companion.brief(s, a, task, max_tokens), read=True)

    def pin(self, memory_id: UUID, pinned: bool) -> MemoryRecord:
        return self._run(lambda s, a: self.hub.companion.pin(s, a, memory_id, pinned))

    def resolve(self, memory_id: UUID, resolved: bool) -> MemoryRecord:
        return self._run(lambda s, a: self.hub.companion.resolve(s, a, memory_id, resolved))

    def dream(self, limit: int) -> Dream:
        return self._run(lambda s, a: self.hub.companion.dream(s, a, limit))

    def reflect(self, req: ReflectionRequest) -> ReflectionResult:
        return self._run(lambda s, a: self.hub.companion.reflect(s, a, req))

    def list_groups(self) -> list[GroupInfo]:
        return self._run(groups.list_groups, read=True)

    def agent_groups(self, agent: str | None) -> list[str]:
        return self._run(lambda s, a: groups.agent_groups(s, a, agent))

    def create_group(self, name: str) -> GroupInfo:
        return self._run(lambda s, a: groups.create_group(s, a, name))

    def delete_group(self, name: str) -> None:
        self._run(lambda s, a: groups.delete_group(s, a, name))

    def add_member(self, group: str, agent: str) -> GroupInfo:
        return self._run(lambda s, a: groups.add_member(s, a, group, agent))

    def remove_member(self, group: str, agent: str) -> GroupInfo:
        return self._run(lambda s, a: groups.remove_member(s, a, group, agent))

    def ingest_files(self, files: list[IngestFile]) -> IngestResult:
        return self._run(lambda s, a: self.hub.ingestion.ingest_files(s, a, files))

    def ingest_text(self, text: str) -> IngestTextResult:
        return self._run(lambda s, a: self.hub.ingestion.ingest_text(s, a, text))

    def process_trajectories(self, limit: int) -> dict[str, int]:
        return build_worker(self.hub).process_due(self.actor.tenant_id, limit)

    def import_history(self, kind: str, name: str, data: bytes, wait: bool) -> ImportStatus:
        status = self._run(lambda s, a: self.hub.ingestion.imports.start(s, a, kind, name, data))
        return self.hub.ingestion.imports.run(self.actor, status.id) if wait else status

    def list_sessions(self, limit: int) -> list[SessionInfo]:

        return self._run(lambda s, a: views.list_sessions(s, a, limit=limit))

    def list_segments(self, session_id: UUID | None, stage: str | None, limit: int) -> list[SegmentInfo]:

        return self._run(
            lambda s, a: views.list_segments(s, a, session_id=session_id, stage=stage, limit=limit)
        )

    def list_imports(self) -> list[ImportStatus]:
        return self._run(lambda s, a: self.hub.ingestion.imports.list_jobs(s, a))

    def import_status(self, job_id: UUID) -> ImportStatus:
        return self._run(lambda s, a: self.hub.ingestion.imports.status(s, a, job_id))

    def worker_status(self) -> WorkerStatus:

        lease = self.hub.settings.worker_lease_seconds
        return self._run(lambda s, a: worker_status(s, a.tenant_id, lease_seconds=lease))

    def search_skills(self, query: str, limit: int) -> list[SkillHit]:
        return self._run(lambda s, a: self.hub.skills.hits(s, a.tenant_id, query, limit))

    def list_skills(self, status: SkillStatusFilter, limit: int, offset: int) -> list[SkillSummary]:
        skills = self.hub.skills
        return self._run(
            lambda s, a: skills.list_skills(s, a.tenant_id, status=status, limit=limit, offset=offset)
        )

    def get_skill(self, slug: str, version: str | None) -> SkillDetail:
        return self._run(lambda s, a: self.hub.skills.detail(s, a.tenant_id, slug, version))

    def skill_md(self, slug: str, version: str | None) -> str:
        skills = self.hub.skills
        return self._run(lambda s, a: skills.skill_md(skills.latest(s, a.tenant_id, slug, version)))

    def skill_folder(self, slug: str, version: str | None) -> dict[str, str]:
        return self._run(lambda s, a: self.hub.skills.folder(s, a.tenant_id, slug, version))

    def skill_history(self, slug: str, limit: int) -> list[EvolutionEntry]:
        return self._run(lambda s, a: self.hub.skills.history(s, a.tenant_id, slug, limit))

    def upload_skill(self, files: dict[str, str]) -> SkillUploadResult:
        return self._run(lambda s, a: self.hub.skills.upload(s, a, files))

    def list_clusters(self, limit: int, offset: int) -> list[ClusterSummary]:
        settings = self.hub.settings
        return self._run(lambda s, a: cluster_views.list_clusters(s, a, settings, limit=limit, offset=offset))

    def get_cluster(self, cluster_id: UUID) -> ClusterDetail:
        hub = self.hub
        return self._run(
            lambda s, a: cluster_views.cluster_detail(s, a, hub.settings, hub.skills, cluster_id)
        )

    def close(self) -> None:
        if self._owns_hub:
            self.hub.close()


def _named_actor(session: Session, name: str, tenant: str) -> Actor:
    """Act in-process as a named agent (created without a key if it does not exist)."""

    tenant_id = ensure_tenant(session, tenant)
    session.execute(
        insert(Agent)
        .values(tenant_id=tenant_id, name=name)
        .on_conflict_do_nothing(constraint="uq_agents_tenant_name")
    )
    agent = session.execute(
        select(Agent).where(Agent.tenant_id == tenant_id, Agent.name == name)
    ).scalar_one()
    return Actor(tenant_id, agent.id, agent.name, tenant, member_groups(session, agent.id), agent.is_admin)


def existing_actor(session: Session, name: str, tenant: str) -> Actor:
    """Act in-process as an agent that exists; NotFound (with how to create it) otherwise."""

    row = session.execute(
        select(Agent, Tenant.name)
        .join(Tenant, Tenant.id == Agent.tenant_id)
        .where(Tenant.name == tenant, Agent.name == name)
    ).first()
    if row is None:
        raise NotFound(
            f"no agent {name!r} in tenant {tenant!r}: create it with "
            f"`ultron agents create {name} --tenant {tenant}`"
        )
    agent = row[0]
    return Actor(
        agent.tenant_id, agent.id, agent.name, tenant, member_groups(session, agent.id), agent.is_admin
    )
