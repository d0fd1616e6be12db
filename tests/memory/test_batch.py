"""Batch upload: the same final state as the same items uploaded one by one, refusals per item, no
deadlock between batches that touch the same dedup keys."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from sqlalchemy import Text, func, select

from tests.clusters.test_clusters import _basis, _memory
from ultron.clusters import service as cluster_service
from ultron.clusters.service import unit
from ultron.db.models import (
    ActivityEvent,
    ClusterMember,
    KnowledgeCluster,
    Memory,
    MemoryContribution,
    MemoryEntity,
    Tenant,
)
from ultron.memory import service as memory_service
from ultron.memory.schemas import UploadRequest
from ultron.memory.termstats import MIN_CHANGES, TermStatsKeeper
from ultron.sdk import Ultron
from ultron.sdk._local import LocalBackend

PANDAS = {
    "content": "ModuleNotFoundError: No module named 'pandas' when running the analysis script",
    "context": "Docker container running a data analysis job",
    "resolution": "pip install pandas inside the image",
    "tags": ["python", "docker"],
}
# Near duplicates of PANDAS: merged (automatically, at these hash-embedder thresholds), as one by one.
PANDAS_AGAIN = {
    **PANDAS,
    "content": "ModuleNotFoundError: No module named 'pandas' when the analysis script starts",
}
PANDAS_NUMPY = {
    **PANDAS,
    "content": "ModuleNotFoundError: No module named 'numpy' when running the analysis script",
}
REDIS = {
    "content": "Redis connection refused on port 6379 after the container restarted",
    "context": "docker compose stack, mail alice@example.com when it happens",
    "resolution": "wait for the redis healthcheck before starting the app",
    "tags": ["redis"],
}
PREFER = {"content": "I prefer short answers with the command first", "tags": ["style"]}
PRIVATE = {**PREFER, "scope": "private"}
# The companion's part: entity links (a private memory keeps its names), moods, importance, threads.
LILY = {
    "content": "Lily Chen starts piano lessons in Berlin next month",
    "scope": "private",
    "importance": 8,
    "valence": 0.6,
    "thread": "family",
    "position": 3,
}
LILY_AGAIN = {**LILY, "valence": -0.2, "arousal": 0.4, "importance": 3}  # merges: moods blended
ITEMS = [
    PANDAS,
    REDIS,
    PANDAS,  # an exact repeat inside the batch
    PANDAS_AGAIN,
    {"content": "   "},  # refused: blank content
    PREFER,
    PANDAS_NUMPY,
    PRIVATE,  # same text, another scope: its own memory
    {**REDIS, "tags": ["cache"]},
    {"content": "x", "scope": "group"},  # refused: a group scope needs a group name
    {"content": "stored before the batch, uploaded again", "context": "a repeat of a stored memory"},
    LILY,
    {"content": "Maria Garcia moved the Atlas project to Frankfurt", "scope": "private", "arousal": 0.9},
    LILY_AGAIN,
    # tags as written, whatever an array literal would make of them (a batch sends them as jsonb)
    {"content": "Tags kept as written", "tags": ["a,b", 'say "hi"', "{x}", "ünï", "NULL", ""]},
]
STORED = {"content": "stored before the batch, uploaded again", "context": "a repeat of a stored memory"}


def _client(hub, tenant: str) -> Ultron:  # type: ignore[no-untyped-def]
    return Ultron._of(LocalBackend(hub, agent="agent", tenant=tenant, owns_hub=False))


def _state(hub, tenant: str) -> list[tuple]:  # type: ignore[no-untyped-def]
    """Everything a tenant's memories hold, ids and times aside, in a stable order."""
    with hub.db.session() as s:
        tenant_id = s.execute(select(Tenant.id).where(Tenant.name == tenant)).scalar_one()
        memories = s.execute(select(Memory).where(Memory.tenant_id == tenant_id)).scalars().all()
        rows = []
        for m in memories:
            contributions = s.execute(
                select(MemoryContribution.decision, MemoryContribution.content, MemoryContribution.tags)
                .where(MemoryContribution.memory_id == m.id)
                .order_by(MemoryContribution.id)
            ).all()
            clustered = s.get(ClusterMember, (m.id, tenant_id)) is not None
            links = s.execute(
                select(MemoryEntity.kind, MemoryEntity.name)
                .where(MemoryEntity.memory_id == m.id)
                .order_by(MemoryEntity.kind, MemoryEntity.name)
            ).all()
            document = s.execute(select(func.cast(Memory.search_tsv, Text)).where(Memory.id == m.id)).scalar()
            rows.append(
                (
                    m.content,
                    m.context,
                    m.resolution,
                    m.memory_type,
                    tuple(m.tags),
                    m.scope,
                    m.status,
                    m.hit_count,
                    tuple(sorted(m.redacted_entities.items())),
                    m.summary_l0,
                    m.overview_l1,
                    m.content_hash,
                    tuple(round(float(x), 6) for x in m.embedding),
                    document,
                    (m.thread, m.position, m.occurred_at, m.group_name, m.pinned, m.tier),
                    (m.importance, m.valence, m.arousal),
                    tuple(tuple(c) for c in contributions),
                    clustered,
                    tuple(tuple(link) for link in links),
                )
            )
        activity = s.execute(
            select(ActivityEvent.kind, func.count())
            .where(ActivityEvent.tenant_id == tenant_id)
            .group_by(ActivityEvent.kind)
            .order_by(ActivityEvent.kind)
        ).all()
        rows.append(("activity", tuple(tuple(a) for a in activity)))
    return sorted(rows, key=repr)


