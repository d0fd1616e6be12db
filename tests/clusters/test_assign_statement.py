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
from ultron.clusters import service as cluster_service
from ultron.clusters.service import (
    CENTROID_DRIFT_COSINE,
    PROBE_CANDIDATES,
    SIM_TOLERANCE,
    UNINDEXED_MAX,
    unit,
)
from ultron.db.models import ClusterMember, KnowledgeCluster
from ultron.db.queries import q

THRESHOLD = 0.8
# This backend's update counters of knowledge_clusters: all updates, and the HOT ones (no index entry).
HOT_COUNTERS = text(
    "SELECT pg_stat_get_xact_tuples_updated('knowledge_clusters'::regclass), "
    "pg_stat_get_xact_tuples_hot_updated('knowledge_clusters'::regclass)"
)


@pytest.fixture()
def chub(make_hub):  # type: ignore[no-untyped-def]
    return make_hub(cluster_similarity_threshold=THRESHOLD)


@dataclass
class RefCluster:
    mean: np.ndarray
    centroid: np.ndarray | None  # None: not in the HNSW index yet (the worker indexes it)
    members: list[int] = field(default_factory=list)
    refreshes: int = 0


def reference_assign(clusters: list[RefCluster], v: np.ndarray, index: int, cap: int = UNINDEXED_MAX) -> int:
    """The assignment rule in numpy: the PROBE_CANDIDATES nearest indexed centroids (cosine) and every
    unindexed cluster, the one with the highest join score (v . mean) if it reaches the threshold, else a
    new cluster -- unindexed unless `cap` clusters already are; the running mean, and the centroid of an
    indexed cluster rewritten only when its cosine to the new mean falls below CENTROID_DRIFT_COSINE.
    Stored vectors are float32, as in the table."""
    u = unit(v)
    live = [i for i, c in enumerate(clusters) if c.members]
    indexed = [i for i in live if clusters[i].centroid is not None]
    unindexed = [i for i in live if clusters[i].centroid is None]
    by_centroid = sorted(indexed, key=lambda i: -float(unit(clusters[i].centroid) @ u))
    near = by_centroid[:PROBE_CANDIDATES] + unindexed
    scores = {i: float(clusters[i].mean.astype(np.float64) @ u) for i in near}
    best = max(scores, key=lambda i: scores[i], default=None)
    if best is None or scores[best] < THRESHOLD - SIM_TOLERANCE:
        u32 = u.astype(np.float32)
        clusters.append(
            RefCluster(mean=u32, centroid=u32 if len(unindexed) >= cap else None, members=[index])
        )
        return len(clusters) - 1
    c = clusters[best]
    n = len(c.members)
    mean = (c.mean.astype(np.float64) * n + u) / (n + 1)
    if c.centroid is not None and float(unit(c.centroid) @ unit(mean)) < CENTROID_DRIFT_COSINE:
        c.centroid = unit(mean).astype(np.float32)
        c.refreshes += 1
    c.mean = mean.astype(np.float32)
    c.members.append(index)
    return best


def reference_index(clusters: list[RefCluster]) -> int:
    """The worker's pass: every unindexed cluster with members gets the mean's direction."""
    pending = [c for c in clusters if c.members and c.centroid is None]
    for c in pending:
        c.centroid = unit(c.mean).astype(np.float32)
    return len(pending)


def _check(c, r: RefCluster, atol: float) -> None:  # type: ignore[no-untyped-def]
    """The stored cluster `c` against the reference `r`: count, exact mean, its length, the centroid."""
    assert c.member_count == len(r.members)
    assert np.allclose(np.asarray(c.mean), r.mean, atol=atol)
    assert abs(c.centroid_norm - float(np.linalg.norm(r.mean.astype(np.float64)))) < atol
    if r.centroid is None:
        assert c.centroid is None
    else:
        assert c.centroid is not None and np.allclose(np.asarray(c.centroid), r.centroid, atol=atol)


def _stored(session, cluster_id):  # type: ignore[no-untyped-def]
    return session.get(KnowledgeCluster, (cluster_id, _tenant(session)), populate_existing=True)


