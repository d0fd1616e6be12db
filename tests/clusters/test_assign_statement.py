"""ClusterService.assign as one statement: the rule checked against a numpy reference, and concurrent
joins into one cluster (two sessions: the row lock and the re-check of the newest mean)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from tests.clusters.test_clusters import _basis, _memory, _tenant
from ultron.clusters.service import CENTROID_DRIFT_COSINE, PROBE_CANDIDATES, SIM_TOLERANCE, unit
from ultron.db.models import ClusterMember, KnowledgeCluster

THRESHOLD = 0.8


@pytest.fixture()
def chub(make_hub):  # type: ignore[no-untyped-def]
    return make_hub(cluster_similarity_threshold=THRESHOLD)


@dataclass
class RefCluster:
    mean: np.ndarray
    centroid: np.ndarray
    members: list[int] = field(default_factory=list)
    refreshes: int = 0


def reference_assign(clusters: list[RefCluster], v: np.ndarray, index: int) -> int:
    """The assignment rule in numpy: the PROBE_CANDIDATES nearest indexed centroids (cosine), the one with
    the highest join score (v . mean) if it reaches the threshold, else a new cluster; the running mean,
    and the centroid rewritten only when its cosine to the new mean falls below CENTROID_DRIFT_COSINE.
    Stored vectors are float32, as in the table."""
    u = unit(v)
    by_centroid = sorted(range(len(clusters)), key=lambda i: -float(unit(clusters[i].centroid) @ u))
    near = by_centroid[:PROBE_CANDIDATES]
    scores = {i: float(clusters[i].mean.astype(np.float64) @ u) for i in near}
    best = max(scores, key=lambda i: scores[i], default=None)
    if best is None or scores[best] < THRESHOLD - SIM_TOLERANCE:
        u32 = u.astype(np.float32)
        clusters.append(RefCluster(mean=u32, centroid=u32, members=[index]))
        return len(clusters) - 1
    c = clusters[best]
    n = len(c.members)
    mean = (c.mean.astype(np.float64) * n + u) / (n + 1)
    if float(unit(c.centroid) @ unit(mean)) < CENTROID_DRIFT_COSINE:
        c.centroid = unit(mean).astype(np.float32)
        c.refreshes += 1
    c.mean = mean.astype(np.float32)
    c.members.append(index)
    return best


def _stored(session, cluster_id):  # type: ignore[no-untyped-def]
    return session.get(KnowledgeCluster, (cluster_id, _tenant(session)), populate_existing=True)


def test_assign_follows_the_reference_rule_over_a_sequence(chub):  # type: ignore[no-untyped-def]
    """Topics at cosine ~0.9 and strays: joins and new clusters, refreshed and kept centroids alike; the
    statement's membership, counts, means and centroids match the numpy reference at every step."""
    dim = chub.embedder.dimension
    rng = np.random.default_rng(5)
    topics = [unit(rng.standard_normal(dim)) for _ in range(4)]
    vectors = []
    for i in range(90):
        if i % 9 == 8:
            vectors.append(unit(rng.standard_normal(dim)))  # a stray: starts its own cluster
        else:
            t = topics[int(rng.integers(len(topics)))]
            vectors.append(unit(t + rng.standard_normal(dim) * (0.35 / np.sqrt(dim))))
    ref: list[RefCluster] = []
    ids: dict[int, Any] = {}  # reference cluster index -> cluster id
    with chub.db.session() as s:
        tenant = _tenant(s)
        for i, v in enumerate(vectors):
            m = _memory(s, tenant, v, f"m{i}")
            got = chub.clusters.assign(s, tenant, m.id, v)
            want = reference_assign(ref, v, i)
            assert ids.setdefault(want, got) == got, f"vector {i} joined another cluster"
            assert len(set(ids.values())) == len(ids)
            c = _stored(s, got)
            r = ref[want]
            assert c.member_count == len(r.members)
            assert np.allclose(np.asarray(c.mean), r.mean, atol=2e-6)
            assert abs(c.centroid_norm - float(np.linalg.norm(r.mean.astype(np.float64)))) < 2e-6
            assert np.allclose(np.asarray(c.centroid), r.centroid, atol=2e-6)
            member = s.get(ClusterMember, (m.id, tenant))
            assert member.cluster_id == got
            assert np.allclose(np.asarray(member.embedding), unit(v), atol=1e-7)
    joins = sum(len(r.members) - 1 for r in ref)
    refreshes = sum(r.refreshes for r in ref)
    assert len(ref) >= 10 and joins >= 60  # both branches, many times
    assert 0 < refreshes < joins  # the centroid was rewritten on some joins, left alone on others


