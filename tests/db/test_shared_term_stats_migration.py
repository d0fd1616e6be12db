"""Migration 0016: term statistics count shared memories only (issue 33, found 4), and back."""

from __future__ import annotations

from sqlalchemy import text

from ultron.db.migrate import downgrade, upgrade_to_head
from ultron.memory.schemas import UploadRequest
from ultron.tenancy import local_actor


def _lexemes(hub) -> set[str]:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return set(s.execute(text("SELECT lexeme FROM term_stats")).scalars())


def test_term_stats_count_shared_memories_only_and_downgrade_restores_the_old_count(hub):
    with hub.db.session() as s:
        actor = local_actor(s)
        hub.memory.upload(s, actor, UploadRequest(content="shared words: grafana dashboards"))
        hub.memory.upload(
            s, actor, UploadRequest(content="private words: nowakowska quokka", scope="private")
        )
    with hub.db.session() as s:
        hub.memory.refresh_term_stats(s, actor.tenant_id)
        docs = s.execute(text("SELECT docs FROM term_totals")).scalar_one()
    assert "grafana" in _lexemes(hub) and "quokka" not in _lexemes(hub) and docs == 1
    downgrade(hub.db.engine, "0015_member_tenant_fk")  # rebuilds every tenant under the old definition
    assert "quokka" in _lexemes(hub)
    upgrade_to_head(hub.db.engine)
    assert "quokka" not in _lexemes(hub) and "grafana" in _lexemes(hub)
