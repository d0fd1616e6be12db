"""Arousal in the worker: intense memories stay warmer in the tier rebalance and outlive the COLD TTL."""

from __future__ import annotations

from sqlalchemy import select

from tests.worker.conftest import add_memories
from ultron.db.models import Memory
from ultron.hub import build_worker
from ultron.memory.schemas import MemoryPatch
from ultron.tenancy import local_actor


def _set_arousal(hub, values):  # type: ignore[no-untyped-def]
    """Through the memory service's edit, as the API's PATCH /memories/{id} does."""
    with hub.db.session() as session:
        actor = local_actor(session)
        for memory_id, arousal in values.items():
            hub.memory.edit(session, actor, memory_id, MemoryPatch(arousal=arousal))


def _states(hub, ids):  # type: ignore[no-untyped-def]
    with hub.db.session() as session:
        rows = {
            r.id: (r.tier, r.status) for r in session.execute(select(Memory.id, Memory.tier, Memory.status))
        }
    return [rows[i] for i in ids]


def _cycle(hub):  # type: ignore[no-untyped-def]
    outcome = build_worker(hub).run_cycle(("rebalance",))[0]
    assert outcome.status == "ok", outcome
    return outcome.counts


def test_high_arousal_stays_warmer_than_a_calm_memory_used_as_often(make_hub):
    hub = make_hub()
    # 10 memories, 1 HOT and 4 WARM: the used pair ties on hits; the intense one of them takes HOT.
    rows = [{"hit_count": 4, "last_hit_days": 1}, {"hit_count": 4, "last_hit_days": 1}]
    rows += [{"hit_count": 3, "last_hit_days": 1}] * 2 + [{"hit_count": 0, "created_days": 1}] * 6
    _, ids = add_memories(hub, rows)
    _set_arousal(hub, {ids[1]: 0.9, ids[9]: 1.0})
    _cycle(hub)
    tiers = [t for t, _ in _states(hub, ids)]
    assert tiers[1] == "hot" and tiers[0] == "warm"
    # An intense memory never used outranks calm unused ones (WARM, not COLD), not one used 3 times.
    assert tiers[9] == "warm" and tiers[2:4] == ["warm"] * 2 and tiers[4:9] == ["cold"] * 5


def test_high_arousal_stretches_the_cold_ttl(make_hub):
    hub = make_hub()  # cold_ttl_days 30, arousal_ttl_factor 1: arousal 0.9 keeps it 57 days
    used = [{"hit_count": 100 + i, "last_hit_days": 1} for i in range(10)]
    old = [{"hit_count": 1, "last_hit_days": 40}, {"hit_count": 1, "last_hit_days": 40}]
    old += [{"hit_count": 1, "last_hit_days": 70}]
    _, ids = add_memories(hub, used + old)
    calm, intense, too_old = ids[10:]
    _set_arousal(hub, {calm: 0.1, intense: 0.9, too_old: 0.9})
    assert _cycle(hub)["archived"] == 2
    assert _states(hub, [calm, intense, too_old]) == [
        ("cold", "archived"),
        ("cold", "active"),
        ("cold", "archived"),
    ]


def test_arousal_weights_zero_restore_the_plain_ranking(make_hub):
    hub = make_hub(arousal_tier_weight=0.0, arousal_ttl_factor=0.0)
    used = [{"hit_count": 100 + i, "last_hit_days": 1} for i in range(10)]
    _, ids = add_memories(hub, used + [{"hit_count": 1, "last_hit_days": 40}])
    _set_arousal(hub, {ids[-1]: 1.0, ids[0]: 1.0})
    _cycle(hub)
    states = _states(hub, ids)
    # 11 memories: 2 HOT, 5 WARM, 4 COLD; the least used of the 100+ is COLD despite its arousal.
    assert states[-1] == ("cold", "archived") and states[9][0] == "hot" and states[0][0] == "cold"


def test_the_worker_applies_an_admins_runtime_change(make_hub):
    """An admin lengthens the COLD TTL at run time (ultron/settings_store.py): the next cycle keeps what
    the configured 30 days would have archived; another tenant keeps the configuration."""
    from ultron.settings_store import RuntimeChange

    hub = make_hub()
    used = [{"hit_count": 100 + i, "last_hit_days": 1} for i in range(10)]
    old = [{"hit_count": 1, "last_hit_days": 40}]
    _, ids = add_memories(hub, used + old)
    _, other = add_memories(hub, used + old, tenant="elsewhere")
    with hub.db.session() as session:
        hub.runtime.change(session, local_actor(session), RuntimeChange(values={"cold_ttl_days": 60}))
    assert _cycle(hub)["archived"] == 1
    assert _states(hub, [ids[-1], other[-1]]) == [("cold", "active"), ("cold", "archived")]
