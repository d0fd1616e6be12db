"""Markdown vault: export then import round-trips every field; names are safe; private stays private."""

from __future__ import annotations

import os

import yaml
from sqlalchemy import select, text

from ultron.cli import main
from ultron.db.models import Memory
from ultron.sdk import Ultron
from ultron.tenancy import local_actor
from ultron.vault.markdown import Vault, parse, slug
from ultron.worker.evolution import run_evolution_cycle

FIELDS = (
    "id",
    "tenant_id",
    "agent_id",
    "memory_type",
    "content",
    "context",
    "resolution",
    "tags",
    "summary_l0",
    "overview_l1",
    "tier",
    "status",
    "scope",
    "group_name",
    "pinned",
    "valence",
    "arousal",
    "hit_count",
    "last_hit_at",
    "created_at",
    "updated_at",
    "archived_at",
    "archived_reason",
    "redacted_entities",
    "content_hash",
)


def snapshot(hub) -> dict:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        rows = s.execute(select(Memory).order_by(Memory.id)).scalars().all()
        out = {m.id: {f: getattr(m, f) for f in FIELDS} for m in rows}
        for m in rows:
            out[m.id]["embedding"] = [round(float(x), 5) for x in m.embedding]
        return out


def stock(hub) -> Ultron:  # type: ignore[no-untyped-def]
    local = Ultron(hub=hub)  # the local agent: admin
    local.create_group("ops")
    local.add_to_group("ops", "local")
    a = local.upload_memory(
        "ModuleNotFoundError: No module named 'pandas'\n---\nonly in the cron job\n",
        context="key: value # not a comment\nyes",
        resolution="use /srv/etl/.venv/bin/python in the crontab",
        tags=["python", "cron job", "yes", "#hash"],
        valence=-0.25,
        arousal=0.5,
    )
    local.pin_memory(a.id)
    local.get_memory_details([a.id])
    b = local.upload_memory("Rust 遍历 Vec 时 push 会触发借用错误：先收集再修改", tags=["rust", "借用"])
    local.edit_memory(b.id, tier="hot")
    c = local.upload_memory("the staging cluster is decommissioned", scope="group", group="ops")
    local.edit_memory(c.id, status="archived")
    local.upload_memory("my own scratch note about the on-call rota", scope="private")
    local.reflect("Check the interpreter cron uses before anything else", source_ids=[a.id])
    return local


def test_export_then_import_round_trips_every_field(hub, tmp_path):
    stock(hub)
    before = snapshot(hub)
    vault = Vault(hub.memory)
    with hub.db.session() as s:
        actor = local_actor(s)
        assert vault.export(s, actor, tmp_path / "vault").written == len(before) == 5
    files = sorted(p.relative_to(tmp_path / "vault") for p in (tmp_path / "vault").rglob("*.md"))
    assert {p.parts[0] for p in files} == {m["memory_type"] for m in before.values()}
    assert all(len(p.parts) == 2 for p in files)  # folders by type, nothing deeper
    first = (tmp_path / "vault" / files[0]).read_text(encoding="utf-8")
    assert first.startswith("---\n") and isinstance(
        yaml.safe_load(first[4 : first.index("\n---\n")])["tags"], list
    )

    with hub.db.session() as s:
        s.execute(text("DELETE FROM memories"))
    with hub.db.session() as s:
        report = vault.import_(s, local_actor(s), tmp_path / "vault")
    assert (report.created, report.updated, report.skipped) == (5, 0, [])
    assert snapshot(hub) == before

    # Importing again updates in place; exporting again writes the same bytes.
    with hub.db.session() as s:
        assert vault.import_(s, local_actor(s), tmp_path / "vault").updated == 5
        vault.export(s, local_actor(s), tmp_path / "again")
    for rel in files:
        assert (tmp_path / "again" / rel).read_bytes() == (tmp_path / "vault" / rel).read_bytes()
    assert snapshot(hub) == before


