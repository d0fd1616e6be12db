"""Search: term statistics for a BM25-like ranker, conversation place and time of a memory, stemmed index.

- `term_stats` (tenant, lexeme, ndoc) and `term_totals` (tenant, docs, avg_len): document frequencies of the
  full-text lexemes of active memories, refreshed by `ultron_refresh_term_stats(tenant)` (the worker's
  cycle runs it; ts_stat, which ships with every Postgres). Search reads them for IDF weights.
- `memories.thread`, `memories.position`: a memory's conversation/session and its place there (optional);
  `memories.occurred_at`: when what it tells happened (optional; distinct from created_at).
- `search_tsv` of every existing memory is rebuilt with the new tokenizer (English stems, exact identifiers),
  keeping what 0009 put in it: the texts of the uploads merged into the memory (ultron/memory/document.py).

Revision ID: 0010_lexical_ranking
Revises: 0009_dedup_lossless
Create Date: 2026-12-01
"""

import sqlalchemy as sa

from alembic import op

revision = "0010_lexical_ranking"
down_revision = "0009_dedup_lossless"
branch_labels = None
depends_on = None

BATCH = 500

REFRESH = """
CREATE OR REPLACE FUNCTION ultron_refresh_term_stats(p_tenant uuid) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    -- One rebuild per tenant at a time (two hub processes may ask at once).
    PERFORM pg_advisory_xact_lock(1431044112, hashtext(p_tenant::text));
    DELETE FROM term_stats WHERE tenant_id = p_tenant;
    INSERT INTO term_stats (tenant_id, lexeme, ndoc)
    SELECT p_tenant, s.word, s.ndoc
    FROM ts_stat(format('SELECT search_tsv FROM memories WHERE tenant_id = %L AND status = %L',
                        p_tenant, 'active')) s;
    GET DIAGNOSTICS n = ROW_COUNT;
    INSERT INTO term_totals (tenant_id, docs, avg_len, refreshed_at)
    SELECT p_tenant, count(*), coalesce(avg(length(search_tsv)), 0), now()
    FROM memories WHERE tenant_id = p_tenant AND status = 'active'
    ON CONFLICT (tenant_id) DO UPDATE
        SET docs = excluded.docs, avg_len = excluded.avg_len, refreshed_at = excluded.refreshed_at
        WHERE (term_totals.docs, term_totals.avg_len) IS DISTINCT FROM (excluded.docs, excluded.avg_len);
    RETURN n;
END $$;
"""


def _merged_texts(conn, ids: list) -> dict:  # type: ignore[no-untyped-def]
    """The texts of the uploads merged into each memory of `ids` (0009's document), oldest first."""
    out: dict = {}
    rows = conn.execute(
        sa.text(
            "SELECT memory_id, content, context, resolution, tags FROM memory_contributions "
            "WHERE memory_id = ANY(CAST(:ids AS uuid[])) AND decision IN ('merged', 'merged_judge') "
            "ORDER BY memory_id, created_at, id"
        ),
        {"ids": [str(i) for i in ids]},
    )
    for row in rows:
        out.setdefault(row.memory_id, []).append(row)
    return out


def _reindex(tokenize) -> None:  # type: ignore[no-untyped-def]
    conn = op.get_bind()
    last = "00000000-0000-0000-0000-000000000000"
    while True:
        rows = conn.execute(
            sa.text(
                "SELECT id, content, context, resolution, tags FROM memories WHERE id > CAST(:last AS uuid) "
                "ORDER BY id LIMIT :n"
            ),
            {"last": last, "n": BATCH},
        ).all()
        if not rows:
            return
        merged = _merged_texts(conn, [row.id for row in rows])
        for row in rows:
            own = "\n".join(
                " ".join((v or "").split()).lower() for v in (row.content, row.context, row.resolution)
            )
            texts = [row.content, row.context, row.resolution, *row.tags]
            known = set(row.tags)
            for c in merged.get(row.id, [])[:500]:
                texts += [
                    v
                    for v in (c.content, c.context, c.resolution)
                    if v and v.strip() and " ".join(v.split()).lower() not in own
                ]
                texts += [t for t in (c.tags or []) if t not in known]
                known |= set(c.tags or [])
            conn.execute(
                sa.text("UPDATE memories SET search_tsv = to_tsvector('simple', :doc) WHERE id = :id"),
                {"id": row.id, "doc": tokenize(*texts)},
            )
        last = str(rows[-1].id)


def upgrade() -> None:
    from ultron.memory.fulltext import index_text

    op.execute(
        """
        CREATE TABLE term_stats (
            tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
            lexeme text NOT NULL,
            ndoc integer NOT NULL,
            PRIMARY KEY (tenant_id, lexeme)
        )
        """
    )
    op.execute(
        """
        CREATE TABLE term_totals (
            tenant_id uuid PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
            docs integer NOT NULL,
            avg_len double precision NOT NULL,
            refreshed_at timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute(REFRESH)
    op.execute("ALTER TABLE memories ADD COLUMN thread text, ADD COLUMN position integer")
    op.execute("ALTER TABLE memories ADD COLUMN occurred_at timestamptz")
    op.execute(
        "CREATE INDEX ix_memories_thread ON memories (tenant_id, thread, position) WHERE thread IS NOT NULL"
    )
    _reindex(index_text)
    op.execute("SELECT ultron_refresh_term_stats(id) FROM tenants")


def downgrade() -> None:
    from ultron.memory.fulltext import legacy_index_text

    op.execute("DROP INDEX ix_memories_thread")
    op.execute("ALTER TABLE memories DROP COLUMN thread, DROP COLUMN position, DROP COLUMN occurred_at")
    op.execute("DROP FUNCTION ultron_refresh_term_stats(uuid)")
    op.execute("DROP TABLE term_totals")
    op.execute("DROP TABLE term_stats")
    _reindex(legacy_index_text)
