"""Knowledge clusters on real Postgres: assignment, exact running means, readiness, the upload hook."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sqlalchemy import func, select, text

from ultron.clusters.service import CENTROID_DRIFT_COSINE, join_score, topic_keywords, unit
from ultron.db.models import ClusterMember, ClusterQueueItem, KnowledgeCluster, Memory, Skill
from ultron.sdk import Ultron
from ultron.tenancy import local_actor


@pytest.fixture()
def chub(make_hub):  # type: ignore[no-untyped-def]
    return make_hub(cluster_similarity_threshold=0.8)


def _basis(dim: int, i: int) -> np.ndarray:
    e = np.zeros(dim)
    e[i] = 1.0
    return e


def _at_cos(dim: int, cos: float) -> np.ndarray:
    """A unit vector at exactly `cos` from e0."""
    return cos * _basis(dim, 0) + np.sqrt(1 - cos * cos) * _basis(dim, 1)


def _memory(session, tenant_id, vector, label: str = "m") -> Memory:  # type: ignore[no-untyped-def]
    m = Memory(
        tenant_id=tenant_id,
        memory_type="pattern",
        content=label,
        content_hash=hashlib.sha256(f"{label}{np.random.rand()}".encode()).hexdigest(),
        embedding=np.asarray(vector, dtype=np.float32),
        search_tsv=func.to_tsvector("simple", label),
    )
    session.add(m)
    session.flush()
    return m


def _tenant(session):  # type: ignore[no-untyped-def]
    return local_actor(session).tenant_id


def _join(hub, session, tenant_id, vector, label="m"):  # type: ignore[no-untyped-def]
    m = _memory(session, tenant_id, vector, label)
    return m, hub.clusters.assign(session, tenant_id, m.id, vector)


def test_assignment_at_and_just_below_the_threshold(chub):  # type: ignore[no-untyped-def]
    dim = chub.embedder.dimension
    with chub.db.session() as s:
        tenant = _tenant(s)
        _, first = _join(chub, s, tenant, _basis(dim, 0))
        _, at = _join(chub, s, tenant, _at_cos(dim, 0.8))
        assert at == first
    with chub.db.session() as s:
        # a fresh cluster seeded at e0 again, in another tenant-free setup: compare below the threshold
        s.execute(text("DELETE FROM knowledge_clusters"))
        _, first = _join(chub, s, tenant, _basis(dim, 0))
        _, below = _join(chub, s, tenant, _at_cos(dim, 0.799))
        assert below != first
        assert s.scalar(select(func.count()).select_from(KnowledgeCluster)) == 2


def _assert_exact(cluster, vectors) -> None:  # type: ignore[no-untyped-def]
    """`mean` is the members' exact mean; the indexed centroid, once the worker has indexed the cluster, is
    within the drift bound of it."""
    mean = np.mean([unit(np.asarray(v, dtype=np.float64)) for v in vectors], axis=0)
    assert np.allclose(np.asarray(cluster.mean), mean, atol=1e-5)
    assert abs(cluster.centroid_norm - np.linalg.norm(mean)) < 1e-5
    if cluster.centroid is not None:
        assert float(unit(cluster.centroid) @ unit(mean)) >= CENTROID_DRIFT_COSINE - 1e-6


def test_centroid_is_the_normalized_mean_after_joins_leaves_and_merges(chub):  # type: ignore[no-untyped-def]
    dim = chub.embedder.dimension
    rng = np.random.default_rng(7)
    vectors = [unit(_basis(dim, 0) * 4 + rng.normal(0, 1.5 / np.sqrt(dim), dim)) for _ in range(8)]
    with chub.db.session() as s:
        tenant = _tenant(s)
        actor = local_actor(s)
        members = [_join(chub, s, tenant, v, f"m{i}")[0] for i, v in enumerate(vectors)]
        cluster_id = s.get(ClusterMember, (members[0].id, tenant)).cluster_id
        assert {s.get(ClusterMember, (m.id, tenant)).cluster_id for m in members} == {cluster_id}
        cluster = s.get(KnowledgeCluster, (cluster_id, tenant), populate_existing=True)
        assert cluster.centroid is None  # new: the worker indexes it
        _assert_exact(cluster, vectors)
        assert chub.clusters.index_pending(s, tenant) == 1
        _assert_exact(s.get(KnowledgeCluster, (cluster_id, tenant)), vectors)
        chub.clusters.leave(s, tenant, members[1].id)  # a plain leave
        assert chub.memory.absorb(s, actor, members[2].id, members[3].id, 0.95)  # merge: the loser leaves
        s.execute(text("UPDATE memories SET status = 'archived' WHERE id = :id"), {"id": members[4].id})
        moved = unit(
            _basis(dim, 0) * 4 + rng.normal(0, 1.5 / np.sqrt(dim), dim)
        )  # a merge re-embedded this one
        s.execute(
            text("UPDATE memories SET embedding = CAST(:v AS vector) WHERE id = :id"),
            {"v": moved.astype(np.float32), "id": members[5].id},
        )
        counts = chub.clusters.sync(s, tenant)
        assert counts == {"left": 2, "reassigned": 1}
        cluster = s.get(KnowledgeCluster, (cluster_id, tenant), populate_existing=True)
        remaining = [m for m in members if s.get(ClusterMember, (m.id, tenant)) is not None]
        assert {m.id for m in remaining} == {members[i].id for i in (0, 2, 5, 6, 7)}
        assert cluster.member_count == 5
        _assert_exact(cluster, [m.embedding for m in remaining])
        # the last member leaving empties the cluster; it drops out of the nearest search
        for m in remaining:
            chub.clusters.leave(s, tenant, m.id)
        cluster = s.get(KnowledgeCluster, (cluster_id, tenant), populate_existing=True)
        assert cluster.member_count == 0 and cluster.centroid is None and cluster.mean is None


def _stored(session, cluster_id):  # type: ignore[no-untyped-def]
    return session.execute(
        text("SELECT centroid::text AS centroid, mean::text AS mean FROM knowledge_clusters WHERE id = :id"),
        {"id": cluster_id},
    ).one()


def _xact_updates(session) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """Updates of knowledge_clusters counted by this backend, and how many of them were HOT (the counters
    also hold earlier transactions not yet flushed to the statistics: compare differences)."""
    row = session.execute(
        text(
            "SELECT pg_stat_get_xact_tuples_updated('knowledge_clusters'::regclass) AS n, "
            "pg_stat_get_xact_tuples_hot_updated('knowledge_clusters'::regclass) AS hot"
        )
    ).one()
    return row.n, row.hot


def test_a_join_refreshes_the_indexed_centroid_only_when_it_drifts(chub):  # type: ignore[no-untyped-def]
    dim = chub.embedder.dimension
    close = _at_cos(dim, 0.9999)  # 0.8 degrees from e0: the mean moves, its direction hardly
    with chub.db.session() as s:
        tenant = _tenant(s)
        _, cluster_id = _join(chub, s, tenant, _basis(dim, 0))
        _join(chub, s, tenant, _basis(dim, 0))  # e0 again
        assert chub.clusters.index_pending(s, tenant) == 1  # the worker puts it into the HNSW index
    with chub.db.session() as s:
        before, counted = _stored(s, cluster_id), _xact_updates(s)
        _, joined = _join(chub, s, tenant, close)
        assert joined == cluster_id
        s.expire_all()
        after = _stored(s, cluster_id)
        assert after.centroid == before.centroid  # not rewritten: no new HNSW element
        assert after.mean != before.mean
        n, hot = _xact_updates(s)
        assert (n - counted[0], hot - counted[1]) == (1, 1)  # a HOT update: no index touched at all
        _assert_exact(s.get(KnowledgeCluster, (cluster_id, tenant)), [_basis(dim, 0), _basis(dim, 0), close])
    with chub.db.session() as s:
        far = _at_cos(dim, 0.8)  # at the threshold: joins, and pulls the mean by about 9 degrees
        counted = _xact_updates(s)
        _, joined = _join(chub, s, tenant, far)
        assert joined == cluster_id
        s.expire_all()
        cluster = s.get(KnowledgeCluster, (cluster_id, tenant))
        assert _stored(s, cluster_id).centroid != after.centroid
        assert np.allclose(np.asarray(cluster.centroid), unit(cluster.mean), atol=1e-6)  # refreshed
        n, hot = _xact_updates(s)
        assert (n - counted[0], hot - counted[1]) == (1, 0)  # the indexed column changed: not HOT
        _assert_exact(cluster, [_basis(dim, 0), _basis(dim, 0), close, far])


def test_the_join_is_decided_on_the_exact_mean_not_the_stale_centroid(chub):  # type: ignore[no-untyped-def]
    """A centroid left stale (within the drift bound) must not move the threshold: the exact cosine to
    the mean decides."""
    dim = chub.embedder.dimension
    with chub.db.session() as s:
        tenant = _tenant(s)
        _, cluster_id = _join(chub, s, tenant, _basis(dim, 0))
        assert chub.clusters.index_pending(s, tenant) == 1  # indexed at e0
        # the mean drifts slightly towards e1 without a refresh (cosine to the centroid stays >= 0.999)
        _join(chub, s, tenant, _at_cos(dim, 0.9985))
        cluster = s.get(KnowledgeCluster, (cluster_id, tenant), populate_existing=True)
        assert np.allclose(np.asarray(cluster.centroid), _basis(dim, 0))  # still e0
        mean = np.asarray(cluster.mean, dtype=np.float64)
        m = unit(mean)
        # a vector whose join score (average cosine to the members, `v . mean`) on the EXACT mean is at
        # the threshold, on the far side from the drift: scored against the stale centroid with the same
        # length it would fall below the threshold
        theta = np.arccos(0.8 / np.linalg.norm(mean))
        phi = np.arctan2(m[1], m[0])
        at_mean = np.cos(phi + theta) * _basis(dim, 0) + np.sin(phi + theta) * _basis(dim, 1)
        assert abs(join_score(at_mean, mean) - 0.8) < 1e-9
        assert float(at_mean @ _basis(dim, 0)) * np.linalg.norm(mean) < 0.8 - 1e-4
        _, joined = _join(chub, s, tenant, at_mean)
        assert joined == cluster_id


def test_readiness_at_exactly_five_and_after_exactly_three_new_members(chub):  # type: ignore[no-untyped-def]
    dim = chub.embedder.dimension
    rng = np.random.default_rng(3)

    def near() -> np.ndarray:
        return unit(_basis(dim, 0) * 4 + rng.normal(0, 1.0 / np.sqrt(dim), dim))

    with chub.db.session() as s:
        tenant = _tenant(s)
        for i in range(4):
            _, cluster_id = _join(chub, s, tenant, near(), f"a{i}")
        assert chub.clusters.get_clusters_ready_to_crystallize(s, tenant) == []
        _join(chub, s, tenant, near(), "a4")
        assert chub.clusters.get_clusters_ready_to_crystallize(s, tenant) == [cluster_id]
        assert len(chub.clusters.get_cluster_memories(s, tenant, cluster_id, limit=3)) == 3
        # a skill version written now: the cluster is no longer waiting for its first skill
        s.add(
            Skill(
                tenant_id=tenant,
                slug="s",
                version_major=1,
                version_minor=0,
                version_patch=0,
                name="s",
                body="b",
                source_cluster_id=cluster_id,
                created_at=datetime.now(UTC) - timedelta(seconds=0),
            )
        )
        s.get(KnowledgeCluster, (cluster_id, tenant)).skill_slug = "s"
        s.flush()
        # members joined in the same transaction share now(): move them before the version
        s.execute(text("UPDATE cluster_members SET joined_at = joined_at - interval '1 minute'"))
        assert chub.clusters.get_clusters_ready_to_crystallize(s, tenant) == []
        for i in range(2):
            _join(chub, s, tenant, near(), f"b{i}")
        s.execute(text("UPDATE skills SET created_at = now() - interval '30 seconds'"))
        assert chub.clusters.get_clusters_ready_to_recrystallize(s, tenant) == []
        _join(chub, s, tenant, near(), "b2")
        assert chub.clusters.get_clusters_ready_to_recrystallize(s, tenant) == [cluster_id]


def test_an_upload_queues_its_cluster_and_initial_clustering_covers_the_rest(hub):  # type: ignore[no-untyped-def]
    alice = Ultron(hub=hub, agent="alice")
    first = alice.upload_memory("pytest fixtures with scope=session leak state between database tests")
    with hub.db.session() as s:
        tenant = local_actor(s).tenant_id
        assert s.get(ClusterMember, (first.id, tenant)) is None  # the worker's, not the request's
        assert s.get(ClusterQueueItem, (first.id, tenant)) is not None
        # With no worker step run, the evolution cycle's initial clustering assigns what is queued.
        assert hub.clusters.run_initial_clustering(s, tenant) == 1
        assert s.get(ClusterMember, (first.id, tenant)) is not None
        assert s.get(ClusterQueueItem, (first.id, tenant)) is None
        s.execute(text("DELETE FROM cluster_members"))
        s.execute(text("DELETE FROM knowledge_clusters"))
    with hub.db.session() as s:
        assert hub.clusters.run_initial_clustering(s, local_actor(s).tenant_id) >= 1
        assert s.get(ClusterMember, (first.id, local_actor(s).tenant_id)) is not None


def test_offline_topic_is_the_most_shared_keywords():
    texts = [
        "docker build cache misses when COPY comes first",
        "docker layer cache: copy requirements before pip install",
        "slow docker build: cache the pip install layer",
    ]
    assert topic_keywords(texts).split()[:2] == ["cache", "docker"]


def test_private_and_group_memories_never_feed_a_cluster(hub):  # type: ignore[no-untyped-def]
    """Skills are read by the whole tenant, so only shared memories may reach a cluster's sample."""
    alice = Ultron(hub=hub, agent="alice")
    text_ = "pytest fixtures with scope=session leak state between database tests"
    private = alice.upload_memory(text_ + " (mine)", scope="private")
    shared = alice.upload_memory(text_)
    with hub.db.session() as s:
        tenant = local_actor(s).tenant_id
        assert s.get(ClusterQueueItem, (private.id, tenant)) is None  # never queued for a cluster
        assert hub.clusters.run_initial_clustering(s, tenant) == 1  # the shared one; not the private one
        assert s.get(ClusterMember, (private.id, tenant)) is None
        assert s.get(ClusterMember, (shared.id, tenant)) is not None
        # A shared memory that becomes private leaves its cluster at the next sync.
        s.execute(
            text("UPDATE memories SET scope = 'private', agent_id = :a WHERE id = :id"),
            {"a": local_actor(s).agent_id, "id": shared.id},
        )
        assert hub.clusters.sync(s, tenant)["left"] == 1
        assert s.get(ClusterMember, (shared.id, tenant)) is None
        cluster_ids = s.scalars(select(KnowledgeCluster.id).where(KnowledgeCluster.tenant_id == tenant)).all()
        for cid in cluster_ids:
            assert hub.clusters.get_cluster_memories(s, tenant, cid, 20) == []


