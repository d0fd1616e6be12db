"""Move every memory, skill and cluster to the configured embedding model, in one transaction.

Readers are blocked while it runs (the column type changes); a failure leaves the old model in place.
Memories and skills are embedded again in keyset batches. Clusters keep their members, and so their
skill: each member takes its memory's new vector and each centroid becomes the mean of those (nothing
is cleared, so nothing has to be re-clustered or crystallized again under a new slug).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from sqlalchemy import text
from sqlalchemy.engine import Connection

from ultron.config import Settings
from ultron.db.engine import open_database
from ultron.db.queries import q
from ultron.db.vectors import (
    Profile,
    create_vector_index,
    drop_vector_index,
    read_profile,
    set_dimension,
    write_profile,
)
from ultron.memory.text import embedding_text
from ultron.providers.base import Embedder
from ultron.skills.format import embedding_text as skill_embedding_text

Progress = Callable[[int, int, str], None]
ZERO_UUID = "00000000-0000-0000-0000-000000000000"


@dataclass(frozen=True)
class Reembedded:
    memories: int
    skills: int
    clusters: int


def reembed(settings: Settings, *, batch_size: int = 128, progress: Progress | None = None) -> Reembedded:
    from ultron.hub import build_embedder

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
            done = _memories(conn, embedder, batch_size, total, progress)
            skills = _skills(conn, embedder, batch_size, progress)
            clusters = _clusters(conn, batch_size)
            write_profile(conn, Profile(settings.embedding_provider, embedder.model_name, embedder.dimension))
            create_vector_index(conn)
            for table in ("memories", "skills", "cluster_members", "knowledge_clusters"):
                conn.execute(text(f"ANALYZE {table}"))
        return Reembedded(done, skills, clusters)
    finally:
        db.dispose()


def _memories(
    conn: Connection, embedder: Embedder, batch_size: int, total: int, progress: Progress | None
) -> int:
    return _reembed_rows(
        conn,
        embedder,
        "memories",
        ("content", "context", "resolution"),
        embedding_text,
        batch_size,
        total,
        progress,
        "re-embedding",
    )


def _skills(conn: Connection, embedder: Embedder, batch_size: int, progress: Progress | None) -> int:
    """Every version of every skill (old and superseded ones too: the column holds one model)."""
    total = conn.execute(text("SELECT count(*) FROM skills")).scalar_one()
    return _reembed_rows(
        conn,
        embedder,
        "skills",
        ("name", "description", "body"),
        skill_embedding_text,
        batch_size,
        total,
        progress,
        "re-embedding skills",
    )


def _reembed_rows(
    conn: Connection,
    embedder: Embedder,
    table: str,
    columns: tuple[str, ...],
    text_of: Callable[..., str],
    batch_size: int,
    total: int,
    progress: Progress | None,
    label: str,
) -> int:
    """Every row of `table` (our own table and column names, never input) in keyset pages of batch_size:
    the text `text_of(*columns)` embedded with the new model into `embedding`."""
    done, last_id = 0, ZERO_UUID
    select_page = text(
        f"SELECT id, {', '.join(columns)} FROM {table} WHERE id > CAST(:last AS uuid) ORDER BY id LIMIT :n"
    )
    update = text(f"UPDATE {table} SET embedding = CAST(:v AS vector) WHERE id = :id")
    while True:
        rows = conn.execute(select_page, {"last": last_id, "n": batch_size}).all()
        if not rows:
            return done
        vectors = embedder.embed([text_of(*(getattr(r, c) for c in columns)) for r in rows])
        conn.execute(
            update,
            [{"id": r.id, "v": np.asarray(v, dtype=np.float32)} for r, v in zip(rows, vectors, strict=True)],
        )
        done += len(rows)
        last_id = str(rows[-1].id)
        if progress:
            progress(done, total, label)


def _clusters(conn: Connection, batch_size: int) -> int:
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
