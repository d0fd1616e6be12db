"""Tier rebalance and COLD-TTL archive, one SQL statement per tenant, on real Postgres."""

from __future__ import annotations

from sqlalchemy import select, text

from tests.worker.conftest import add_memories
from ultron.db.models import Memory
from ultron.hub import build_worker
from ultron.observability.metrics import render
from ultron.worker.rebalance import rebalance_tenant
from ultron.worker.runner import SINGLETON_KEYS, SINGLETON_LOCK_NAMESPACE


def _tiers(hub, ids):  # type: ignore[no-untyped-def]
    with hub.db.session() as session:
        rows = session.execute(select(Memory.id, Memory.tier, Memory.status, Memory.archived_reason))
        by_id = {r.id: (r.tier, r.status, r.archived_reason) for r in rows}
    return [by_id[i] for i in ids]


def _rebalance(hub, tenant_id):  # type: ignore[no-untyped-def]
    with hub.db.session() as session:
        return rebalance_tenant(session, hub.settings, tenant_id)


def test_exact_seed_percentages_on_a_known_distribution(hub):
    # 100 memories with distinct hit counts 0..99, all used recently: ids[99] is the most used.
    tenant_id, ids = add_memories(hub, [{"hit_count": i, "last_hit_days": 1} for i in range(100)])
    counts = _rebalance(hub, tenant_id)
    assert counts == {
        "ranked": 100, "hot": 10, "warm": 40, "cold": 50, "moved": 60, "newly_hot": 10, "archived": 0
    }  # fmt: skip
    tiers = [t for t, _, _ in _tiers(hub, ids)]
    assert tiers == ["cold"] * 50 + ["warm"] * 40 + ["hot"] * 10
    # Running again changes nothing.
    assert _rebalance(hub, tenant_id)["moved"] == 0


def test_rounding_is_ceil_for_hot_and_warm(hub):
    tenant_id, ids = add_memories(hub, [{"hit_count": i, "last_hit_days": 1} for i in range(15)])
    counts = _rebalance(hub, tenant_id)
    # ceil(1.5) = 2 HOT, ceil(6) = 6 WARM, the remaining 7 COLD.
    assert (counts["hot"], counts["warm"], counts["cold"]) == (2, 6, 7)


def test_ties_break_on_last_hit_then_never_hit_last(hub):
    rows = [
        {"hit_count": 5, "last_hit_days": 10},
        {"hit_count": 5, "last_hit_days": 1},  # same hits, used more recently: ranks first
        {"hit_count": 0},
        {"hit_count": 0, "last_hit_days": 2},
    ] + [{"hit_count": 0, "last_hit_days": 3}] * 6
    tenant_id, ids = add_memories(hub, rows)
    _rebalance(hub, tenant_id)  # 10 memories: 1 HOT, 4 WARM, 5 COLD
    tiers = [t for t, _, _ in _tiers(hub, ids)]
    assert tiers[1] == "hot" and tiers[0] == "warm" and tiers[3] == "warm"
    assert tiers[2] == "cold"  # never hit: last among equals


def test_archives_exactly_the_expired_cold_rows_and_never_pinned_ones(hub):
    hot_warm = [{"hit_count": 100 + i, "last_hit_days": 90} for i in range(10)]  # old but well used
    cold = [
        {"hit_count": 1, "last_hit_days": 45},  # expired
        {"hit_count": 1, "last_hit_days": 45, "pinned": True},  # expired but pinned
        {"hit_count": 1, "last_hit_days": 5},  # recent
        {"hit_count": 0, "created_days": 60},  # never hit, created long ago: expired
        {"hit_count": 0, "created_days": 2},  # never hit, new
        {"hit_count": 1, "last_hit_days": 31},  # just past the TTL
        {"hit_count": 1, "last_hit_days": 29},  # just inside it
        {"hit_count": 1, "last_hit_days": 200},  # expired
        {"hit_count": 1, "last_hit_days": 3},
        {"hit_count": 1, "last_hit_days": 4},
    ]
    tenant_id, ids = add_memories(hub, hot_warm + cold)
    counts = _rebalance(hub, tenant_id)
    assert (counts["hot"], counts["warm"], counts["cold"]) == (2, 8, 10)
    states = _tiers(hub, ids[10:])
    archived = [i for i, (_, status, _) in enumerate(states) if status == "archived"]
    assert archived == [0, 3, 5, 7]
    assert counts["archived"] == 4
    assert all(reason == "cold_ttl" for _, status, reason in states if status == "archived")
    # Old HOT/WARM rows are never archived; archived rows are kept, not deleted.
    assert all(status == "active" for _, status, _ in _tiers(hub, ids[:10]))
    with hub.db.session() as session:
        assert session.execute(text("SELECT count(*) FROM memories")).scalar_one() == 20
    # Archived memories leave the ranking: the next rebalance ranks 16.
    assert _rebalance(hub, tenant_id)["ranked"] == 16


