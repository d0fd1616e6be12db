"""Upload: type inference, summaries, dedup at the thresholds, the judge band, merges, concurrency."""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime

import numpy as np
import pytest
from sqlalchemy import Text, func, select, text

from ultron.db.models import ActivityEvent, Memory, MemoryContribution
from ultron.errors import ValidationFailed
from ultron.memory import document
from ultron.memory.schemas import UploadRequest
from ultron.memory.text import embedding_text
from ultron.sdk._local import LocalBackend
from ultron.tenancy import local_actor

PANDAS = UploadRequest(
    content="ModuleNotFoundError: No module named 'pandas' when running the analysis script",
    context="Docker container running a data analysis job",
    resolution="pip install pandas inside the image",
    tags=["python", "docker"],
)
PANDAS_AGAIN = UploadRequest(
    content="ModuleNotFoundError: No module named 'pandas' when the analysis script starts",
    context="Docker container running a data analysis job",
    resolution="pip install pandas inside the image",
    tags=["pandas"],
)
# The same fact as PANDAS in other words: the content checks let it merge without the judge (faithful.py).
PANDAS_REWORDED = UploadRequest(
    content="ModuleNotFoundError: No module named 'pandas' while running the analysis script",
    context="Docker container running a data analysis job",
    resolution="pip install pandas inside the image",
)
# In the soft band of PANDAS, and the judge calls it different: the content checks find no other fact
# (faithful.py vetoes a different error, fix or value before any judge is asked), but it shares too few
# terms with PANDAS for the judge to call it the same lesson.
PANDAS_TERSE = UploadRequest(content="ModuleNotFoundError: No 'pandas' in the image")


def upload(hub, req, actor=None):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return hub.memory.upload(s, actor or local_actor(s), req)


def count(hub, model=Memory) -> int:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return s.execute(select(func.count()).select_from(model)).scalar_one()


def db_similarity(hub, memory_id, req) -> float:  # type: ignore[no-untyped-def]
    """The cosine the dedup query sees, computed by Postgres itself."""
    vec = np.asarray(hub.embedder.embed([embedding_text(req.content, req.context, req.resolution)])[0])
    with hub.db.session() as s:
        return float(
            s.execute(
                text("SELECT 1 - (embedding <=> CAST(:v AS vector)) FROM memories WHERE id = :id"),
                {"v": vec.astype(np.float32), "id": memory_id},
            ).scalar_one()
        )


def test_new_memory_is_typed_summarized_warm_active(hub):
    result = upload(hub, PANDAS)
    rec = result.record
    assert result.decision == "created"
    assert rec.memory_type == "error"
    assert (rec.tier, rec.status, rec.hit_count) == ("warm", "active", 0)
    assert rec.summary_l0 and "\n" not in rec.summary_l0
    assert rec.overview_l1.startswith(rec.summary_l0[:20])
    assert rec.tags == ["python", "docker"]
    assert rec.agent == "local"


