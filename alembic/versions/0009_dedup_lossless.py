"""Dedup thresholds recorded with the embedding model; every memory's document covers its contributions.

* `embedding_profile.dedup_hard` / `dedup_soft`: the dedup band in force for this database's model (the
  hub fills them with the calibrated per-model defaults of ultron/config.py when they are NULL and no
  setting overrides them; a re-embed onto another model clears them). Existing rows: NULL, filled at the
  next start.
* `memories.search_tsv` of every memory that absorbed other uploads is rebuilt from its own text, its tags
  and the text of each contribution (ultron/memory/document.py): before, a merge threw the incoming text
  away, but memory_contributions kept it, so this makes those uploads findable again. Keyset batches; the
  downgrade keeps the richer documents (they are a superset of the old ones).

Revision ID: 0009_dedup_lossless
Revises: 0008_skill_front_matter
Create Date: 2026-12-01
"""

import sqlalchemy as sa

from alembic import op

revision = "0009_dedup_lossless"
down_revision = "0008_skill_front_matter"
branch_labels = None
depends_on = None

BATCH = 500


def _rebuild_documents() -> None:
    from ultron.memory import fulltext

    conn = op.get_bind()
    last = None
    while True:
        rows = (
            conn.execute(
                sa.text(
                    "SELECT DISTINCT c.memory_id FROM memory_contributions c "
                    "WHERE c.decision IN ('merged', 'merged_judge') "
                    "AND (CAST(:last AS uuid) IS NULL OR c.memory_id > CAST(:last AS uuid)) "
                    "ORDER BY c.memory_id LIMIT :batch"
                ),
                {"last": last, "batch": BATCH},
            )
            .scalars()
            .all()
        )
        if not rows:
            return
        for memory_id in rows:
            memory = conn.execute(
                sa.text("SELECT content, context, resolution, tags FROM memories WHERE id = :id"),
                {"id": memory_id},
            ).one_or_none()
            if memory is None:
                continue
            own = "\n".join(" ".join((v or "").split()).lower() for v in memory[:3])
            texts = [*memory[:3], *memory.tags]
            known = set(memory.tags)
            for c in conn.execute(
                sa.text(
                    "SELECT content, context, resolution, tags FROM memory_contributions "
                    "WHERE memory_id = :id ORDER BY created_at, id LIMIT 500"
                ),
                {"id": memory_id},
            ):
                texts += [v for v in c[:3] if v and v.strip() and " ".join(v.split()).lower() not in own]
                texts += [t for t in (c.tags or []) if t not in known]
                known |= set(c.tags or [])
            conn.execute(
                sa.text("UPDATE memories SET search_tsv = to_tsvector('simple', :doc) WHERE id = :id"),
                {"doc": fulltext.index_text(*texts), "id": memory_id},
            )
        last = str(rows[-1])


def upgrade() -> None:
    op.execute("ALTER TABLE embedding_profile ADD COLUMN dedup_hard double precision")
    op.execute("ALTER TABLE embedding_profile ADD COLUMN dedup_soft double precision")
    _rebuild_documents()


def downgrade() -> None:
    op.execute("ALTER TABLE embedding_profile DROP COLUMN dedup_soft")
    op.execute("ALTER TABLE embedding_profile DROP COLUMN dedup_hard")