def test_ttl_zero_disables_archiving(make_hub):
    hub = make_hub(cold_ttl_days=0)
    tenant_id, ids = add_memories(hub, [{"hit_count": 0, "created_days": 400} for _ in range(10)])
    assert _rebalance(hub, tenant_id)["archived"] == 0


def test_rebalance_is_scoped_to_its_tenant(hub):
    tenant_a, ids_a = add_memories(hub, [{"hit_count": i, "last_hit_days": 1} for i in range(10)], "a")
    _, ids_b = add_memories(hub, [{"hit_count": 0, "created_days": 90} for _ in range(10)], "b")
    _rebalance(hub, tenant_a)
    assert {t for t, _, _ in _tiers(hub, ids_b)} == {"warm"}
    assert all(status == "active" for _, status, _ in _tiers(hub, ids_b))


def test_worker_rebalances_every_tenant_and_records_the_run(hub):
    add_memories(hub, [{"hit_count": i, "last_hit_days": 1} for i in range(10)], "a")
    add_memories(hub, [{"hit_count": i, "last_hit_days": 1} for i in range(20)], "b")
    outcome = build_worker(hub).run_cycle(("rebalance",))[0]
    assert outcome.status == "ok" and outcome.counts["tenants"] >= 2
    assert outcome.counts["ranked"] == 30 and outcome.counts["hot"] == 3
    with hub.db.session() as session:
        run = session.execute(text("SELECT step, status, counts, finished_at FROM worker_runs")).one()
    assert run.step == "rebalance" and run.status == "ok" and run.counts["hot"] == 3
    assert run.finished_at is not None
    metrics, _ = render()
    assert b'ultron_worker_step_duration_seconds_count{step="rebalance"}' in metrics


def test_rebalance_is_skipped_while_another_worker_holds_its_lock(hub):
    tenant_id, ids = add_memories(hub, [{"hit_count": i, "last_hit_days": 1} for i in range(10)])
    with hub.db.engine.connect() as other:
        other.execute(
            text("SELECT pg_advisory_lock(:ns, :key)"),
            {"ns": SINGLETON_LOCK_NAMESPACE, "key": SINGLETON_KEYS["rebalance"]},
        )
        other.commit()
        outcome = build_worker(hub).run_cycle(("rebalance",))[0]
        other.execute(text("SELECT pg_advisory_unlock_all()"))
        other.commit()
    assert outcome.status == "skipped"
    assert {t for t, _, _ in _tiers(hub, ids)} == {"warm"}
    assert build_worker(hub).run_cycle(("rebalance",))[0].status == "ok"


def test_personal_memories_outlive_the_cold_ttl(make_hub):
    # A companion must still know its person three months later: life, preference and reflection
    # memories are archived after personal_ttl_days unused (400 by default), the rest after cold_ttl_days.
    hub = make_hub()
    assert (hub.settings.cold_ttl_days, hub.settings.personal_ttl_days) == (30, 400)
    hot_warm = [{"hit_count": 100 + i, "last_hit_days": 1} for i in range(10)]
    cold = [
        {"hit_count": 1, "last_hit_days": 100, "memory_type": "life"},  # her daughter's name: kept
        {"hit_count": 1, "last_hit_days": 100, "memory_type": "preference"},  # kept
        {"hit_count": 1, "last_hit_days": 100, "memory_type": "reflection"},  # kept
        {"hit_count": 1, "last_hit_days": 100, "memory_type": "error"},  # a stale fix: archived
        {"hit_count": 1, "last_hit_days": 100, "memory_type": "pattern"},  # archived
        {"hit_count": 1, "last_hit_days": 401, "memory_type": "life"},  # past the personal TTL
        {"hit_count": 0, "created_days": 399, "memory_type": "preference"},  # never hit, just inside
        {"hit_count": 0, "created_days": 401, "memory_type": "preference"},  # never hit, past it
    ] + [{"hit_count": 1, "last_hit_days": 2}] * 2
    tenant_id, ids = add_memories(hub, hot_warm + cold)
    counts = _rebalance(hub, tenant_id)
    states = _tiers(hub, ids[10:])
    assert [i for i, (_, status, _) in enumerate(states) if status == "archived"] == [3, 4, 5, 7]
    assert counts["archived"] == 4
    assert {states[i][0] for i in (0, 1, 2, 6)} == {"cold"}  # kept, still COLD: searchable, ranked low


def test_personal_ttl_zero_never_archives_personal_memories(make_hub):
    hub = make_hub(personal_ttl_days=0)
    used = [{"hit_count": 100 + i, "last_hit_days": 1} for i in range(10)]  # HOT and WARM
    old = [{"hit_count": 0, "created_days": 2000, "memory_type": t} for t in ("life", "error")] * 5
    tenant_id, ids = add_memories(hub, used + old)
    assert _rebalance(hub, tenant_id)["archived"] == 5
    states = _tiers(hub, ids[10:])
    assert [status for _, status, _ in states] == ["active", "archived"] * 5