def test_a_new_memorys_record_is_the_stored_row_with_its_contribution_and_activity(hub):
    """The record answered for a new memory is built from the row its INSERT returned (one statement also
    writes the contribution and the activity row): every field equals what a later read returns."""
    req = PANDAS.model_copy(
        update={
            "content": PANDAS.content + " (token sk-live-0123456789abcdef0123456789abcdef)",
            "scope": "private",
            "thread": "session-7",
            "position": 3,
            "occurred_at": datetime(2026, 3, 14, 19, 0, tzinfo=UTC),
            "importance": 8,
            "valence": -0.5,
            "arousal": 0.7,
        }
    )
    result = upload(hub, req)
    assert result.decision == "created"
    with hub.db.session() as s:
        actor = local_actor(s)
        stored = hub.memory.get(s, actor, result.record.id)
        contribution = s.execute(
            select(MemoryContribution).where(MemoryContribution.memory_id == stored.id)
        ).scalar_one()
        activity = s.execute(
            select(ActivityEvent).where(ActivityEvent.memory_id == stored.id, ActivityEvent.kind == "upload")
        ).scalar_one()
        tsv, same = s.execute(
            select(
                func.cast(Memory.search_tsv, Text),
                Memory.search_tsv
                == document.tsvector(stored.content, stored.context, stored.resolution, *stored.tags),
            ).where(Memory.id == stored.id)
        ).one()
    assert result.record == stored
    assert (stored.importance, stored.valence, stored.arousal) == (8, -0.5, 0.7)
    assert (stored.thread, stored.position, stored.scope, stored.contributions) == (
        "session-7",
        3,
        "private",
        1,
    )
    assert "sk-live" not in stored.content and stored.redacted_entities
    assert (contribution.decision, contribution.agent_id, contribution.content) == (
        "created",
        actor.agent_id,
        stored.content,
    )
    assert contribution.tags == stored.tags == ["python", "docker"]
    assert (activity.agent_id, activity.detail) == (actor.agent_id, {"memory_type": "error"})
    assert same and "'docker'" in tsv  # its document: its words and tags, as document.tsvector makes it


def test_identical_upload_merges_counts_a_hit_and_unions_tags(hub):
    first = upload(hub, PANDAS).record
    again = upload(hub, PANDAS.model_copy(update={"tags": ["pandas", "python"]}))
    assert again.decision == "merged"
    assert again.record.id == first.id
    assert again.similarity == pytest.approx(1.0)
    assert again.record.hit_count == 1
    assert again.record.tags == ["python", "docker", "pandas"]
    assert again.record.contributions == 2
    assert count(hub) == 1
    assert count(hub, MemoryContribution) == 2


def test_merge_exactly_at_hard_threshold_and_new_just_above(make_hub):
    hub = make_hub()
    first = upload(hub, PANDAS).record
    sim = db_similarity(hub, first.id, PANDAS_REWORDED)
    assert 0.5 < sim < 0.9999

    at = make_hub(dedup_similarity_threshold=sim, dedup_soft_threshold=sim)
    assert upload(at, PANDAS_REWORDED).decision == "merged"
    assert count(at) == 1

    above = make_hub(dedup_similarity_threshold=sim + 1e-6, dedup_soft_threshold=sim + 1e-6)
    assert upload(
        above, PANDAS_REWORDED.model_copy(update={"context": "Docker container running a data analysis job"})
    )
    assert count(above) == 2


def test_soft_band_asks_the_judge(make_hub):
    hub = make_hub()
    first = upload(hub, PANDAS).record
    sim = db_similarity(hub, first.id, PANDAS_AGAIN)
    # Offline judge (token overlap, same error identifier): the same lesson reworded is a duplicate.
    band = make_hub(dedup_similarity_threshold=min(sim + 0.01, 1.0), dedup_soft_threshold=sim - 0.01)
    result = upload(band, PANDAS_AGAIN)
    assert result.decision == "merged_judge"
    assert result.record.id == first.id


def test_the_judge_reads_the_nearest_memorys_text_from_the_dedup_probe(make_hub):
    """The probe under the lock returns its nearest memory's text: the judge sees exactly the stored
    fields, and an upload the judge calls different loads no memory at all before its INSERT."""
    from sqlalchemy import event

    hub = make_hub()
    upload(hub, PANDAS)
    other = PANDAS_TERSE
    band = make_hub(dedup_similarity_threshold=0.999, dedup_soft_threshold=0.0)
    seen, statements = [], []
    judge = band.memory.intelligence.judge_same
    band.memory.intelligence.judge_same = lambda a, b: seen.append((dict(a), dict(b))) or judge(a, b)

    def listen(conn, cursor, statement, *rest):  # type: ignore[no-untyped-def]
        statements.append(statement)

    event.listen(band.db.engine, "before_cursor_execute", listen)
    try:
        result = upload(band, other)
    finally:
        event.remove(band.db.engine, "before_cursor_execute", listen)
    assert result.decision == "created"
    stored = {"content": PANDAS.content, "context": PANDAS.context, "resolution": PANDAS.resolution}
    assert seen == [
        (stored, {"content": other.content, "context": other.context, "resolution": other.resolution})
    ]
    assert not [st for st in statements if st.lstrip().startswith("SELECT memories.")]


