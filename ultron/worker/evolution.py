"""The worker's skill-evolution step: the loop over tenants and the transactions around skills' steps."""

from __future__ import annotations

from collections.abc import Callable

from ultron.db.engine import Database
from ultron.skills.service import SkillService
from ultron.worker.rebalance import tenant_ids


def run_evolution_cycle(
    db: Database, skills: SkillService, should_stop: Callable[[], bool] = lambda: False
) -> dict[str, int]:
    """Per tenant: refresh its clusters (one transaction), find the ready ones (one), then evolve each
    ready cluster in its own transaction, checking `should_stop` between clusters."""
    with db.session() as session:
        tenants = tenant_ids(session)
    counts: dict[str, int] = {"clustered": 0, "left": 0, "published": 0, "failed": 0, "reverted": 0}
    for tenant_id in tenants:
        with db.session() as session:
            refreshed = skills.refresh_clusters(session, tenant_id)
        counts["left"] += refreshed["left"]
        counts["clustered"] += refreshed["clustered"]
        with db.session() as session:
            ready = skills.ready_clusters(session, tenant_id)
        for cluster_id, trigger in ready:
            if should_stop():
                return counts
            with db.session() as session:
                outcome = skills.evolve_cluster(session, tenant_id, cluster_id, trigger)
            counts[outcome] = counts.get(outcome, 0) + 1
    return counts
