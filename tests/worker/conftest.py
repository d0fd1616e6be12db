from __future__ import annotations

import hashlib
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from ultron.ingestion.schemas import IngestFile
from ultron.tenancy import ensure_tenant, local_actor
from ultron.trajectory import pipeline

SESSIONS = Path(__file__).resolve().parents[1] / "data" / "sessions"


@pytest.fixture
def worker_hub(make_hub):  # type: ignore[no-untyped-def]
    """A hub whose ingest leaves segmentation to the worker; short leases and no retry delay."""

    def _make(**overrides: Any):  # type: ignore[no-untyped-def]
        base = {
            "ingest_segment_inline": False,
            "worker_lease_seconds": 30.0,
            "worker_retry_base_seconds": 0.0,
            "worker_poll_seconds": 30.0,
        }
        return make_hub(**{**base, **overrides})

    return _make


def ingest_sessions(hub, count: int, fixture: str = "multi_task.jsonl") -> None:  # type: ignore[no-untyped-def]
    """Store `count` distinct sessions (one file each) for the worker to process."""
    content = (SESSIONS / fixture).read_bytes()
    with hub.db.session() as session:
        files = [IngestFile(f"agent-run-{i}.jsonl", content) for i in range(count)]
        hub.ingestion.ingest_files(session, local_actor(session), files)


class RecordingPipeline:
    """The real pipeline, counting which item each step ran on (and optionally failing or stalling)."""

    def __init__(self, hub, fail: set[str] | None = None, stall: Any = None):  # type: ignore[no-untyped-def]
        self.steps = pipeline.Steps(hub.settings, hub.intelligence, hub.memory)
        self.calls: Counter[tuple[str, uuid.UUID]] = Counter()
        self.fail = fail or set()
        self.stall = stall

    def _run(self, name: str, session, item_id):  # type: ignore[no-untyped-def]
        self.calls[(name, item_id)] += 1
        if name in self.fail:
            raise RuntimeError(f"{name} exploded on {item_id}")
        result = getattr(self.steps, name)(session, item_id)
        if self.stall is not None:
            self.stall(name, item_id)
        return result

    def segment_session(self, session, item_id):  # type: ignore[no-untyped-def]
        return self._run("segment_session", session, item_id)

    def score_segment(self, session, item_id):  # type: ignore[no-untyped-def]
        return self._run("score_segment", session, item_id)

    def extract_segment(self, session, item_id):  # type: ignore[no-untyped-def]
        return self._run("extract_segment", session, item_id)


def add_memories(
    hub, rows: list[dict[str, Any]], tenant: str = "default"
) -> tuple[uuid.UUID, list[uuid.UUID]]:  # type: ignore[no-untyped-def]
    """Insert memories directly (hit counts, dates, pins and vectors as given); returns (tenant, ids)."""
    now = datetime.now(UTC)
    dim = hub.embedder.dimension
    rng = np.random.default_rng(5)
    with hub.db.session() as session:
        tenant_id = ensure_tenant(session, tenant)
        ids = []
        for i, row in enumerate(rows):
            vector = row.get("embedding")
            if vector is None:
                vector = rng.normal(size=dim).astype(np.float32)
            days = row.get("last_hit_days")
            params = {
                "tenant_id": tenant_id,
                "memory_type": row.get("memory_type", "pattern"),
                "content": row.get("content", f"memory {i} {uuid.uuid4().hex}"),
                "hash": hashlib.sha256(f"{i}{uuid.uuid4()}".encode()).hexdigest(),
                "embedding": np.asarray(vector, dtype=np.float32),
                "hit_count": row.get("hit_count", 0),
                "last_hit_at": None if days is None else now - timedelta(days=days),
                "created_at": now - timedelta(days=row.get("created_days", 0)),
                "pinned": row.get("pinned", False),
                "tier": row.get("tier", "warm"),
            }
            ids.append(
                session.execute(
                    text(
                        "INSERT INTO memories (tenant_id, memory_type, content, content_hash, search_tsv, "
                        "embedding, hit_count, last_hit_at, created_at, pinned, tier) VALUES (:tenant_id, "
                        ":memory_type, :content, :hash, to_tsvector('simple', :content), :embedding, "
                        ":hit_count, :last_hit_at, :created_at, :pinned, :tier) RETURNING id"
                    ),
                    params,
                ).scalar_one()
            )
    return tenant_id, ids
