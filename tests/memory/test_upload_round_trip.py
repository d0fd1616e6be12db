"""A single upload whose dedup probe finds nothing to merge is written by the probe's own statement
(probe_or_create_memory: one round trip after the dedup lock); an upload with a near memory goes on to
the decision and its own INSERT, exactly as before."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select, text

from ultron.db.models import ActivityEvent, ClusterQueueItem, Memory, MemoryContribution
from ultron.memory.schemas import UploadRequest
from ultron.memory.service import MemoryService
from ultron.tenancy import local_actor

NEW = UploadRequest(
    content="pgbouncer in transaction mode breaks prepared statements of the psycopg driver",
    context="API behind pgbouncer",
    resolution="set prepare_threshold=None on the connection",
    tags=["postgres"],
)


def _upload(hub, req: UploadRequest) -> Any:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return hub.memory.upload(s, local_actor(s), req)


def test_a_new_memory_is_written_by_its_probe_with_everything_create_memory_writes(hub, monkeypatch):  # type: ignore[no-untyped-def]
    calls: list[str] = []
    real = MemoryService._create

    def spy(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append("create")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(MemoryService, "_create", spy)
    _upload(hub, UploadRequest(content="warm-up: the tenant's policy is read once", scope="private"))
    result = _upload(hub, NEW)
    assert result.decision == "created"
    assert calls == []  # no INSERT statement of its own: the probe's statement wrote it
    with hub.db.session() as s:
        tenant = local_actor(s).tenant_id
        memory = s.get(Memory, (result.record.id, tenant))
        assert memory is not None and memory.content == NEW.content and list(memory.tags) == ["postgres"]
        assert memory.search_tsv is not None and memory.embedding is not None
        contributions = s.scalars(
            select(MemoryContribution).where(MemoryContribution.memory_id == memory.id)
        ).all()
        assert [(c.decision, c.content, c.resolution) for c in contributions] == [
            ("created", NEW.content, NEW.resolution)
        ]
        events = s.scalar(
            select(func.count()).select_from(ActivityEvent).where(ActivityEvent.memory_id == memory.id)
        )
        assert events == 1
        assert s.get(ClusterQueueItem, (memory.id, tenant)) is not None
    assert result.record.content == NEW.content and result.record.tier == memory.tier
    # The same text again is a duplicate: the probe finds it (hash and cosine 1.0) and writes nothing.
    again = _upload(hub, NEW)
    assert again.decision == "merged" and again.record.id == result.record.id
    with hub.db.session() as s:
        assert s.scalar(select(func.count()).select_from(Memory)) == 2


def test_an_upload_near_a_memory_it_does_not_merge_into_gets_its_own_insert(hub, monkeypatch):  # type: ignore[no-untyped-def]
    calls: list[str] = []
    real = MemoryService._create

    def spy(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append("create")
        return real(self, *args, **kwargs)

    _upload(hub, NEW)
    monkeypatch.setattr(MemoryService, "_create", spy)
    # Near NEW (the soft band or above) but another value: the decision keeps it apart.
    near = NEW.model_copy(update={"resolution": "set prepare_threshold=0 on the connection"})
    result = _upload(hub, near)
    assert result.decision == "created"
    assert calls == ["create"]


def test_the_upload_path_runs_on_prepared_statements(hub):  # type: ignore[no-untyped-def]
    """psycopg prepares a statement from its 5th use on a connection (prepare_threshold): every statement
    of a single upload's hot path (the policy read, the dedup lock, probe_or_create_memory, the supersede
    probe) is then a named prepared statement the server plans once (where the tenant walks the index, on
    the probes' generic plan: tests/memory/test_probe_plan.py). A memory with a value to supersede another
    (an error report never does: supersede.may_supersede), so its supersede probe is sent."""
    for i in range(8):
        _upload(hub, UploadRequest(content=f"the staging cache holds {i} shards {'x' * i} on cache-{i * 7}"))
    with hub.db.session() as s:
        prepared = s.execute(text("SELECT statement FROM pg_prepared_statements")).scalars().all()
    texts = "\n".join(prepared)
    for marker in (
        "pg_advisory_xact_lock",
        "settings -> 'redaction'",
        "clear AS MATERIALIZED",
        "JOIN memories n ON n.id = u.id",
    ):
        assert marker in texts, marker