def test_batch_ends_as_the_same_uploads_one_by_one(hub):
    single, batch = _client(hub, "one-by-one"), _client(hub, "batched")
    for client in (single, batch):
        client.upload(**STORED)
    decisions = []
    for item in ITEMS:
        try:
            decisions.append(single._backend.upload(UploadRequest.model_validate(item)).decision)
        except Exception:  # noqa: BLE001 - a refusal, compared with the batch's below
            decisions.append("refused")
    result = batch.upload_batch(ITEMS)

    assert [r.index for r in result.results] == list(range(len(ITEMS)))
    assert [r.decision for r in result.results] == decisions
    assert (result.created, result.merged, result.refused) == (
        decisions.count("created"),
        sum(d in ("merged", "merged_judge") for d in decisions),
        2,
    )
    assert "merged" in decisions and decisions.count("created") >= 6
    assert "content" in result.results[4].reason and "group" in result.results[9].reason
    assert _state(hub, "batched") == _state(hub, "one-by-one")
    tagged = [r for r in _state(hub, "batched") if r[0] == "Tags kept as written"]
    assert len(tagged) == 1 and {"a,b", 'say "hi"', "{x}", "ünï", "NULL"} <= set(tagged[0][4]), tagged
    # The repeat inside the batch merged into the memory the batch itself had just created.
    assert result.results[2].memory_id == result.results[0].memory_id
    redis = [r for r in _state(hub, "batched") if r[0].startswith("Redis")]
    # a redacted address is an unknown: two texts that hold one are never one fact (issue 31)
    assert len(redis) == 2 and redis[0][8] == (("EMAIL_ADDRESS", 1),) and "alice@" not in redis[0][1]
    lily = [r for r in _state(hub, "batched") if r[0].startswith("Lily")]
    assert lily[0][15] == (3, 0.2, 0.4) and ("person", "Lily Chen") in lily[0][18]
    assert (
        result.results[13].decision == "merged"
        and result.results[13].memory_id == result.results[11].memory_id
    )


def test_batch_items_are_checked_like_single_uploads(hub):
    client = _client(hub, "checks")
    result = client.upload_batch(
        [
            {"content": "ok"},
            {"content": "ok", "unknown": 1},
            {"content": "a" * (hub.settings.max_field_chars + 1)},
            UploadRequest(content="as a model"),
        ]
    )
    assert [r.decision for r in result.results] == ["created", "refused", "refused", "created"]
    assert "unknown" in result.results[1].reason
    assert "limit" in result.results[2].reason


