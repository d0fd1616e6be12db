"""`ultron skills ...` and `ultron clusters ...`, in-process against the test database."""

from __future__ import annotations

import json

import pytest

from ultron.cli import main
from ultron.tenancy import create_agent


@pytest.fixture()
def run(settings, hub, monkeypatch, capsys):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("ULTRON_REDACTION_ENABLED", "false")
    with hub.db.session() as s:
        create_agent(s, "bob")  # --agent acts as an existing agent; the CLI never creates one
    common = [
        "--database-url",
        settings.database_url.get_secret_value(),
        "--data-dir",
        str(settings.data_dir),
        "--embedding-provider",
        "hash",
        "--agent",
        "bob",
    ]

    def _run(*args: str, code: int = 0) -> str:
        capsys.readouterr()
        assert main([*args, *common]) == code, capsys.readouterr()
        return capsys.readouterr().out

    return _run


def test_search_list_show_history_and_clusters(run, published):  # type: ignore[no-untyped-def]
    hits = json.loads(run("skills", "search", "docker build cache pip", "--json"))
    assert "docker" in hits[0]["slug"]
    slug = hits[0]["slug"]
    assert f"{slug}@1.0.0" in run("skills", "search", "docker build cache pip", "--limit", "1")
    assert len(run("skills", "list").splitlines()) == 3
    shown = run("skills", "show", slug)
    assert shown.startswith(f"# {slug}@1.0.0 (active)") and "\n---\nname: " in shown
    assert json.loads(run("skills", "show", slug, "--json", "--version", "1.0.0"))["versions"] == ["1.0.0"]
    assert "crystallize" in run("skills", "history", slug)
    clusters = json.loads(run("skills", "clusters", "list", "--json"))
    assert len([c for c in clusters if c["skill_slug"]]) == 3
    listed = run("skills", "clusters", "list").splitlines()
    assert listed[0].split() == ["cluster", "members", "skill", "next", "topic"]
    assert any(slug in line.split() for line in listed[1:])
    one = json.loads(
        run("skills", "clusters", "show", next(c["id"] for c in clusters if c["skill_slug"] == slug))
    )
    assert one["skill"]["slug"] == slug and one["members"]
    run("skills", "show", "no-such-skill", code=1)
    run("skills", "show", slug, "--version", "one", code=2)


def test_export_every_skill_then_upload_the_folder_of_them(run, published, tmp_path):  # type: ignore[no-untyped-def]
    out = tmp_path / "skills"
    written = run("skills", "export", str(out)).split()
    slugs = sorted(p.rsplit("/", 1)[1] for p in written)
    assert len(slugs) == 3 and sorted(d.name for d in out.iterdir()) == slugs
    assert all((out / s / "SKILL.md").is_file() for s in slugs)
    uploaded = run("skills", "upload", str(out))
    assert uploaded.count("@1.1.0 (after 1.0.0)") == 3
    single = run("skills", "upload", str(out / slugs[0]))
    assert f"{slugs[0]}@1.2.0" in single
    again = run("skills", "export", str(tmp_path / "one"), "--slug", slugs[0], "--version", "1.0.0")
    assert again.strip().endswith(slugs[0])
    run("skills", "export", str(tmp_path / "x"), "--version", "1.0.0", code=2)
    run("skills", "upload", str(tmp_path / "nowhere"), code=2)
