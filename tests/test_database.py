"""Schema, migrations, named queries and the embedding profile, on real Postgres."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text

from ultron.cli.reembed import reembed
from ultron.db.engine import Database, ensure_vector_extension
from ultron.db.migrate import current_revision, downgrade, head_revision, upgrade_to_head
from ultron.db.models import Base
from ultron.db.queries import all_queries, parse_queries, q
from ultron.errors import DatabaseSetupError, EmbeddingModelMismatch
from ultron.hub import Hub
from ultron.memory.fulltext import index_text
from ultron.sdk._local import LocalBackend

EXPECTED_QUERIES = {"nearest_same_type", "search_memories", "record_hits", "refresh_term_stats", "raw_knn"}
EXPECTED_QUERIES |= {"move_memory_sources"}
EXPECTED_QUERIES |= {
    "brief_pinned",
    "brief_hot",
    "brief_personal_used",
    "ripple_from",
    "prune_ripples",
    "ripple_levels",
    "serendipity_pool",
    "dream_candidates",
    "mark_reflected",
    "brief_skills",
}
EXPECTED_QUERIES |= {
    "session_digests",
    "sessions_digests",
    "link_memory_source",
    "archive_segment_memories",
    "segment_stage_counts",
}

# Knowledge clusters and skills (sql/clusters.sql, sql/skills.sql).
EXPECTED_QUERIES |= {
    "nearest_clusters",
    "nearest_clusters_exact",
    "assign_cluster",
    "leave_cluster",
    "clusters_ready_to_crystallize",
    "clusters_ready_to_recrystallize",
    "cluster_memories",
    "cluster_leavers",
    "unclustered_memories",
    "cluster_memories_for_revision",
    "reembed_cluster_members",
    "cluster_means",
    "search_skills",
    "list_skills",
    "skill_history",
    "lock_skill_slug",
    "clusters_with_readiness",
    "cluster_member_sample",
}

# The background worker (sql/worker.sql).
EXPECTED_QUERIES |= {
    *(
        f"{verb}_{table}"
        for verb in ("lease", "heartbeat", "release", "park_abandoned")
        for table in ("sessions", "segments")
    ),
    *(f"{verb}_{item}" for verb in ("claim", "finish", "fail") for item in ("session", "segment")),
    "queue_depths",
    "parked_items",
    "rebalance_tiers",
    "consolidation_candidates",
    "recent_runs",
    "prune_runs",
}

# The dashboard's aggregates, map sample, map clusters and skill list (sql/dashboard.sql).
EXPECTED_QUERIES |= {
    "activity_by_day",
    "memory_hit_days",
    "map_sample",
    "map_clusters",
    "cluster_counts",
    "dashboard_skills",
    "memory_counts",
    "worker_runs_recent",
    "worker_runs_by_status",
}


def test_every_named_query_loads():
    assert set(all_queries()) >= EXPECTED_QUERIES
    for name in EXPECTED_QUERIES:
        assert q(name).text.strip()


def test_duplicate_query_names_are_refused():
    with pytest.raises(ValueError, match="duplicate"):
        parse_queries("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;")


def test_migrations_match_the_models(db_url):
    db = Database(db_url)
    try:
        with db.engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        # The vector column's dimension is fixed at run time by the embedding profile, not in the model.
        diff = [d for d in diff if not (d[0] == "modify_type" and d[3] in ("embedding", "centroid"))]
        # The HNSW index is built with the embedding profile (ultron/db/vectors.py).
        hnsw = {"ix_memories_embedding_hnsw", "ix_knowledge_clusters_centroid_hnsw"}
        hnsw |= {"ix_skills_embedding_hnsw"}
        diff = [d for d in diff if not (d[0] == "remove_index" and d[1].name in hnsw)]
        assert diff == []
    finally:
        db.dispose()


def test_downgrade_and_upgrade_round_trip(db_url):
    db = Database(db_url)
    try:
        downgrade(db.engine, "base")
        assert current_revision(db.engine) is None
        upgrade_to_head(db.engine)
        assert current_revision(db.engine) == head_revision()
    finally:
        db.dispose()


def test_server_without_pgvector_gets_a_clear_error(db_url):
    # The same check that runs at start-up, asked for an extension this server does not have.
    db = Database(db_url)
    try:
        with pytest.raises(DatabaseSetupError, match="pgvector.*ULTRON_DATABASE_URL"):
            ensure_vector_extension(db.engine, extension="vector_not_installed_here")
        ensure_vector_extension(db.engine)
    finally:
        db.dispose()


def test_starting_with_another_embedding_model_is_refused(settings):
    Hub.open(settings).close()
    with pytest.raises(EmbeddingModelMismatch, match="ultron db reembed"):
        Hub.open(settings.model_copy(update={"embedding_dimension": 128}))


def test_reembed_moves_every_memory_to_the_new_model(settings):
    hub = Hub.open(settings)
    backend = LocalBackend(hub, owns_hub=False)
    texts = [
        "gunicorn worker killed by the OOM killer during report export",
        "TLS handshake timeout when pulling images from the private registry",
        "flaky test: race between cache warmup and the first request",
        "alembic autogenerate misses a server default change",
        "S3 upload fails with SignatureDoesNotMatch after clock skew",
    ]
    ids = [backend.upload(_req(t)).record.id for t in texts]
    hub.close()

    new = settings.model_copy(update={"embedding_dimension": 128})
    assert reembed(new, batch_size=2).memories == 5
    assert reembed(new).memories == 0  # already there
    hub = Hub.open(new)
    try:
        with hub.db.session() as s:
            dims = s.execute(text("SELECT DISTINCT vector_dims(embedding) FROM memories")).scalars().all()
            assert dims == [128]
        results = LocalBackend(hub, owns_hub=False).search("alembic autogenerate server default")
        assert results[0].record.id == ids[3]
    finally:
        hub.close()


def _req(content: str):  # type: ignore[no-untyped-def]
    from ultron.memory.schemas import UploadRequest

    return UploadRequest(content=content)


def test_migration_0007_backfills_the_exact_mean_from_the_centroid(db_url):
    """Existing clusters get mean = centroid * centroid_norm, with the centroid's dimension."""
    db = Database(db_url)
    try:
        downgrade(db.engine, "0006_skill_files")
        with db.engine.begin() as conn:
            tenant = conn.execute(
                text("INSERT INTO tenants (name) VALUES ('t0007') RETURNING id")
            ).scalar_one()
            conn.execute(text("ALTER TABLE knowledge_clusters ALTER COLUMN centroid TYPE vector(3)"))
            conn.execute(
                text(
                    "INSERT INTO knowledge_clusters (tenant_id, centroid, centroid_norm, member_count) "
                    "VALUES (:t, '[0.6,0.8,0]', 0.5, 2), (:t, NULL, 0, 0)"
                ),
                {"t": tenant},
            )
        upgrade_to_head(db.engine)
        with db.engine.begin() as conn:
            means = conn.execute(
                text("SELECT mean::text FROM knowledge_clusters WHERE tenant_id = :t ORDER BY member_count"),
                {"t": tenant},
            ).scalars()
            assert list(means) == [None, "[0.3,0.4,0]"]
            typ = conn.execute(
                text(
                    "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                    "WHERE attrelid = 'knowledge_clusters'::regclass AND attname = 'mean'"
                )
            ).scalar_one()
            assert typ == "vector(3)"
            opts = conn.execute(
                text("SELECT reloptions FROM pg_class WHERE oid = 'knowledge_clusters'::regclass")
            ).scalar_one()
            assert opts == ["fillfactor=80"]
    finally:
        db.dispose()