def _wait_for_lock_wait(chub, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    """Until a session of this database waits on a lock (the second assignment, on the cluster's row)."""
    deadline = time.monotonic() + timeout
    with chub.db.engine.connect() as conn:
        while time.monotonic() < deadline:
            waiting = conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND wait_event_type = 'Lock'"
                )
            ).scalar_one()
            conn.rollback()
            if waiting:
                return
            time.sleep(0.02)
    raise AssertionError("the second assignment never waited on the row lock")


def _race(chub, tenant, first: np.ndarray, second: np.ndarray) -> tuple[Any, Any]:  # type: ignore[no-untyped-def]
    """`first` is assigned and left uncommitted (its row lock held) while `second` is assigned in another
    session: that one probes on the old mean, waits on the lock, and goes on once `first` commits."""
    with chub.db.session() as s:
        m1, m2 = _memory(s, tenant, first, "first"), _memory(s, tenant, second, "second")
    out: dict[str, Any] = {}

    def other() -> None:
        try:
            with chub.db.session() as s2:
                out["second"] = chub.clusters.assign(s2, tenant, m2.id, second)
        except Exception as exc:  # noqa: BLE001 - reported by the main thread
            out["error"] = exc

    with chub.db.session() as s1:
        out["first"] = chub.clusters.assign(s1, tenant, m1.id, first)
        thread = threading.Thread(target=other)
        thread.start()
        _wait_for_lock_wait(chub)
    thread.join(30)
    assert "error" not in out, out.get("error")
    return out["first"], out["second"]


def test_a_concurrent_join_waits_and_loses_no_member_or_mean_update(chub):  # type: ignore[no-untyped-def]
    dim = chub.embedder.dimension
    e0 = _basis(dim, 0)
    with chub.db.session() as s:
        tenant = _tenant(s)
        seed = _memory(s, tenant, e0, "seed")
        cluster_id = chub.clusters.assign(s, tenant, seed.id, e0)
    a = 0.95 * e0 + np.sqrt(1 - 0.95**2) * _basis(dim, 1)
    b = 0.95 * e0 + np.sqrt(1 - 0.95**2) * _basis(dim, 2)
    first, second = _race(chub, tenant, a, b)
    assert first == second == cluster_id
    with chub.db.session() as s:
        c = _stored(s, cluster_id)
        assert c.member_count == 3
        assert np.allclose(np.asarray(c.mean), np.mean([e0, a, b], axis=0), atol=1e-6)  # both updates


def test_the_join_is_rechecked_on_the_mean_a_concurrent_join_left(chub):  # type: ignore[no-untyped-def]
    """The second assignment's probe saw the cluster's old mean (score 0.82); the first one's join moved
    it (score 0.57): under the lock the newest mean decides, and the second vector starts a cluster."""
    dim = chub.embedder.dimension
    e0, e1 = _basis(dim, 0), _basis(dim, 1)
    with chub.db.session() as s:
        tenant = _tenant(s)
        seed = _memory(s, tenant, e0, "seed")
        cluster_id = chub.clusters.assign(s, tenant, seed.id, e0)
    a = 0.8 * e0 - 0.6 * e1
    b = 0.82 * e0 + np.sqrt(1 - 0.82**2) * e1
    assert float(b @ e0) >= THRESHOLD and float(b @ ((e0 + a) / 2)) < THRESHOLD
    first, second = _race(chub, tenant, a, b)
    assert first == cluster_id and second != cluster_id
    with chub.db.session() as s:
        c = _stored(s, cluster_id)
        assert c.member_count == 2
        assert np.allclose(np.asarray(c.mean), (e0 + a) / 2, atol=1e-6)
        assert _stored(s, second).member_count == 1


