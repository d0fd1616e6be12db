"""Re-embedding rows with a new model (`ultron db reembed`, ultron/cli/reembed.py, runs it for every domain in
one transaction): the keyset walk over a table, and the memories' own pass."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from sqlalchemy import text
from sqlalchemy.engine import Connection

from ultron.memory.text import embedded_fields, embedding_text
from ultron.providers.base import Embedder

Progress = Callable[[int, int, str], None]
ZERO_UUID = "00000000-0000-0000-0000-000000000000"


def _memory_text(content: str, context: str, resolution: str, thread: str | None) -> str:
    """What upload embeds: a thread's turn without its speaker label (text.embedding_text)."""
    fields = {"content": content, "context": context, "resolution": resolution}
    return embedding_text(**embedded_fields(fields, thread is not None))


def reembed_memories(
    conn: Connection, embedder: Embedder, batch_size: int, total: int, progress: Progress | None
) -> int:
    return reembed_rows(
        conn,
        embedder,
        "memories",
        ("content", "context", "resolution", "thread"),
        _memory_text,
        batch_size,
        total,
        progress,
        "re-embedding",
    )


def reembed_rows(
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