def test_assign_follows_the_reference_rule_over_a_sequence(chub, monkeypatch):  # type: ignore[no-untyped-def]
    """Topics at cosine ~0.9 and strays: joins and new clusters, refreshed and kept centroids alike, new
    clusters left unindexed (found by the exact pass) or, past the cap, indexed at once, and the worker's
    pass every 30 vectors (later probes find those clusters through HNSW); the statement's membership,
    counts, means and centroids match the numpy reference at every step."""
    cap = 5
    monkeypatch.setattr(cluster_service, "UNINDEXED_MAX", cap)
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
    capped = unindexed_joins = indexed_joins = 0
    with chub.db.session() as s:
        tenant = _tenant(s)
        for i, v in enumerate(vectors):
            if i and i % 30 == 0:
                assert chub.clusters.index_pending(s, tenant) == reference_index(ref) > 0
                assert chub.clusters.index_pending(s, tenant) == 0
            m = _memory(s, tenant, v, f"m{i}")
            known = len(ref)
            was_unindexed = {k for k, r in enumerate(ref) if r.centroid is None}
            got = chub.clusters.assign(s, tenant, m.id, v)
            want = reference_assign(ref, v, i, cap)
            assert ids.setdefault(want, got) == got, f"vector {i} joined another cluster"
            assert len(set(ids.values())) == len(ids)
            if want == known:
                capped += int(ref[want].centroid is not None)
            elif want in was_unindexed:
                unindexed_joins += 1
            else:
                indexed_joins += 1
            _check(_stored(s, got), ref[want], 2e-6)
            member = s.get(ClusterMember, (m.id, tenant))
            assert member.cluster_id == got
            assert np.allclose(np.asarray(member.embedding), unit(v), atol=1e-7)
    joins = sum(len(r.members) - 1 for r in ref)
    refreshes = sum(r.refreshes for r in ref)
    assert len(ref) >= 10 and joins >= 60  # both branches, many times
    assert 0 < refreshes < joins  # the centroid was rewritten on some joins, left alone on others
    # every path: joins found by the exact pass and through HNSW, new clusters past the cap
    assert unindexed_joins >= 5 and indexed_joins >= 20 and capped >= 1


def test_a_new_cluster_waits_for_the_worker_and_is_found_before_and_after(chub):  # type: ignore[no-untyped-def]
    """A new cluster is stored unindexed; a close vector joins it through the exact pass (a HOT update: the
    partial index's predicate holds only `centroid`), a leave keeps it unindexed; the worker's pass indexes
    it and then a close vector joins it through the HNSW probe (the exact pass no longer sees it)."""
    dim = chub.embedder.dimension
    rng = np.random.default_rng(9)
    topic = unit(rng.standard_normal(dim))
    near = [unit(topic + rng.standard_normal(dim) * (0.3 / np.sqrt(dim))) for _ in range(4)]
    with chub.db.session() as s:
        tenant = _tenant(s)
        first = _memory(s, tenant, near[0], "a")
        cluster_id = chub.clusters.assign(s, tenant, first.id, near[0])
        assert _stored(s, cluster_id).centroid is None
        s.commit()
        counted = s.execute(HOT_COUNTERS).one()
        second = _memory(s, tenant, near[1], "b")
        assert chub.clusters.assign(s, tenant, second.id, near[1]) == cluster_id
        updated, hot = (a - b for a, b in zip(s.execute(HOT_COUNTERS).one(), counted, strict=True))
        assert (updated, hot) == (1, 1)
        c = _stored(s, cluster_id)
        assert c.centroid is None and c.member_count == 2
        third = _memory(s, tenant, near[2], "c")
        assert chub.clusters.assign(s, tenant, third.id, near[2]) == cluster_id
        assert chub.clusters.leave(s, tenant, third.id) == cluster_id
        assert _stored(s, cluster_id).centroid is None  # a leave does not index it either
        unindexed = s.execute(
            q("nearest_clusters"), {"tenant_id": tenant, "v": near[3].astype(np.float32), "limit": 4}
        ).all()
        assert [r.id for r in unindexed] == [cluster_id]  # the probe's exact pass finds it

        assert chub.clusters.index_pending(s, tenant) == 1
        c = _stored(s, cluster_id)
        assert np.allclose(np.asarray(c.centroid), unit(np.asarray(c.mean)), atol=1e-6)
        assert chub.clusters.index_pending(s, tenant) == 0
        pending = s.execute(
            text("SELECT count(*) FROM knowledge_clusters WHERE tenant_id = :t AND centroid IS NULL"),
            {"t": tenant},
        ).scalar_one()
        assert pending == 0  # so the next join can only come from the HNSW candidates
        fourth = _memory(s, tenant, near[3], "d")
        assert chub.clusters.assign(s, tenant, fourth.id, near[3]) == cluster_id
        assert _stored(s, cluster_id).member_count == 3


