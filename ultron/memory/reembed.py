"""Move every memory to the configured embedding model, in one transaction.

Readers are blocked while it runs (the column type changes); a failure leaves the old model in place.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from sqlalchemy import text

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
from ultron.memory.text import embedding_text

Progress = Callable[[int, int, str], None]


def reembed(settings: Settings, *, batch_size: int = 128, progress: Progress | None = None) -> int:
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
                return 0
            total = conn.execute(text("SELECT count(*) FROM memories")).scalar_one()
            drop_vector_index(conn)
            set_dimension(conn, embedder.dimension, clear=True)
            done, last_id = 0, None
            while True:
                rows = conn.execute(
                    text(
                        "SELECT id, content, context, resolution FROM memories "
                        "WHERE CAST(:last AS uuid) IS NULL OR id > CAST(:last AS uuid) ORDER BY id LIMIT :n"
                    ),
                    {"last": last_id, "n": batch_size},
                ).all()
                if not rows:
                    break
                vectors = embedder.embed([embedding_text(r.content, r.context, r.resolution) for r in rows])
                conn.execute(
                    text("UPDATE memories SET embedding = CAST(:v AS vector) WHERE id = :id"),
                    [
                        {"id": r.id, "v": np.asarray(v, dtype=np.float32)}
                        for r, v in zip(rows, vectors, strict=True)
                    ],
                )
                done += len(rows)
                last_id = rows[-1].id
                if progress:
                    progress(done, total, "re-embedding")
            write_profile(conn, Profile(settings.embedding_provider, embedder.model_name, embedder.dimension))
            create_vector_index(conn)
            conn.execute(text("ANALYZE memories"))
        return done
    finally:
        db.dispose()