def test_migration_0009_makes_merged_away_uploads_findable_and_keeps_every_row(db_url):
    """A store from 0008 whose merge threw the incoming text away: after 0009 its words find the memory."""
    db = Database(db_url)
    try:
        downgrade(db.engine, "0008_skill_front_matter")
        with db.engine.begin() as conn:
            tenant = conn.execute(
                text("INSERT INTO tenants (name) VALUES ('t0009') RETURNING id")
            ).scalar_one()
            conn.execute(
                text(
                    "INSERT INTO embedding_profile (id, provider, model_name, dimension) "
                    "VALUES (1, 'hash', 'h', 3)"
                )
            )
            conn.execute(text("ALTER TABLE memories ALTER COLUMN embedding TYPE vector(3)"))
            memory = conn.execute(
                text(
                    "INSERT INTO memories (tenant_id, memory_type, content, context, resolution, tags, "
                    "summary_l0, overview_l1, embedding, content_hash, search_tsv) VALUES (:t, 'error', "
                    "'No module named pandas', '', 'pip install pandas', '{python}', 's', 'o', '[1,0,0]', "
                    "'h', "
                    "to_tsvector('simple', 'no module named pandas pip install pandas python')) RETURNING id"
                ),
                {"t": tenant},
            ).scalar_one()
            conn.execute(
                text(
                    "INSERT INTO memory_contributions (tenant_id, memory_id, decision, similarity, content, "
                    "context, resolution, tags) VALUES "
                    "(:t, :m, 'created', NULL, 'No module named pandas', '', 'pip install pandas', "
                    "'{python}'), (:t, :m, 'merged_judge', 0.91, 'No module named numpy', 'cron job', "
                    "'pip install numpy', '{numpy}')"
                ),
                {"t": tenant, "m": memory},
            )
        upgrade_to_head(db.engine)
        with db.engine.begin() as conn:
            found = (
                conn.execute(
                    text("SELECT id FROM memories WHERE search_tsv @@ plainto_tsquery('simple', :q)"),
                    {"q": index_text("numpy cron")},  # the head's tokenizer (0010 stems English words)
                )
                .scalars()
                .all()
            )
            assert found == [memory]
            row = conn.execute(
                text("SELECT content, resolution, tags FROM memories WHERE id = :m"), {"m": memory}
            )
            assert tuple(row.one()) == ("No module named pandas", "pip install pandas", ["python"])
            n = conn.execute(
                text("SELECT count(*) FROM memory_contributions WHERE memory_id = :m"), {"m": memory}
            )
            assert n.scalar_one() == 2
            band = conn.execute(text("SELECT dedup_hard, dedup_soft FROM embedding_profile")).one()
            assert tuple(band) == (None, None)  # recorded by the hub at its next start
    finally:
        db.dispose()


