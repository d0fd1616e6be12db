"""Planning a tenant's HNSW probes onto the index: sorts off where the tenant is most of its table.

In a store of ~1-3k rows the planner costs a sort of the tenant's rows by distance below the HNSW walk,
blind to reading each vector back out of TOAST (docs/ranking.md, "The dense leg"; docs/skills.md, stop 20).
The search's dense leg and the dedup probe (memory/service.py) and the cluster assignment's probes
(clusters/service.py) are then planned with sorts off, each in a statement text of its own (a prepared
plan is cached under the settings of its first run), with SORT_OFF before and SORT_DEFAULT after it in the
same transaction (an upload's probes: PROBE_WALK and PROBE_DEFAULT, which also ask for their generic
plan). Whether a tenant walks is read from the database per tenant and kept in a WalkCache.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from uuid import UUID

SORT_OFF = "SELECT set_config('enable_sort', 'off', true)"
SORT_DEFAULT = "RESET enable_sort"
# An upload's walking probes (the dedup probe and its create, the supersede probe): sorts off, and their
# prepared statement's generic plan. Left to choose, Postgres planned them anew on every upload (a custom
# plan each time: pg_prepared_statements showed 0 generic and 158 custom plans of the dedup probe after 200
# uploads), 1.4 ms of planning for the probe-or-create statement alone at 10k; planned with sorts off the
# generic plan is the same HNSW walk. PROBE_DEFAULT puts both back, in two statements (a pipeline sends one
# statement per query), in the same round trip.
PROBE_WALK = SORT_OFF + ", set_config('plan_cache_mode', 'force_generic_plan', true)"
PROBE_DEFAULT = (SORT_DEFAULT, "RESET plan_cache_mode")
# A tenant holding at least this share of the table walks.
WALK_SHARE = 0.5
# A yes is re-read once a minute; a no every 10 s, and at once after the hub's own term-statistics keeper
# rebuilt the tenant's statistics or analyzed the tables (memory/termstats.py, `forget`): a store loading in
# bulk walks from its next batch on.
WALK_TTL_S = 60.0
NO_WALK_TTL_S = 10.0


class WalkCache:
    """Per tenant, whether its probes walk the index, as `read()` last said."""

    def __init__(self) -> None:
        self._known: dict[UUID, tuple[float, bool]] = {}

    def get(self, tenant_id: UUID, read: Callable[[], bool]) -> bool:
        now = time.monotonic()
        known = self._known.get(tenant_id)
        if known is not None and known[0] > now:
            return known[1]
        walk = read()
        self._known[tenant_id] = (now + (WALK_TTL_S if walk else NO_WALK_TTL_S), walk)
        return walk

    def forget(self, tenant_id: UUID | None = None) -> None:
        """Read the tenant's answer again on its next probe (every tenant's, without one)."""
        if tenant_id is None:
            self._known.clear()
        else:
            self._known.pop(tenant_id, None)
