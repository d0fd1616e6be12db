"""Migration 0012 (the tenant in every key) carries a store with every kind of row, and its downgrade too;
the new keys keep each delete rule's meaning and refuse a reference across tenants."""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy import text

from tests.ingestion.conftest import fixture_file
from tests.skills.test_skills_sdk import FOLDER
from ultron.clusters.pending import assign_unleased
from ultron.db.engine import Database
from ultron.db.migrate import current_revision, downgrade, upgrade_to_head
from ultron.sdk import Ultron
from ultron.tenancy import create_agent, local_actor

BEFORE = "0011_groups"

# Text of every row of every table (in the columns it had at 0011), sorted: equal means nothing was lost,
# added or changed.
COLUMNS = """
SELECT table_name, string_agg(quote_ident(column_name), ', ' ORDER BY ordinal_position)
FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name <> 'alembic_version'
GROUP BY table_name
"""


# Ranking statistics a migration may rebuild from the memories (0016 counts shared memories only): derived,
# not stored data; tests/db/test_shared_term_stats_migration.py checks them.
DERIVED = {"term_stats", "term_totals"}


def _columns(url: str) -> dict[str, str]:
    with psycopg.connect(url) as conn:
        return {t: c for t, c in conn.execute(COLUMNS).fetchall() if t not in DERIVED}


def _rows(url: str, columns: dict[str, str]) -> dict[str, list[str]]:
    with psycopg.connect(url) as conn:
        return {
            table: [
                r[0]
                for r in conn.execute(
                    f"SELECT CAST(ROW({cols}) AS text) AS r FROM {table} ORDER BY 1"
                ).fetchall()
            ]
            for table, cols in columns.items()
        }


def _fill(hub) -> None:  # type: ignore[no-untyped-def]
    """Memories (shared, private, group, pinned, merged), contributions, agents with keys, groups and
    members, sessions with messages, segments and sources, clusters, skills with files, reflections."""
    with hub.db.session() as s:
        create_agent(s, "ann", "default")
        create_agent(s, "eve", "other")  # a second tenant
    local, ann = Ultron(hub=hub), Ultron(hub=hub, agent="ann")
    local.create_group("ops")
    local.add_to_group("ops", "ann")
    texts = [
        "pytest fixtures with scope=session leak state between database tests",
        "pytest fixture scope session leaks database state across tests",
        "docker build cache misses when COPY . comes before pip install",
        "docker layer cache invalidated by copying the source tree too early",
        "postgres advisory locks serialise the dedup probe per tenant",
    ]
    made = [local.upload_memory(t, resolution="fix it") for t in texts]
    local.upload_memory(texts[0])  # a merge: a second contribution
    local.pin_memory(made[2].id)
    ann.upload_memory("ann keeps her ssh config in a dotfiles repo", scope="private")
    ann.upload_memory("the on-call rota lives in the ops wiki", scope="group", group="ops")
    ann.reflect("fixtures need function scope when they touch the database", source_ids=[made[0].id])
    local.search_memories("docker cache")
    local.get_memory_details([made[4].id])
    with hub.db.session() as s:
        hub.ingestion.ingest_files(s, local_actor(s), [fixture_file("multi_task.jsonl")])
    local.process_trajectories()
    skill_dir = hub.settings.data_dir / "skill"
    for name, body in FOLDER.items():
        (skill_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (skill_dir / name).write_text(body)
    local.upload_skill(skill_dir)
    # an upload after the last cycle: its cluster joined (the cluster step), waiting for the index
    local.upload_memory("harpsichord tuning drifts when the quokka pen humidifier cycles", resolution="fix")
    with hub.db.session() as s:
        assign_unleased(s, hub.clusters, local_actor(s).tenant_id)


def test_a_full_store_at_0011_upgrades_whole_and_downgrades_whole(filled):
    db = Database(filled)
    try:
        downgrade(db.engine, BEFORE)
        at_0011 = _columns(filled)
        before = _rows(filled, at_0011)
        counts = {t: len(rows) for t, rows in before.items()}
        for table in (
            "memories",
            "memory_contributions",
            "agents",
            "agent_groups",
            "group_members",
            "sessions",
        ):
            assert counts[table] > 0, table
        for table in ("session_messages", "task_segments", "memory_sources", "knowledge_clusters"):
            assert counts[table] > 0, table
        for table in ("cluster_members", "skills", "skill_files", "reflection_marks", "hit_events"):
            assert counts[table] > 0, table

        upgrade_to_head(db.engine)
        assert _rows(filled, at_0011) == before
        with db.engine.connect() as conn:
            mismatched = conn.execute(
                text(
                    "SELECT count(*) FROM group_members m JOIN agent_groups g ON g.id = m.group_id "
                    "WHERE m.tenant_id IS DISTINCT FROM g.tenant_id"
                )
            ).scalar_one()
        assert mismatched == 0  # each membership took its group's tenant

        downgrade(db.engine, BEFORE)
        assert _columns(filled) == at_0011
        assert _rows(filled, at_0011) == before
        upgrade_to_head(db.engine)
        assert current_revision(db.engine) is not None
    finally:
        db.dispose()


def test_delete_rules_keep_their_meaning_and_tenants_cannot_cross(filled):
    with psycopg.connect(filled, autocommit=True) as conn:
        other = conn.execute("SELECT tenant_id FROM agents WHERE name = 'eve'").fetchone()[0]
        ann, tenant = conn.execute("SELECT id, tenant_id FROM agents WHERE name = 'ann'").fetchone()
        owned = conn.execute("SELECT count(*) FROM memories WHERE agent_id = %s", (ann,)).fetchone()[0]
        assert owned >= 2
        # No row of one tenant may point at another tenant's agent (before 0012 only ids were matched).
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            conn.execute(
                "INSERT INTO memories (tenant_id, agent_id, memory_type, content, content_hash, search_tsv) "
                "VALUES (%s, %s, 'pattern', 'x', 'h', ''::tsvector)",
                (other, ann),
            )
        # Deleting an agent clears the reference (SET NULL (agent_id)) and keeps the rows and their tenant.
        conn.execute("DELETE FROM group_members WHERE agent_id = %s", (ann,))
        conn.execute("DELETE FROM reflection_marks WHERE agent_id = %s", (ann,))
        conn.execute("DELETE FROM agents WHERE id = %s", (ann,))
        kept = conn.execute(
            "SELECT count(*) FROM memories "
            "WHERE agent_id IS NULL AND tenant_id = %s AND content LIKE 'ann keeps%%'",
            (tenant,),
        ).fetchone()[0]
        assert kept == 1
        # Deleting a memory cascades to its contributions, hits and cluster membership.
        memory = conn.execute(
            "SELECT m.id FROM memories m JOIN cluster_members c ON c.memory_id = m.id "
            "WHERE EXISTS (SELECT 1 FROM hit_events h WHERE h.memory_id = m.id) LIMIT 1"
        ).fetchone()[0]
        conn.execute("DELETE FROM memories WHERE id = %s", (memory,))
        for table in ("memory_contributions", "hit_events", "cluster_members", "memory_entities"):
            left = conn.execute(f"SELECT count(*) FROM {table} WHERE memory_id = %s", (memory,)).fetchone()[0]
            assert left == 0, table
        # A whole tenant goes with every row that hangs off it.
        conn.execute("DELETE FROM tenants WHERE id = %s", (tenant,))
        assert (
            conn.execute("SELECT count(*) FROM memories WHERE tenant_id = %s", (tenant,)).fetchone()[0] == 0
        )
