"""`ultron db reembed`'s pass over skills (ultron/cli/reembed.py runs every domain's pass in one
transaction)."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ultron.memory.reembed import Progress, reembed_rows
from ultron.providers.base import Embedder
from ultron.skills.format import embedding_text


def reembed_skills(conn: Connection, embedder: Embedder, batch_size: int, progress: Progress | None) -> int:
    """Every version of every skill (old and superseded ones too: the column holds one model)."""
    total = conn.execute(text("SELECT count(*) FROM skills")).scalar_one()
    return reembed_rows(
        conn,
        embedder,
        "skills",
        ("name", "description", "body"),
        embedding_text,
        batch_size,
        total,
        progress,
        "re-embedding skills",
    )
