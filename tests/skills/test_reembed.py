"""`ultron reembed` moves skills and clusters too: skills are found by search under the new model, and
every cluster keeps its members and its skill, with the centroid recomputed as their mean."""

from __future__ import annotations

import numpy as np
from sqlalchemy import select, text

from tests.skills.conftest import DOCKER, POSTGRES, PYTEST
from ultron.cli.reembed import reembed
from ultron.db.models import KnowledgeCluster
from ultron.hub import Hub
from ultron.sdk import Ultron
from ultron.tenancy import local_actor
from ultron.worker.evolution import run_evolution_cycle

DISTINCT = {"dedup_similarity_threshold": 0.99, "dedup_soft_threshold": 0.99}


def test_reembed_re_embeds_skills_and_keeps_clusters_with_their_skills(settings):  # type: ignore[no-untyped-def]
    old = settings.model_copy(update=DISTINCT)
    hub = Hub.open(old)
    try:
        alice = Ultron(hub=hub, agent="alice")
        for content in DOCKER + POSTGRES + PYTEST:
            alice.upload_memory(content)
        assert run_evolution_cycle(hub.db, hub.skills)["published"] == 3
        with hub.db.session() as s:
            before = {c.id: (c.skill_slug, c.member_count) for c in s.scalars(select(KnowledgeCluster))}
    finally:
        hub.close()

    new = old.model_copy(update={"embedding_dimension": 128})
    moved = reembed(new, batch_size=2)
    assert (moved.memories, moved.skills, moved.clusters) == (30, 3, len(before))
    hub = Hub.open(new)
    try:
        with hub.db.session() as s:
            dims = s.execute(text("SELECT DISTINCT vector_dims(embedding) FROM skills")).scalars().all()
            assert dims == [128]
            tenant = local_actor(s).tenant_id
            found = hub.skills.search(s, tenant, "my docker build reinstalls pip packages every time")
            assert found and "docker" in found[0]["slug"]
            clusters = list(s.scalars(select(KnowledgeCluster)))
            assert {c.id: (c.skill_slug, c.member_count) for c in clusters} == before
            for cluster in clusters:
                vectors = s.execute(
                    text(
                        "SELECT m.embedding, cm.embedding = m.embedding AS same FROM cluster_members cm "
                        "JOIN memories m ON m.id = cm.memory_id WHERE cm.cluster_id = :id"
                    ),
                    {"id": cluster.id},
                ).all()
                assert all(v.same for v in vectors)
                mean = np.mean([v.embedding.to_numpy() for v in vectors], axis=0)
                assert np.allclose(np.asarray(cluster.mean), mean, atol=1e-5)  # the exact mean
                assert np.allclose(np.asarray(cluster.centroid), mean / np.linalg.norm(mean), atol=1e-5)
                assert abs(cluster.centroid_norm - np.linalg.norm(mean)) < 1e-5
        # Nothing drains, nothing is clustered or crystallized again under a new slug.
        counts = run_evolution_cycle(hub.db, hub.skills)
        assert (counts["left"], counts["clustered"], counts["published"]) == (0, 0, 0)
    finally:
        hub.close()
