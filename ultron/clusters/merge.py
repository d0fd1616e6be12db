"""Small clusters merged into their nearest neighbour when the two would have formed one.

A memory joins the cluster whose members it is closest to on average (ultron/clusters/service.py), so
what forms depends on the order memories arrive in: the first runs of a topic can each start a cluster
that the topic's later runs then split between, and none reaches the crystallization threshold (eight
memories of one nginx topic in tests/data/skill_sessions ended in clusters of 4, 2 and 2). The worker's
pass fixes that afterwards: a cluster still below the threshold, with no skill, is merged into the
cluster whose members its own members are closest to on average -- the inner product of the two means,
the join rule applied to the cluster as a whole -- when that reaches the join threshold.

Arrival order can also put a memory in the wrong cluster outright: two topics whose memories are 0.88 apart
on average (below the 0.89 join) still have pairs at 0.893, and a cluster that two such memories started
draws the next ones of both topics (tests/data/skill_sessions: {rust 9, make 4} in about one order in a
hundred). `refine` moves such a member: a member of a cluster without a skill that is closer on average to
another cluster's members than to the rest of its own, and close enough to join that one, leaves and is
assigned again -- the join rule applied with every member in place, one k-means step. Offline over 3,000
arrival orders of that corpus's 26 memories: clusters below 0.9 purity or a topic without exactly one ready
cluster in 12 and 18 orders with the merge alone, in 0 with refine, merge, refine.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import numpy as np
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from ultron.clusters.service import CENTROID_DRIFT_COSINE, PROBE_CANDIDATES, SIM_TOLERANCE, ClusterService
from ultron.db.models import ClusterMember, KnowledgeCluster
from ultron.db.queries import q

MERGE_BATCH = 200  # small clusters looked at per tenant and pass
# A cluster of one is a memory nothing else came near, more often a stray than a split topic: merged, one
# unrelated memory of the demo ("pip install failed with externally-managed-environment") joined the
# docker skill. It may still be the target of a merge, and a later memory may still join it.
MERGE_MIN_MEMBERS = 2
REFINE_BATCH = 50  # clusters without a skill whose members are looked at per tenant and pass
REFINE_MAX_MEMBERS = 400  # a larger cluster's members are not re-read (its mean barely moves per member)


def _array(vector: Any) -> np.ndarray:
    if hasattr(vector, "to_numpy"):
        vector = vector.to_numpy()
    return np.asarray(vector, dtype=np.float64)


def _mean(cluster: KnowledgeCluster) -> np.ndarray:
    return _array(cluster.mean)


def _nearest(session: Session, tenant_id: UUID, cluster_id: UUID, mean: np.ndarray) -> list[UUID]:
    """The clusters nearest the mean's direction (the HNSW probe, `nearest_clusters`), but this one."""
    length = float(np.linalg.norm(mean))
    if length == 0:
        return []
    probe = {"tenant_id": tenant_id, "v": (mean / length).astype(np.float32), "limit": PROBE_CANDIDATES + 1}
    return [r.id for r in session.execute(q("nearest_clusters"), probe) if r.id != cluster_id]


def refine(
    session: Session, clusters: ClusterService, tenant_id: UUID, threshold: float, limit: int = REFINE_BATCH
) -> int:
    """Up to `limit` of the tenant's clusters of 2 to REFINE_MAX_MEMBERS members without a skill, the most
    recently changed first (a join, a leave or a merge; the others were looked at when they changed): each
    member closer to another cluster's members on average (its mean, exact, among the clusters
    nearest the own cluster's mean) than to the rest of its own, at or above `threshold`, leaves and is
    assigned again (ClusterService.leave and .assign: exact running means, the join rule); how many moved.
    A cluster of one is left alone (see MERGE_MIN_MEMBERS); so is a member of a cluster with a skill."""
    floor = threshold - SIM_TOLERANCE
    picked = session.execute(
        select(KnowledgeCluster.id, KnowledgeCluster.mean)
        .where(
            KnowledgeCluster.tenant_id == tenant_id,
            KnowledgeCluster.member_count >= MERGE_MIN_MEMBERS,
            KnowledgeCluster.member_count <= REFINE_MAX_MEMBERS,
            KnowledgeCluster.skill_slug.is_(None),
            KnowledgeCluster.mean.is_not(None),
        )
        .order_by(KnowledgeCluster.updated_at.desc(), KnowledgeCluster.id)
        .limit(limit)
    ).all()
    moved = 0
    for cluster_id, stored_mean in picked:
        near = _nearest(session, tenant_id, cluster_id, _array(stored_mean))
        if not near:
            continue
        # Both read now, after the moves out of earlier clusters of this pass.
        own = session.execute(
            select(KnowledgeCluster.mean, KnowledgeCluster.member_count).where(
                KnowledgeCluster.tenant_id == tenant_id, KnowledgeCluster.id == cluster_id
            )
        ).one()
        if own.mean is None or own.member_count < MERGE_MIN_MEMBERS:
            continue
        others = session.execute(
            select(KnowledgeCluster.mean).where(
                KnowledgeCluster.tenant_id == tenant_id,
                KnowledgeCluster.id.in_(near),
                KnowledgeCluster.member_count > 0,
                KnowledgeCluster.mean.is_not(None),
            )
        ).scalars()
        targets = np.array([_array(m) for m in others])
        if not len(targets):
            continue
        members = session.execute(
            select(ClusterMember.memory_id, ClusterMember.embedding)
            .where(
                ClusterMember.tenant_id == tenant_id,
                ClusterMember.cluster_id == cluster_id,
                ClusterMember.embedding.is_not(None),
            )
            .order_by(ClusterMember.memory_id)
        ).all()
        n, own_mean = own.member_count, _array(own.mean)
        leaving = []
        for memory_id, embedding in members:
            v = _array(embedding)
            # the average cosine to the other n - 1 members: (n * mean . v - v . v) / (n - 1)
            stay = (n * float(own_mean @ v) - float(v @ v)) / (n - 1)
            best = float((targets @ v).max())
            if best > stay and best >= floor:
                leaving.append((memory_id, v))
        for memory_id, v in leaving[: n - 1]:  # never the last member: a cluster of one is not refined
            clusters.leave(session, tenant_id, memory_id)
            # the join rule decides again (its probe starts from the member, not the cluster's mean)
            moved += clusters.assign(session, tenant_id, memory_id, v) != cluster_id
    return moved


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
    near = _nearest(session, tenant_id, cluster_id, _mean(source))
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