def test_the_dedup_band_is_recorded_with_the_model_and_settings_override_it(make_hub):
    from ultron.config import DEFAULT_DEDUP_THRESHOLDS

    hub = make_hub()
    assert (hub.memory.hard_threshold, hub.memory.soft_threshold) == DEFAULT_DEDUP_THRESHOLDS["hash"]
    with hub.db.session() as s:
        s.execute(text("UPDATE embedding_profile SET dedup_hard = 0.7, dedup_soft = 0.4"))
    reopened = make_hub()
    assert (reopened.memory.hard_threshold, reopened.memory.soft_threshold) == (0.7, 0.4)
    overridden = make_hub(dedup_similarity_threshold=0.9)
    assert (overridden.memory.hard_threshold, overridden.memory.soft_threshold) == (0.9, 0.4)


def test_migration_0010_reindexes_existing_memories_and_keeps_them_whole(db_url):
    """A store from 0008 upgrades with its memories whole, their full text rebuilt with stems, term
    statistics built, and the new columns empty; the downgrade restores the old tokenizer."""
    db = Database(db_url)
    try:
        downgrade(db.engine, "0008_skill_front_matter")
        with db.engine.begin() as conn:
            tenant = conn.execute(
                text("INSERT INTO tenants (name) VALUES ('t0010') RETURNING id")
            ).scalar_one()
            conn.execute(
                text(
                    "INSERT INTO memories (tenant_id, memory_type, content, context, content_hash, "
                    "search_tsv) VALUES (:t, 'error', 'Researching flaky builds', "
                    "'psycopg.errors.UniqueViolation', 'h1', "
                    "to_tsvector('simple', 'researching flaky builds psycopg.errors.uniqueviolation'))"
                ),
                {"t": tenant},
            )
        upgrade_to_head(db.engine)
        with db.engine.begin() as conn:
            row = conn.execute(
                text(
                    "SELECT content, context, search_tsv::text AS tsv, thread, position, occurred_at "
                    "FROM memories WHERE tenant_id = :t"
                ),
                {"t": tenant},
            ).one()
            assert (row.content, row.context) == (
                "Researching flaky builds",
                "psycopg.errors.UniqueViolation",
            )
            assert "'research'" in row.tsv and "'build'" in row.tsv
            assert "'psycopg.errors.uniqueviolation'" in row.tsv
            assert (row.thread, row.position, row.occurred_at) == (None, None, None)
            stats = conn.execute(
                text("SELECT ndoc FROM term_stats WHERE tenant_id = :t AND lexeme = 'research'"),
                {"t": tenant},
            ).scalar_one()
            assert stats == 1
        downgrade(db.engine, "0008_skill_front_matter")
        with db.engine.begin() as conn:
            tsv = conn.execute(
                text("SELECT search_tsv::text FROM memories WHERE tenant_id = :t"), {"t": tenant}
            )
            assert "'researching'" in tsv.scalar_one()
        upgrade_to_head(db.engine)
    finally:
        db.dispose()
