"""A restarted worker runs the full cycle only when it is due by its period, as recorded in the database:
how often the hub restarts never changes a memory's tier."""

from __future__ import annotations

import threading
import time

from sqlalchemy import select, text

from tests.worker.conftest import add_memories
from ultron.db.models import Memory
from ultron.hub import build_worker
from ultron.worker.runner import Worker


def _start_and_stop(worker: Worker) -> None:
    """The loop until it first waits for work (its start-up decisions made), then a stop."""
    waiting = threading.Event()
    wait_for_work = worker.wait_for_work

    def wait(seconds: float) -> bool:
        waiting.set()
        return wait_for_work(min(seconds, 0.05))

    worker.wait_for_work = wait  # type: ignore[method-assign]
    thread = threading.Thread(target=worker.run_forever)
    thread.start()
    try:
        assert waiting.wait(timeout=60)
    finally:
        worker.stop()
        thread.join(timeout=60)
    assert not thread.is_alive()


def _rebalances(hub) -> int:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return int(s.execute(text("SELECT count(*) FROM worker_runs WHERE step = 'rebalance'")).scalar_one())


def _tier(hub, memory_id) -> str:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return str(s.execute(select(Memory.tier).where(Memory.id == memory_id)).scalar_one())


def test_rebalance_on_start_leaves_a_fresh_memorys_tier(worker_hub):
    hub = worker_hub(decay_interval_hours=6.0)
    add_memories(hub, [{"hit_count": 3, "last_hit_days": 1}] * 9)
    first = build_worker(hub, worker_id="before-restart")
    assert first.run_cycle(("rebalance",))[0].status == "ok"  # the last full cycle: moments ago
    # uploaded since, never used yet: a rebalance now would rank it last of ten, COLD
    _, [fresh] = add_memories(hub, [{"tier": "warm"}])

    _start_and_stop(build_worker(hub, worker_id="restarted"))
    assert _tier(hub, fresh) == "warm"
    assert _rebalances(hub) == 1

    # Due by its period (the last cycle 7 hours ago): a start runs it, as the period says.
    with hub.db.session() as s:
        s.execute(text("UPDATE worker_runs SET started_at = started_at - interval '7 hours'"))
    started = time.monotonic()
    _start_and_stop(build_worker(hub, worker_id="restarted-later"))
    assert _rebalances(hub) == 2 and time.monotonic() - started < 60
    assert _tier(hub, fresh) == "cold"