def test_the_probe_walks_the_index_past_other_tenants_closer_clusters(chub):  # type: ignore[no-untyped-def]
    """The assignment's probe keeps its tenant filter inside the HNSW walk (iterative scan): another
    tenant's 300 clusters, all closer to the vector than this tenant's one, do not hide it, even when the
    probe is made to walk the index (a plain walk stops at ef_search = 100 candidates, all foreign)."""
    from ultron.db.models import Tenant

    dim = chub.embedder.dimension
    rng = np.random.default_rng(3)
    with chub.db.session() as s:
        tenant = _tenant(s)
        _, ours = _join(chub, s, tenant, _basis(dim, 0))
        other = Tenant(name="other-tenant")
        s.add(other)
        s.flush()
        for _ in range(300):  # cosine ~0.999 to the probe below, which is at 0.9 from this tenant's e0
            u = unit(_at_cos(dim, 0.9) + 0.03 * unit(rng.standard_normal(dim))).astype(np.float32)
            s.add(KnowledgeCluster(tenant_id=other.id, centroid=u, mean=u, centroid_norm=1.0, member_count=1))
        s.flush()
        s.execute(text("ANALYZE knowledge_clusters"))
        # No plan but the HNSW walk (a sequential scan or the tenant b-tree would need a sort).
        s.execute(text("SET LOCAL enable_sort = off"))
        plan = "\n".join(
            s.execute(
                text(
                    "EXPLAIN " + "SELECT c.id FROM knowledge_clusters c WHERE c.tenant_id = :t "
                    "ORDER BY c.centroid <=> CAST(:v AS vector) LIMIT 4"
                ),
                {"t": tenant, "v": _at_cos(dim, 0.9).astype(np.float32)},
            ).scalars()
        )
        assert "ix_knowledge_clusters_centroid_hnsw" in plan
        _, joined = _join(chub, s, tenant, _at_cos(dim, 0.9))
        assert joined == ours
