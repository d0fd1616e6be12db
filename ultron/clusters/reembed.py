"""`ultron db reembed`'s pass over clusters (ultron/cli/reembed.py runs every domain's pass in one
transaction): nothing is cleared, so nothing has to be re-clustered or crystallized again under a new slug."""

from __future__ import annotations

import numpy as np
from sqlalchemy import text
from sqlalchemy.engine import Connection

from ultron.db.queries import q
from ultron.memory.reembed import ZERO_UUID


def reembed_clusters(conn: Connection, batch_size: int) -> int:
    """Members take their memory's new vector; each cluster's exact mean becomes their mean (its length in
    centroid_norm) and its indexed centroid the normalized mean (the invariants of
    ultron/clusters/service.py)."""
    conn.execute(q("reembed_cluster_members"))
    done, after = 0, ZERO_UUID
    while True:
        rows = conn.execute(q("cluster_means"), {"after": after, "limit": batch_size}).all()
        if not rows:
            return done
        updates = []
        for r in rows:
            mean = np.zeros(1) if r.mean is None else np.asarray(r.mean.to_numpy(), dtype=np.float64)
            norm = float(np.linalg.norm(mean))
            # No member vector (an empty cluster): no centroid, so it drops out of assignment.
            centroid = (mean / norm).astype(np.float32) if norm > 0 else None
            exact = mean.astype(np.float32) if norm > 0 else None
            updates.append({"id": r.id, "c": centroid, "m": exact, "norm": norm, "n": r.members})
        conn.execute(
            text(
                "UPDATE knowledge_clusters SET centroid = CAST(:c AS vector), mean = CAST(:m AS vector), "
                "centroid_norm = :norm, member_count = :n, updated_at = now() WHERE id = :id"
            ),
            updates,
        )
        done += len(rows)
        after = str(rows[-1].id)