def test_past_the_cap_a_new_cluster_is_indexed_at_once(chub, monkeypatch):  # type: ignore[no-untyped-def]
    """With UNINDEXED_MAX unindexed clusters a new one goes into the HNSW index at once (a hub whose worker
    never runs stays bounded); once the worker has indexed them, new clusters wait for it again."""
    monkeypatch.setattr(cluster_service, "UNINDEXED_MAX", 3)
    dim = chub.embedder.dimension
    with chub.db.session() as s:
        tenant = _tenant(s)
        made = []
        for i in range(5):  # orthogonal: each starts a cluster
            v = _basis(dim, i)
            made.append(chub.clusters.assign(s, tenant, _memory(s, tenant, v, f"s{i}").id, v))
        assert [_stored(s, c).centroid is None for c in made] == [True, True, True, False, False]
        assert np.allclose(np.asarray(_stored(s, made[3]).centroid), _basis(dim, 3))
        assert chub.clusters.index_pending(s, tenant, limit=2) == 2  # bounded batches
        assert chub.clusters.index_pending(s, tenant) == 1
        v = _basis(dim, 5)
        fresh = chub.clusters.assign(s, tenant, _memory(s, tenant, v, "s5").id, v)
        assert _stored(s, fresh).centroid is None
        # the worker's cluster step (refresh_clusters, run by the evolution cycle) indexes it
        done = chub.skills.refresh_clusters(s, tenant)
        assert done == {"left": 0, "clustered": 0, "indexed": 1, "merged": 0, "moved": 0}
        assert np.allclose(np.asarray(_stored(s, fresh).centroid), v)


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
    """A member leaves: the exact mean without it, an indexed centroid rewritten only on drift (an
    unindexed cluster stays so), an emptied cluster keeps neither."""
    k = next(i for i, c in enumerate(clusters) if index in c.members)
    c = clusters[k]
    n = len(c.members)
    c.members.remove(index)
    if n == 1:
        c.mean = c.centroid = None  # type: ignore[assignment]
        return k
    mean = (c.mean.astype(np.float64) * n - unit(v).astype(np.float32)) / (n - 1)
    if c.centroid is not None and float(unit(c.centroid) @ unit(mean)) < CENTROID_DRIFT_COSINE:
        c.centroid = unit(mean).astype(np.float32)
        c.refreshes += 1
    c.mean = mean.astype(np.float32)
    return k


def test_leave_follows_the_reference_rule(chub):  # type: ignore[no-untyped-def]
    """Members of three topics leave in random order until every cluster is empty: counts, means and
    centroid refreshes as in the numpy reference at every step (float32 arithmetic in the statement, the
    reference in float64: a leave subtracts, so the tolerance is wider than for joins); a second leave
    changes nothing. Three clusters the worker has indexed, a fourth it has not (its leaves keep it
    unindexed)."""
    dim = chub.embedder.dimension
    rng = np.random.default_rng(8)
    topics = [unit(rng.standard_normal(dim)) for _ in range(4)]
    vectors = [unit(topics[i % 3] + rng.standard_normal(dim) * (0.35 / np.sqrt(dim))) for i in range(36)]
    vectors += [unit(topics[3] + rng.standard_normal(dim) * (0.35 / np.sqrt(dim))) for _ in range(6)]
    ref: list[RefCluster] = []
    ids: dict[int, Any] = {}
    with chub.db.session() as s:
        tenant = _tenant(s)
        memories = []
        for i, v in enumerate(vectors):
            if i == 24:
                assert chub.clusters.index_pending(s, tenant) == reference_index(ref) == 3
            memories.append(_memory(s, tenant, v, f"m{i}").id)
            ids[reference_assign(ref, v, i)] = chub.clusters.assign(s, tenant, memories[-1], v)
        assert [r.centroid is None for r in ref] == [False, False, False, True]
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
            _check(c, r, 1e-5)
        assert sum(r.refreshes for r in ref) > refreshes  # some leaves moved the mean past the bound
        assert chub.clusters.leave(s, tenant, memories[0]) is None  # not a member any more
