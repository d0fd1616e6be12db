"""Consolidation: near-duplicates of one type merge through the HNSW index; the loser is archived with
a link to the winner; pinned memories never lose; at most consolidate_max_merges per cycle."""

from __future__ import annotations

import numpy as np
from sqlalchemy import select

from tests.worker.conftest import add_memories
from ultron.db.models import Memory, MemorySource, SessionRecord, TaskSegment
from ultron.hub import build_worker

# Duplicates state one fact: consolidation, like an upload, merges only what states the same fact.
RESTART = "Restart the worker after changing its config"
UTC = "Write timestamps in the logs in UTC"
TOPICS = ("the worker", "the scheduler", "the proxy", "the cache")


def _near(base: np.ndarray, scale: float, seed: int) -> np.ndarray:
    return base + np.random.default_rng(seed).normal(scale=scale, size=base.shape)


def _state(hub, ids):  # type: ignore[no-untyped-def]
    with hub.db.session() as session:
        rows = session.execute(select(Memory).where(Memory.id.in_(ids))).scalars().all()
        return {m.id: (m.status, m.merged_into_id, m.archived_reason, m.hit_count) for m in rows}


def test_consolidation_merges_near_duplicates_and_archives_the_loser(make_hub):
    hub = make_hub(consolidate_enabled=True)
    rng = np.random.default_rng(1)
    a, b, c = (rng.normal(size=hub.embedder.dimension) for _ in range(3))
    rows = [
        {"embedding": a, "hit_count": 5, "content": RESTART},  # 0: winner (more used)
        {"embedding": _near(a, 0.001, 2), "hit_count": 1, "content": RESTART},  # 1: its duplicate
        {"embedding": b, "hit_count": 0, "pinned": True, "content": UTC},  # 2: pinned, less used: still wins
        {"embedding": _near(b, 0.001, 3), "hit_count": 9, "content": UTC},  # 3
        {"embedding": c, "memory_type": "error"},  # 4: same vector, another type: never merged
        {"embedding": c, "memory_type": "pattern"},  # 5
    ]
    _, ids = add_memories(hub, rows)
    outcome = build_worker(hub).run_cycle(("consolidate",))[0]
    assert outcome.status == "ok" and outcome.counts["merged"] == 2
    state = _state(hub, ids)
    assert state[ids[1]][:3] == ("archived", ids[0], "consolidated")
    assert state[ids[3]][:3] == ("archived", ids[2], "consolidated")
    assert state[ids[0]][0] == state[ids[2]][0] == "active"
    assert state[ids[0]][3] == 6  # the merge counts one hit for the winner
    assert state[ids[4]][0] == state[ids[5]][0] == "active"
    with hub.db.session() as session:
        assert session.execute(select(Memory.id)).scalars().all()  # archived, never deleted
        assert len(session.execute(select(Memory.id)).all()) == 6


def test_consolidation_stops_at_max_merges_and_is_off_by_default(make_hub):
    hub = make_hub()
    rng = np.random.default_rng(4)
    rows = []
    for i in range(4):
        base = rng.normal(size=hub.embedder.dimension)
        fact = f"{TOPICS[i]} needs a restart after its config changes"
        rows += [
            {"embedding": base, "hit_count": 2, "content": fact},
            {"embedding": _near(base, 0.001, i), "hit_count": 1, "content": fact},
        ]
    _, ids = add_memories(hub, rows)
    off = build_worker(hub).run_cycle(("consolidate",))[0]
    assert off.counts == {"skipped": "consolidate_enabled is false"}
    hub2 = make_hub(consolidate_enabled=True, consolidate_max_merges=3)
    outcome = build_worker(hub2).run_cycle(("consolidate",))[0]
    assert outcome.counts["merged"] == 3
    assert sum(1 for s in _state(hub2, ids).values() if s[0] == "archived") == 3


def test_two_pinned_duplicates_are_both_kept(make_hub):
    hub = make_hub(consolidate_enabled=True)
    base = np.random.default_rng(7).normal(size=hub.embedder.dimension)
    _, ids = add_memories(hub, [{"embedding": base, "pinned": True}, {"embedding": base, "pinned": True}])
    outcome = build_worker(hub).run_cycle(("consolidate",))[0]
    assert outcome.counts["merged"] == 0
    assert {s[0] for s in _state(hub, ids).values()} == {"active"}


def test_the_sessions_a_merged_memory_came_from_now_point_at_the_winner(make_hub):
    hub = make_hub(consolidate_enabled=True)
    a = np.random.default_rng(4).normal(size=hub.embedder.dimension)
    rows = [
        {"embedding": a, "hit_count": 5, "content": UTC},
        {"embedding": _near(a, 0.001, 5), "content": UTC},
    ]
    tenant_id, ids = add_memories(hub, rows)
    winner, loser = ids
    with hub.db.session() as session:
        record = SessionRecord(tenant_id=tenant_id, agent_name="bot", source="s.jsonl", format="jsonl")
        session.add(record)
        session.flush()
        segments = []
        for i in range(2):
            seg = TaskSegment(
                tenant_id=tenant_id,
                session_id=record.id,
                segment_index=i,
                start_seq=i,
                end_seq=i,
                fingerprint=f"f{i}",
                segmenter="test",
            )
            session.add(seg)
            session.flush()
            segments.append(seg.id)
        links = [(winner, segments[0], 2), (loser, segments[0], 1), (loser, segments[1], 1)]
        for memory_id, segment_id, n in links:
            session.add(
                MemorySource(
                    memory_id=memory_id,
                    segment_id=segment_id,
                    session_id=record.id,
                    tenant_id=tenant_id,
                    decision="created",
                    contributions=n,
                )
            )
    assert build_worker(hub).run_cycle(("consolidate",))[0].counts["merged"] == 1
    with hub.db.session() as session:
        columns = (MemorySource.memory_id, MemorySource.segment_id, MemorySource.contributions)
        rows = session.execute(select(*columns))
        got = {(r.memory_id, r.segment_id): r.contributions for r in rows}
    # the segment linked to both keeps one row with both uploads; the other now points at the winner
    assert got == {(winner, segments[0]): 3, (winner, segments[1]): 1}


def test_reflections_are_never_consolidated(make_hub):
    hub = make_hub(consolidate_enabled=True)
    base = np.random.default_rng(8).normal(size=hub.embedder.dimension)
    rows = [
        {"embedding": base, "memory_type": "reflection", "content": RESTART},
        {"embedding": _near(base, 0.001, 9), "memory_type": "reflection", "content": RESTART},
    ]
    _, ids = add_memories(hub, rows)
    outcome = build_worker(hub).run_cycle(("consolidate",))[0]
    assert outcome.counts["merged"] == 0
    assert {s[0] for s in _state(hub, ids).values()} == {"active"}
