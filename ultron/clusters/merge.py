"""Small clusters merged into their nearest neighbour when the two would have formed one.

A memory joins the cluster whose members it is closest to on average (ultron/clusters/service.py), so
what forms depends on the order memories arrive in: the first runs of a topic can each start a cluster
that the topic's later runs then split between, and none reaches the crystallization threshold (eight
memories of one nginx topic in tests/data/skill_sessions ended in clusters of 4, 2 and 2). The worker's
pass fixes that afterwards: a cluster still below the threshold, with no skill, is merged into the
cluster whose members its own members are closest to on average -- the inner product of the two means,
the join rule applied to the cluster as a whole -- when that reaches the join threshold.
"""

from __future__ import annotations

from uuid import UUID

import numpy as np
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from ultron.clusters.service import CENTROID_DRIFT_COSINE, PROBE_CANDIDATES, SIM_TOLERANCE
from ultron.db.models import ClusterMember, KnowledgeCluster
from ultron.db.queries import q

MERGE_BATCH = 200  # small clusters looked at per tenant and pass
# A cluster of one is a memory nothing else came near, more often a stray than a split topic: merged, one
# unrelated memory of the demo ("pip install failed with externally-managed-environment") joined the
# docker skill. It may still be the target of a merge, and a later memory may still join it.
MERGE_MIN_MEMBERS = 2


def _mean(cluster: KnowledgeCluster) -> np.ndarray:
    mean = cluster.mean
    if hasattr(mean, "to_numpy"):
        mean = mean.to_numpy()
    return np.asarray(mean, dtype=np.float64)


def merge_small(
    session: Session, tenant_id: UUID, threshold: float, ready_at: int, limit: int = MERGE_BATCH
) -> int:
    """Up to `limit` of the tenant's clusters of MERGE_MIN_MEMBERS to `ready_at` - 1 members and without
    a skill, smallest first, each merged into the nearest cluster (HNSW probe on its mean's direction,
    decided on the exact means) whose average cosine to it reaches `threshold`; how many were merged."""
    small = session.scalars(
        select(KnowledgeCluster.id)
        .where(
            KnowledgeCluster.tenant_id == tenant_id,
            KnowledgeCluster.member_count >= MERGE_MIN_MEMBERS,
            KnowledgeCluster.member_count < ready_at,
            KnowledgeCluster.skill_slug.is_(None),
            KnowledgeCluster.mean.is_not(None),
        )
        .order_by(KnowledgeCluster.member_count, KnowledgeCluster.id)
        .limit(limit)
    ).all()
    merged = 0
    for cluster_id in small:
        merged += _merge_one(session, tenant_id, cluster_id, threshold - SIM_TOLERANCE, ready_at)
    return merged


def _merge_one(session: Session, tenant_id: UUID, cluster_id: UUID, floor: float, ready_at: int) -> int:
    source = session.get(KnowledgeCluster, (cluster_id, tenant_id), populate_existing=True)
    if source is None or source.mean is None or source.skill_slug:
        return 0
    if not MERGE_MIN_MEMBERS <= source.member_count < ready_at:
        return 0  # merged into, emptied or crystallized since the list was read
    mean = _mean(source)
    length = float(np.linalg.norm(mean))
    if length == 0:
        return 0
    probe = {"tenant_id": tenant_id, "v": (mean / length).astype(np.float32), "limit": PROBE_CANDIDATES + 1}
    near = [r.id for r in session.execute(q("nearest_clusters"), probe) if r.id != cluster_id]
    if not near:
        return 0
    # Both rows locked in id order (two passes, or a pass and an assignment, never wait on each other in a
    # cycle), then the decision taken on the means as they now are.
    locked = {
        c.id: c
        for c in session.scalars(
            select(KnowledgeCluster)
            .where(KnowledgeCluster.tenant_id == tenant_id, KnowledgeCluster.id.in_([cluster_id, *near]))
            .order_by(KnowledgeCluster.id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    }
    source = locked[cluster_id]
    if source.mean is None or not MERGE_MIN_MEMBERS <= source.member_count < ready_at or source.skill_slug:
        return 0
    mean = _mean(source)
    scored = [
        (float(mean @ _mean(c)), c.id)
        for c in locked.values()
        if c.id != cluster_id and c.mean is not None and c.member_count > 0
    ]
    if not scored:
        return 0
    score, target_id = max(scored, key=lambda s: (s[0], str(s[1])))
    if score < floor:
        return 0
    target = locked[target_id]
    n = source.member_count + target.member_count
    joined = ((mean * source.member_count + _mean(target) * target.member_count) / n).astype(np.float32)
    session.execute(
        update(ClusterMember)
        .where(ClusterMember.tenant_id == tenant_id, ClusterMember.cluster_id == cluster_id)
        # new to the target: they count towards revising its skill, as members joining it now do
        .values(cluster_id=target_id, joined_at=func.now())
    )
    norm = float(np.linalg.norm(joined.astype(np.float64)))
    target.mean, target.member_count, target.centroid_norm = joined, n, norm
    if target.centroid is not None:
        centroid = np.asarray(
            target.centroid.to_numpy() if hasattr(target.centroid, "to_numpy") else target.centroid,
            dtype=np.float64,
        )
        if float(centroid @ joined) / (float(np.linalg.norm(centroid)) * norm) < CENTROID_DRIFT_COSINE:
            target.centroid = (joined / norm).astype(np.float32)
    # emptied as leave_cluster empties a cluster: out of the probe, kept as a row
    source.mean, source.centroid, source.centroid_norm, source.member_count = None, None, 0.0, 0
    source.updated_at = target.updated_at = func.now()
    session.flush()
    return 1
