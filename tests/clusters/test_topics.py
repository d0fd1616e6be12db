"""One topic per cluster, on the labelled topic set shipped with the calibration command
(ultron/bench/data/cluster_topics.jsonl), with the default local model (multilingual-e5-small)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from sqlalchemy import select

from ultron.bench import cluster_calibration as calibration
from ultron.config import Settings
from ultron.db.models import ClusterMember, Skill
from ultron.hub import build_embedder, build_worker
from ultron.sdk import Ultron
from ultron.skills import evolve
from ultron.tenancy import local_actor
from ultron.worker.evolution import run_evolution_cycle

TOPICS = calibration.load_topics()
LABELS = [r["topic"] for r in TOPICS]


@pytest.fixture(scope="module")
def local_vectors() -> np.ndarray:
    return calibration.embed_topics(build_embedder(Settings(embedding_provider="local")), TOPICS)


def test_the_topic_set_is_large_varied_and_shares_words_across_topics():
    counts = Counter(LABELS)
    assert len(TOPICS) >= 60 and len(counts) >= 8 and min(counts.values()) >= 5
    assert len({r["content"] for r in TOPICS}) == len(TOPICS)
    assert len({r["resolution"] for r in TOPICS}) == len(TOPICS)  # every memory has its own fix
    # the hard cases: words shared by several topics
    for word in ("docker", "connection", "cache"):
        having = {r["topic"] for r in TOPICS if word in " ".join(r.values()).lower()}
        assert len(having) >= 3, (word, having)


def test_purity_at_the_default_local_threshold_in_every_upload_order(local_vectors):
    threshold = Settings(embedding_provider="local").cluster_threshold
    (row,) = calibration.sweep(local_vectors, LABELS, [threshold])
    assert row.purity_min >= 0.9 and row.mixed_core == 0, row
    # skills do form: several clusters reach the crystallization size
    assert row.ready >= 2, row


def test_held_out_topics_alone_and_mixed_in_stay_pure_at_the_default(local_vectors):
    """Six topics written after the threshold was chosen: alone, and uploaded among the 88."""
    heldout = calibration.load_topics(calibration.HELDOUT_PATH)
    vectors = calibration.embed_topics(build_embedder(Settings(embedding_provider="local")), heldout)
    threshold = Settings(embedding_provider="local").cluster_threshold
    labels = [r["topic"] for r in heldout]
    assert not set(labels) & set(LABELS)
    (alone,) = calibration.sweep(vectors, labels, [threshold])
    (mixed,) = calibration.sweep(np.vstack([local_vectors, vectors]), LABELS + labels, [threshold])
    for row in (alone, mixed):
        assert row.purity_min >= 0.9 and row.mixed_core == 0, row


def test_the_old_rule_made_a_catch_all_cluster(local_vectors):
    """The cosine to the mean's direction at the old 0.88 put most topics in one cluster (the defect):
    the mean of many memories points at what they share and is close to all of them."""
    means: list[np.ndarray] = []
    counts: list[int] = []
    assigned = []
    for v in local_vectors:
        sims = [float(v @ (m / np.linalg.norm(m))) for m in means]
        best = int(np.argmax(sims)) if sims else -1
        if best >= 0 and sims[best] >= 0.88:
            means[best] = (means[best] * counts[best] + v) / (counts[best] + 1)
            counts[best] += 1
        else:
            best = len(means)
            means.append(v.copy())
            counts.append(1)
        assigned.append(best)
    old_purity = calibration.score(assigned, LABELS, local_vectors, 0.88)[0]
    new = calibration.cluster_online(local_vectors, 0.88, range(len(LABELS)))
    assert old_purity < 0.5 < calibration.score(new, LABELS, local_vectors, 0.88)[0]


def test_uploads_cluster_by_topic_and_skills_cite_only_their_topic(make_hub, local_vectors, monkeypatch):
    """Through the real upload path and the evolution cycle, default local model and its threshold
    (near-duplicate merging kept out of the way: every memory here is distinct). The model's vectors of
    the set's texts were computed in batches by the fixture; the upload path's one-text calls are served
    those same vectors (one text at a time costs ~2 s each on a loaded 2-core box), any other text goes
    to the model."""
    from ultron.memory.text import embedding_text
    from ultron.providers.local import LocalEmbedder

    known = {
        embedding_text(r["content"], r["context"], r["resolution"]): v.tolist()
        for r, v in zip(TOPICS, local_vectors, strict=True)
    }
    model_embed = LocalEmbedder.embed

    def embed(self, texts, *, kind="document"):  # type: ignore[no-untyped-def]
        texts = list(texts)
        if kind == "document" and texts and all(t in known for t in texts):
            return [known[t] for t in texts]
        return model_embed(self, texts, kind=kind)

    monkeypatch.setattr(LocalEmbedder, "embed", embed)
    hub = make_hub(
        embedding_provider="local",
        cluster_similarity_threshold=None,
        dedup_similarity_threshold=0.999,
        dedup_soft_threshold=0.999,
    )
    agent = Ultron(hub=hub, agent="alice")
    topic_of = {}
    for i in np.random.default_rng(1).permutation(len(TOPICS)):
        r = TOPICS[i]
        rec = agent.upload_memory(r["content"], r["context"], r["resolution"])
        topic_of[str(rec.id)] = r["topic"]
    assert len(topic_of) == len(TOPICS)
    build_worker(hub).run_cycle(("cluster",), quiet=True)  # the worker assigns the uploads' clusters
    with hub.db.session() as s:
        rows = s.execute(select(ClusterMember.memory_id, ClusterMember.cluster_id)).all()
        assigned = [str(r.cluster_id) for r in rows]
        labels = [topic_of[str(r.memory_id)] for r in rows]
    by_cluster: dict[str, Counter[str]] = {}
    for c, label in zip(assigned, labels, strict=True):
        by_cluster.setdefault(c, Counter())[label] += 1
    purity = sum(t.most_common(1)[0][1] for t in by_cluster.values()) / len(labels)
    counts = run_evolution_cycle(hub.db, hub.skills)
    print(f"upload path, local model: purity {purity:.3f}, {len(by_cluster)} clusters; cycle {counts}")
    assert purity >= 0.9, purity
    assert counts["published"] >= 2, counts
    prefix = {k.replace("-", "")[:8]: v for k, v in topic_of.items()}
    with hub.db.session() as s:
        tenant = local_actor(s).tenant_id
        skills = list(s.scalars(select(Skill).where(Skill.tenant_id == tenant)))
        for skill in skills:
            cited = set(evolve.CITE.findall(skill.body))
            members = {
                str(m).replace("-", "")[:8]
                for m in s.scalars(
                    select(ClusterMember.memory_id).where(ClusterMember.cluster_id == skill.source_cluster_id)
                )
            }
            assert cited and cited <= members, skill.name
            assert len({prefix[c] for c in cited}) == 1, (skill.name, sorted(prefix[c] for c in cited))


def test_the_calibration_command_prints_the_table_and_marks_the_default(capsys):
    from ultron.cli import main

    assert (
        main(
            [
                "eval",
                "clusters",
                "--embedding-provider",
                "hash",
                "--thresholds",
                "0.1,0.3",
                "--orders",
                "3",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "calibration set: 88 memories, 11 topics, 3 upload orders; provider hash" in out
    rows = {line.split(" | ")[0].strip("| *"): line for line in out.splitlines() if line.startswith("| 0.")}
    assert set(rows) == {"0.1", "0.3"} and "*" in rows["0.3"] and "*" not in rows["0.1"]