def test_many_concurrent_assignments_keep_counts_and_means_exact(chub):  # type: ignore[no-untyped-def]
    """Two sessions assigning 25 vectors each into one cluster, at once: every member counted once, and
    the mean is the exact mean of the members' vectors."""
    dim = chub.embedder.dimension
    rng = np.random.default_rng(9)
    topic = unit(rng.standard_normal(dim))
    vectors = [unit(topic + rng.standard_normal(dim) * (0.2 / np.sqrt(dim))) for _ in range(50)]
    with chub.db.session() as s:
        tenant = _tenant(s)
        memories = [_memory(s, tenant, v, f"c{i}").id for i, v in enumerate(vectors)]
        seed = _memory(s, tenant, topic, "seed").id
        cluster_id = chub.clusters.assign(s, tenant, seed, topic)
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def worker(part: int) -> None:
        try:
            start.wait()
            for i in range(part, len(vectors), 2):
                with chub.db.session() as s:
                    chub.clusters.assign(s, tenant, memories[i], vectors[i])
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(p,)) for p in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    with chub.db.session() as s:
        rows = s.execute(
            text(
                "SELECT c.id, c.member_count, c.mean, count(cm.memory_id) AS members, "
                "avg(cm.embedding) AS exact FROM knowledge_clusters c "
                "JOIN cluster_members cm ON cm.cluster_id = c.id GROUP BY c.id, c.tenant_id"
            )
        ).all()
    assert [(r.id, r.member_count, r.members) for r in rows] == [(cluster_id, 51, 51)]
    exact = np.mean([topic, *vectors], axis=0)
    assert np.allclose(rows[0].exact.to_numpy(), exact, atol=1e-6)
    assert np.allclose(rows[0].mean.to_numpy(), exact, atol=1e-5)


def reference_leave(clusters: list[RefCluster], v: np.ndarray, index: int) -> int:
    """A member leaves: the exact mean without it, the centroid rewritten only on drift, an emptied
    cluster keeps neither."""
    k = next(i for i, c in enumerate(clusters) if index in c.members)
    c = clusters[k]
    n = len(c.members)
    c.members.remove(index)
    if n == 1:
        c.mean = c.centroid = None  # type: ignore[assignment]
        return k
    mean = (c.mean.astype(np.float64) * n - unit(v).astype(np.float32)) / (n - 1)
    if float(unit(c.centroid) @ unit(mean)) < CENTROID_DRIFT_COSINE:
        c.centroid = unit(mean).astype(np.float32)
        c.refreshes += 1
    c.mean = mean.astype(np.float32)
    return k


def test_leave_follows_the_reference_rule(chub):  # type: ignore[no-untyped-def]
    """Members of three topics leave in random order until every cluster is empty: counts, means and
    centroid refreshes as in the numpy reference at every step (float32 arithmetic in the statement, the
    reference in float64: a leave subtracts, so the tolerance is wider than for joins); a second leave
    changes nothing."""
    dim = chub.embedder.dimension
    rng = np.random.default_rng(8)
    topics = [unit(rng.standard_normal(dim)) for _ in range(3)]
    vectors = [unit(topics[i % 3] + rng.standard_normal(dim) * (0.35 / np.sqrt(dim))) for i in range(36)]
    ref: list[RefCluster] = []
    ids: dict[int, Any] = {}
    with chub.db.session() as s:
        tenant = _tenant(s)
        memories = []
        for i, v in enumerate(vectors):
            memories.append(_memory(s, tenant, v, f"m{i}").id)
            ids[reference_assign(ref, v, i)] = chub.clusters.assign(s, tenant, memories[-1], v)
        refreshes = sum(r.refreshes for r in ref)
        for i in rng.permutation(len(vectors)):
            k = reference_leave(ref, vectors[i], int(i))
            assert chub.clusters.leave(s, tenant, memories[i]) == ids[k]
            assert s.get(ClusterMember, (memories[i], tenant)) is None
            c, r = _stored(s, ids[k]), ref[k]
            assert c.member_count == len(r.members)
            if not r.members:
                assert c.mean is None and c.centroid is None and c.centroid_norm == 0
                continue
            assert np.allclose(np.asarray(c.mean), r.mean, atol=1e-5)
            assert abs(c.centroid_norm - float(np.linalg.norm(r.mean.astype(np.float64)))) < 1e-5
            assert np.allclose(np.asarray(c.centroid), r.centroid, atol=1e-5)
        assert sum(r.refreshes for r in ref) > refreshes  # some leaves moved the mean past the bound
        assert chub.clusters.leave(s, tenant, memories[0]) is None  # not a member any more