def test_concurrent_batches_over_the_same_keys_do_not_deadlock(hub):
    # Each batch holds memories of several types; the two send them in opposite orders.
    items = [
        {"content": f"error {i}: connection refused by the database server", "context": "timeout"}
        for i in range(5)
    ] + [{"content": f"I prefer tabs over spaces, rule {i}"} for i in range(5)]
    clients = [_client(hub, "race"), _client(hub, "race")]
    results: list = [None, None]

    def send(n: int) -> None:
        results[n] = clients[n].upload_batch(items if n == 0 else items[::-1])

    threads = [threading.Thread(target=send, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert all(r is not None and r.refused == 0 for r in results)
    # The locks serialize the two: whichever ran second merged every item into the first one's memories.
    first, second = sorted(results, key=lambda r: -r.created)
    assert first.created == len(items) and (second.created, second.merged) == (0, len(items))
    with hub.db.session() as s:
        contents = s.execute(select(Memory.content)).scalars().all()
    assert len(contents) == len(set(contents))


def test_a_batch_counts_each_new_memory_toward_the_term_statistics_rebuild(hub):
    items = [
        {"content": f"lexicon entry {n}: the word {chr(97 + n)}{chr(98 + n)} means {n}"}
        for n in range(MIN_CHANGES)
    ]
    counted = {}
    for tenant, send in (
        ("one-by-one", lambda c: [c.upload(**item) for item in items]),
        ("batched", lambda c: c.upload_batch(items)),
    ):
        keeper = hub.memory.term_stats = TermStatsKeeper(hub.db)  # not started: nothing rebuilds meanwhile
        send(_client(hub, tenant))
        counted[tenant] = (sum(keeper._changes.values()), len(keeper._dirty))
    # A rebuild is due after MIN_CHANGES new memories, batched or not.
    assert counted["batched"] == counted["one-by-one"] == (MIN_CHANGES, 1)


# --- the batch's cluster assignment (ClusterService.assign_many) ------------------------------------------


def _cluster_vectors(dim: int, seed: int, n: int) -> list[np.ndarray]:
    """Topics at cosine ~0.9 (joins, refreshes of small clusters' centroids), strays (new clusters),
    repeats of an earlier vector, and vectors exactly at the threshold from a basis vector."""
    rng = np.random.default_rng(seed)
    topics = [unit(rng.standard_normal(dim)) for _ in range(5)]
    out: list[np.ndarray] = []
    for i in range(n):
        if i % 11 == 10:
            out.append(unit(rng.standard_normal(dim)))
        elif i % 13 == 12 and out:
            out.append(out[int(rng.integers(len(out)))].copy())
        elif i % 17 == 16:
            out.append(0.8 * _basis(dim, 0) + 0.6 * _basis(dim, 1 + i % 3))  # exactly at 0.8 from e0
        elif i % 19 == 18:
            out.append(_basis(dim, 0))
        else:
            t = topics[int(rng.integers(len(topics)))]
            out.append(unit(t + rng.standard_normal(dim) * (0.35 / np.sqrt(dim))))
    return out


def _clusters_of(session, tenant_id, labels):  # type: ignore[no-untyped-def]
    """Each cluster as (its members' labels, count, the exact mean's bytes, centroid bytes or None, norm),
    and every member row's vector: the state compared bit for bit."""
    rows = session.execute(
        select(ClusterMember.memory_id, ClusterMember.cluster_id, ClusterMember.embedding).where(
            ClusterMember.tenant_id == tenant_id
        )
    ).all()
    groups: dict = {}
    for memory_id, cluster_id, _ in rows:
        groups.setdefault(cluster_id, []).append(labels[memory_id])
    clusters = []
    for c in session.execute(
        select(KnowledgeCluster).where(KnowledgeCluster.tenant_id == tenant_id)
    ).scalars():
        session.refresh(c)
        clusters.append(
            (
                tuple(sorted(groups.get(c.id, []))),
                c.member_count,
                np.asarray(c.mean, dtype=np.float32).tobytes(),
                None if c.centroid is None else np.asarray(c.centroid, dtype=np.float32).tobytes(),
                c.centroid_norm,
            )
        )
    vectors = sorted((labels[m], np.asarray(e, dtype=np.float32).tobytes()) for m, _, e in rows)
    return sorted(clusters, key=repr), vectors


def _one_by_one_and_batched(hub, before, batch, chunks=(60,)):  # type: ignore[no-untyped-def]
    """The same vectors into two tenants: `before` one by one (then the worker indexes their clusters, and
    three more go in unindexed), then `batch` one by one into the first and by assign_many, in chunks,
    into the second. Returns both tenants' cluster states."""
    states = []
    with hub.db.session() as s:
        for name in ("one-by-one", "batched"):
            tenant = Tenant(name=f"clusters-{name}")
            s.add(tenant)
            s.flush()
            labels = {}
            for i, v in enumerate(before):
                m = _memory(s, tenant.id, v, f"b{i}")
                labels[m.id] = f"b{i}"
                hub.clusters.assign(s, tenant.id, m.id, v)
                if i == len(before) - 4:
                    assert hub.clusters.index_pending(s, tenant.id) > 0
            made = []
            for i, v in enumerate(batch):
                m = _memory(s, tenant.id, v, f"n{i}")
                labels[m.id] = f"n{i}"
                made.append((m.id, v))
            if name == "one-by-one":
                want = [hub.clusters.assign(s, tenant.id, mid, v) for mid, v in made]
            else:
                got, start = [], 0
                for size in (*chunks, len(made)):
                    got += hub.clusters.assign_many(s, tenant.id, made[start : start + size])
                    start = min(len(made), start + size)
            states.append(_clusters_of(s, tenant.id, labels))
        s.commit()
    assert len(got) == len(want) == len(batch)
    return states


@pytest.fixture()
def chub(make_hub):  # type: ignore[no-untyped-def]
    return make_hub(cluster_similarity_threshold=0.8)


def test_batch_assignment_ends_as_assign_one_by_one(chub, monkeypatch):  # type: ignore[no-untyped-def]
    """Joins into indexed and unindexed clusters, into clusters the batch itself started or moved, new
    clusters unindexed and (past the cap) indexed at once, vectors exactly at the threshold: the same
    clusters, members, counts, and means and centroids equal to the bit."""
    monkeypatch.setattr(cluster_service, "UNINDEXED_MAX", 12)
    dim = chub.embedder.dimension
    vectors = _cluster_vectors(dim, 3, 260)
    single, batched = _one_by_one_and_batched(chub, vectors[:60], vectors[60:])
    assert single == batched
    clusters = single[0]
    assert len(clusters) >= 15 and max(c[1] for c in clusters) >= 20
    assert any(c[3] is None for c in clusters) and any(c[3] is not None for c in clusters)


def test_batch_assignment_settles_close_calls_like_the_statement(chub, monkeypatch):  # type: ignore[no-untyped-def]
    """With every decision sent to the server's arithmetic (a huge margin) and the probe cut to the single
    probe's size (a vector whose candidates the batch's refreshes could change goes through `assign`),
    the end state is still that of one by one."""
    monkeypatch.setattr(cluster_service, "UNINDEXED_MAX", 12)
    monkeypatch.setattr(cluster_service, "DECIDE_MARGIN", 0.5)
    monkeypatch.setattr(cluster_service, "PROBE_EXTRA", 0)
    cluster_service._batch_probe_statement.cache_clear()
    singles = []
    original = cluster_service.ClusterService.assign

    def counted(self, *args):  # type: ignore[no-untyped-def]
        singles.append(args)
        return original(self, *args)

    try:
        dim = chub.embedder.dimension
        vectors = _cluster_vectors(dim, 4, 160)
        monkeypatch.setattr(cluster_service.ClusterService, "assign", counted)
        single, batched = _one_by_one_and_batched(chub, vectors[:50], vectors[50:], chunks=(40, 30))
    finally:
        cluster_service._batch_probe_statement.cache_clear()
    assert single == batched
    assert len(singles) > 50 + 110  # beyond the one-by-one tenant's: some batch vectors went one by one


def test_soft_band_items_are_decided_without_writing_the_batch_first(hub, monkeypatch):  # type: ignore[no-untyped-def]
    """The bench corpus's memories often fall in the soft band of one another (with the hash embedder) and
    the judge tells them apart: the batch decides them against its own new memories in memory, so its
    new memories are written once and no item is probed again, and it ends as one by one."""
    from ultron.bench.core import Corpus  # the bench's corpus (in-function: only this test needs it)

    corpus = Corpus(seed=11)
    items = [corpus.memory() for _ in range(120)]
    service = hub.memory
    calls = {"create_many": 0, "nearest": 0, "judge": 0}
    for name, key in (("_create_many", "create_many"), ("_nearest", "nearest")):
        original = getattr(service, name)

        def spy(*args, _original=original, _key=key, **kwargs):  # type: ignore[no-untyped-def]
            calls[_key] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(service, name, spy)
    judge = memory_service.may_merge_judged  # the judgement's first step: the content veto

    def judged(a, b):  # type: ignore[no-untyped-def]
        calls["judge"] += 1
        return judge(a, b)

    monkeypatch.setattr(memory_service, "may_merge_judged", judged)
    single, batch = _client(hub, "one-by-one"), _client(hub, "batched")
    decisions = [single.upload(**item).decision for item in items]
    calls.update(create_many=0, nearest=0, judge=0)
    result = batch.upload_batch(items)
    assert [r.decision for r in result.results] == decisions
    assert _state(hub, "batched") == _state(hub, "one-by-one")
    assert calls["judge"] >= 3  # the soft band was met
    assert (calls["create_many"], calls["nearest"]) == (1, 0)
