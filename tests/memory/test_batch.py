"""Batch upload: the same final state as the same items uploaded one by one, refusals per item, no
deadlock between batches that touch the same dedup keys."""

from __future__ import annotations

import threading

from sqlalchemy import Text, func, select

from ultron.db.models import ActivityEvent, ClusterMember, Memory, MemoryContribution, MemoryEntity, Tenant
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
    # The repeat inside the batch merged into the memory the batch itself had just created.
    assert result.results[2].memory_id == result.results[0].memory_id
    redis = [r for r in _state(hub, "batched") if r[0].startswith("Redis")]
    assert redis[0][8] == (("EMAIL_ADDRESS", 2),) and "alice@" not in redis[0][1]
    lily = [r for r in _state(hub, "batched") if r[0].startswith("Lily")]
    assert lily[0][15] == (3, 0.2, 0.4) and ("person", "Lily Chen") in lily[0][18]
    assert (
        result.results[-1].decision == "merged"
        and result.results[-1].memory_id == result.results[11].memory_id
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
