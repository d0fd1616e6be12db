"""Move every memory, skill and cluster to the configured embedding model, in one transaction.

Readers are blocked while it runs (the column type changes); a failure leaves the old model in place.
Memories and skills are embedded again in keyset batches. Clusters keep their members, and so their
skill: each member takes its memory's new vector and each centroid becomes the mean of those (nothing
is cleared, so nothing has to be re-clustered or crystallized again under a new slug).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text

from ultron.clusters.reembed import reembed_clusters
from ultron.config import Settings
from ultron.db.engine import open_database
from ultron.db.vectors import (
    Profile,
    create_vector_index,
    drop_vector_index,
    read_profile,
    set_dimension,
    write_profile,
)
from ultron.hub import build_embedder
from ultron.memory.reembed import Progress, reembed_memories
from ultron.skills.reembed import reembed_skills


@dataclass(frozen=True)
class Reembedded:
    memories: int
    skills: int
    clusters: int


def reembed(settings: Settings, *, batch_size: int = 128, progress: Progress | None = None) -> Reembedded:
    embedder = build_embedder(settings)
    db = open_database(settings)
    try:
        with db.engine.begin() as conn:
            current = read_profile(conn)
            if current and (current.model_name, current.dimension) == (
                embedder.model_name,
                embedder.dimension,
            ):
                return Reembedded(0, 0, 0)
            total = conn.execute(text("SELECT count(*) FROM memories")).scalar_one()
            drop_vector_index(conn)
            set_dimension(conn, embedder.dimension, clear=True)
            done = reembed_memories(conn, embedder, batch_size, total, progress)
            skills = reembed_skills(conn, embedder, batch_size, progress)
            clusters = reembed_clusters(conn, batch_size)
            write_profile(conn, Profile(settings.embedding_provider, embedder.model_name, embedder.dimension))
            create_vector_index(conn)
            for table in ("memories", "skills", "cluster_members", "knowledge_clusters"):
                conn.execute(text(f"ANALYZE {table}"))
        return Reembedded(done, skills, clusters)
    finally:
        db.dispose()