def test_names_cannot_escape_the_vault(hub, tmp_path):
    local = Ultron(hub=hub)
    local.upload_memory("../../../etc/passwd is world readable on the old bastion host")
    root = tmp_path / "vault"
    with hub.db.session() as s:
        Vault(hub.memory).export(s, local_actor(s), root)
    written = list(root.rglob("*.md"))
    assert len(written) == 1 and root in written[0].resolve().parents
    assert ".." not in written[0].name and "/" not in slug("../../x/y")
    assert not list(tmp_path.glob("etc*"))

    outside = tmp_path / "outside.md"
    outside.write_text(
        written[0].read_text(encoding="utf-8").replace("old bastion", "planted"), encoding="utf-8"
    )
    os.symlink(outside, root / "pattern" / "link.md")
    bad_type = root / "error" / "bad.md"
    bad_type.parent.mkdir(exist_ok=True)
    bad_type.write_text("---\nmemory_type: ../../x\n---\nsomething\n", encoding="utf-8")
    (root / "error" / "no-front-matter.md").write_text("just text\n", encoding="utf-8")
    (root / ".obsidian").mkdir()
    (root / ".obsidian" / "workspace.md").write_text("---\nfoo: 1\n---\nx\n", encoding="utf-8")
    with hub.db.session() as s:
        report = Vault(hub.memory).import_(s, local_actor(s), root)
    assert report.updated == 1 and report.created == 0
    assert sorted(line.split(":")[0] for line in report.skipped) == [
        "error/bad.md",
        "error/no-front-matter.md",
    ]
    with hub.db.session() as s:
        assert (
            s.execute(text("SELECT count(*) FROM memories WHERE content LIKE '%planted%'")).scalar_one() == 0
        )


def test_a_private_memory_is_not_exported_to_another_agent(hub, tmp_path):
    alice = Ultron(hub=hub, agent="alice")
    secret = alice.upload_memory("alice's private worry about the failover drill", scope="private")
    shared = alice.upload_memory("the failover drill is on Thursday at 10:00")
    bob = Ultron(hub=hub, agent="bob")
    vault = Vault(hub.memory)
    with hub.db.session() as s:
        vault.export(s, bob._backend.actor, tmp_path / "bob")
        vault.export(s, alice._backend.actor, tmp_path / "alice")
    exported = {parse(p.read_text(encoding="utf-8"))[0].id for p in (tmp_path / "bob").rglob("*.md")}
    assert exported == {shared.id}
    assert {parse(p.read_text(encoding="utf-8"))[0].id for p in (tmp_path / "alice").rglob("*.md")} == {
        shared.id,
        secret.id,
    }


def test_a_non_admin_cannot_overwrite_or_claim_another_agents_memory(hub, tmp_path):
    alice = Ultron(hub=hub, agent="alice")
    memo = alice.upload_memory("deploys freeze on Fridays after 15:00")
    vault = Vault(hub.memory)
    with hub.db.session() as s:
        vault.export(s, alice._backend.actor, tmp_path / "v")
    path = next((tmp_path / "v").rglob("*.md"))
    path.write_text(path.read_text(encoding="utf-8").replace("15:00", "12:00"), encoding="utf-8")
    bob = Ultron(hub=hub, agent="bob")
    with hub.db.session() as s:
        report = vault.import_(s, bob._backend.actor, tmp_path / "v")
    assert report.updated == 0 and "did not contribute" in report.skipped[0]
    assert alice.get_memory(memo.id).content.endswith("15:00")


def test_the_cli_exports_and_imports_a_vault(hub, settings, tmp_path, capsys):
    Ultron(hub=hub).upload_memory("nginx 502 when the upstream gunicorn worker times out")
    common = ["--database-url", settings.database_url.get_secret_value(), "--embedding-provider", "hash"]
    assert main(["export", "markdown", str(tmp_path / "v"), *common]) == 0
    assert "exported 1 memories" in capsys.readouterr().out
    assert main(["import", "markdown", str(tmp_path / "v"), *common]) == 0
    assert "imported 1 memories (0 new, 1 updated)" in capsys.readouterr().out


def test_the_cli_export_writes_every_active_skill_as_skill_md(make_hub, settings, tmp_path, capsys):
    """Issue: skills go to the vault as SKILL.md; an import of the vault leaves them alone."""
    from tests.skills.conftest import DOCKER, POSTGRES, PYTEST

    hub = make_hub(dedup_similarity_threshold=0.99, dedup_soft_threshold=0.99)  # thirty distinct memories
    sdk = Ultron(hub=hub)
    for text_ in DOCKER + POSTGRES + PYTEST:
        sdk.upload_memory(text_)
    assert run_evolution_cycle(hub.db, hub.skills)["published"] == 3
    with hub.db.session() as s:
        slugs = [x.slug for x in hub.skills.list_skills(s, local_actor(s).tenant_id)]
        wanted = {
            slug_: hub.skills.skill_md(hub.skills.latest(s, local_actor(s).tenant_id, slug_))
            for slug_ in slugs
        }
    common = ["--database-url", settings.database_url.get_secret_value(), "--embedding-provider", "hash"]
    assert main(["export", "markdown", str(tmp_path / "v"), *common]) == 0
    assert "and 3 skills" in capsys.readouterr().out
    for slug_, md in wanted.items():
        assert (tmp_path / "v" / "skills" / slug_ / "SKILL.md").read_text(encoding="utf-8") == md
    assert main(["import", "markdown", str(tmp_path / "v"), *common]) == 0
    assert "imported 30 memories (0 new, 30 updated)" in capsys.readouterr().out
