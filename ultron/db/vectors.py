"""The embedding profile: one model and dimension per database, and the HNSW index built for it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import TextClause, text
from sqlalchemy.engine import Connection, Engine

from ultron.errors import EmbeddingModelMismatch

# HNSW build parameters (pgvector defaults are m=16, ef_construction=64).
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
# The memories in the HNSW graph (migration 0020): the active ones the worker has indexed.
MEMORY_HNSW_PREDICATE = "status = 'active' AND indexed"

# The Skill Hub's vectors share the profile (migrations 0005, 0007): cluster centroids and skills are
# searched through HNSW; a cluster's exact mean and a member's join vector are not indexed. After a
# re-embed (clear=True) `ultron db reembed` recomputes them all (ultron/cli/reembed.py).
EXTRA_VECTORS = (
    ("knowledge_clusters", "centroid"),
    ("knowledge_clusters", "mean"),
    ("cluster_members", "embedding"),
    ("skills", "embedding"),
)
EXTRA_HNSW = (("knowledge_clusters", "centroid"), ("skills", "embedding"))


class Executes(Protocol):
    """What runs the index DDL: a SQLAlchemy connection or session, or a raw-connection adapter (bench)."""

    def execute(self, statement: TextClause, /) -> Any: ...


@dataclass(frozen=True)
class Profile:
    provider: str
    model_name: str
    dimension: int


def read_profile(conn: Connection) -> Profile | None:
    row = conn.execute(
        text("SELECT provider, model_name, dimension FROM embedding_profile WHERE id = 1")
    ).first()
    return Profile(*row) if row else None


def drop_vector_index(conn: Executes) -> None:
    conn.execute(text("DROP INDEX IF EXISTS ix_memories_embedding_hnsw"))
    for table, column in EXTRA_HNSW:
        conn.execute(text(f"DROP INDEX IF EXISTS ix_{table}_{column}_hnsw"))


def create_vector_index(conn: Executes) -> None:
    # Partial: every nearest-neighbour query reads active memories only, and archiving a memory (a
    # non-HOT update) then adds no graph entry -- a rebalance that archives thousands stays cheap. A new
    # upload's memory enters it when the worker sets `indexed` (migration 0020, ultron/memory/indexing.py).
    conn.execute(
        text(
            "CREATE INDEX ix_memories_embedding_hnsw ON memories USING hnsw (embedding vector_cosine_ops) "
            f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) WHERE {MEMORY_HNSW_PREDICATE}"
        )
    )
    for table, column in EXTRA_HNSW:
        conn.execute(
            text(
                f"CREATE INDEX ix_{table}_{column}_hnsw ON {table} USING hnsw ({column} vector_cosine_ops) "
                f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})"
            )
        )


def set_dimension(conn: Connection, dimension: int, *, clear: bool = False) -> None:
    """Fix the vector column's dimension; `clear` empties it (vectors of another size cannot be cast)."""
    using = " USING NULL" if clear else ""
    conn.execute(text(f"ALTER TABLE memories ALTER COLUMN embedding TYPE vector({int(dimension)}){using}"))
    for table, column in EXTRA_VECTORS:
        conn.execute(text(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE vector({int(dimension)}){using}"))


def write_profile(conn: Connection, profile: Profile) -> None:
    conn.execute(
        text(
            "INSERT INTO embedding_profile (id, provider, model_name, dimension) "
            "VALUES (1, :provider, :model_name, :dimension) "
            "ON CONFLICT (id) DO UPDATE SET provider = :provider, model_name = :model_name, "
            "dimension = :dimension, updated_at = now(), "
            # Another model has another cosine scale: its dedup band is recorded afresh (dedup_thresholds).
            "dedup_hard = CASE WHEN embedding_profile.model_name = :model_name "
            "THEN embedding_profile.dedup_hard END, "
            "dedup_soft = CASE WHEN embedding_profile.model_name = :model_name "
            "THEN embedding_profile.dedup_soft END"
        ),
        profile.__dict__,
    )


def ensure_profile(engine: Engine, wanted: Profile) -> Profile:
    """Record the model on first start; refuse to start on a different one."""
    with engine.begin() as conn:
        conn.execute(text("LOCK TABLE embedding_profile IN EXCLUSIVE MODE"))
        current = read_profile(conn)
        if current is None:
            write_profile(conn, wanted)
            drop_vector_index(conn)
            set_dimension(conn, wanted.dimension)
            create_vector_index(conn)
            return wanted
    if (current.model_name, current.dimension) != (wanted.model_name, wanted.dimension):
        raise EmbeddingModelMismatch(
            f"this database was built with embedding model {current.model_name!r} "
            f"({current.dimension} dimensions) but the hub is configured for {wanted.model_name!r} "
            f"({wanted.dimension} dimensions). Configure the original model again, or move every "
            f"memory to the new one with `ultron db reembed`."
        )
    return current


def dedup_thresholds(engine: Engine, defaults: tuple[float, float]) -> tuple[float, float]:
    """The dedup band (HARD, SOFT) recorded with this database's model; `defaults` (the calibrated values
    for the model, ultron/config.py) are recorded first when none are."""
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE embedding_profile SET dedup_hard = :hard, dedup_soft = :soft "
                "WHERE id = 1 AND (dedup_hard IS NULL OR dedup_soft IS NULL)"
            ),
            {"hard": defaults[0], "soft": defaults[1]},
        )
        row = conn.execute(text("SELECT dedup_hard, dedup_soft FROM embedding_profile WHERE id = 1")).first()
    return (float(row[0]), float(row[1])) if row else defaults