def test_soft_band_judge_says_different(make_hub):
    hub = make_hub()
    upload(hub, PANDAS)
    other = PANDAS_TERSE
    band = make_hub(dedup_similarity_threshold=0.999, dedup_soft_threshold=0.0)
    result = upload(band, other)
    assert result.decision == "created"
    assert count(band) == 2


def test_below_soft_threshold_is_a_new_memory(hub):
    upload(hub, PANDAS)
    result = upload(
        hub,
        UploadRequest(
            content="Renderer crash: segfault in libxml2 while parsing a large SVG", context="renderer"
        ),
    )
    assert result.decision == "created"
    assert result.record.memory_type == "error"
    assert count(hub) == 2


def test_dedup_is_within_one_type(hub):
    upload(hub, PANDAS)
    # Same words, but a security finding: never merged into an error memory.
    result = upload(hub, PANDAS.model_copy(update={"content": PANDAS.content + " (CVE-2024-0001 leak)"}))
    assert result.record.memory_type == "security"
    assert result.decision == "created"


def test_archived_memories_are_not_merge_targets(hub):
    first = upload(hub, PANDAS).record
    with hub.db.session() as s:
        s.execute(text("UPDATE memories SET status = 'archived' WHERE id = :id"), {"id": first.id})
    assert upload(hub, PANDAS).decision == "created"


def test_empty_and_oversized_content_are_refused_and_nothing_stored(hub):
    with pytest.raises(ValueError):
        UploadRequest(content="   ")
    with pytest.raises(ValidationFailed):
        upload(hub, UploadRequest(content="x" * (hub.settings.max_field_chars + 1)))
    assert count(hub) == 0
    assert count(hub, MemoryContribution) == 0


def test_eight_agents_uploading_the_same_items_concurrently_leave_one_memory_each(hub):
    lessons = [
        ("pip install hangs resolving dependencies", "pin numpy below 2"),
        ("docker build cannot reach the package mirror", "pass the proxy as a build arg"),
        ("kubectl rollout stuck on a readiness probe", "raise the probe's initial delay"),
        ("git push rejected: non-fast-forward", "rebase on the remote branch first"),
        ("postgres deadlock between two migrations", "take the advisory lock before altering"),
        ("node heap out of memory in webpack", "set max-old-space-size to 4096"),
        ("TLS certificate expired on the staging ingress", "renew through cert-manager"),
        ("redis evicts session keys under memory pressure", "use volatile-lru and a memory cap"),
        ("cron job runs twice after daylight saving change", "schedule in UTC"),
        ("S3 presigned URL returns SignatureDoesNotMatch", "sync the host clock with NTP"),
    ]
    items = [UploadRequest(content=c, resolution=r) for c, r in lessons]
    backends = [LocalBackend(hub, agent=f"agent-{n}", owns_hub=False) for n in range(8)]
    barrier = threading.Barrier(len(backends))
    errors: list[BaseException] = []

    def run(backend: LocalBackend, seed: int) -> None:
        order = items[:]
        random.Random(seed).shuffle(order)
        barrier.wait()
        try:
            for item in order:
                backend.upload(item)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(b, n)) for n, b in enumerate(backends)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert count(hub) == 10
    assert count(hub, MemoryContribution) == 80
    with hub.db.session() as s:
        agents_per_memory = s.execute(
            text("SELECT count(DISTINCT agent_id) FROM memory_contributions GROUP BY memory_id")
        ).scalars()
        assert set(agents_per_memory) == {8}
