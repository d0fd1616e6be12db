"""The SDK's skill and cluster methods: the in-process and HTTP backends give the same answers, exports
write safe folders, and a folder uploaded, exported and uploaded again keeps its files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ultron.api.app import create_app
from ultron.errors import NotFound, ValidationFailed
from ultron.sdk import Ultron
from ultron.skills import bundle
from ultron.skills.format import SkillDoc, parse, render
from ultron.tenancy import create_agent

SKILL = render(
    SkillDoc(
        "Flaky Test Triage",
        "Find out why a test fails only sometimes",
        "## Steps\n\n1. Rerun with `scripts/loop.sh`.\n2. Bisect the order.\n3. Fix the shared state.\n",
        {"categories": ["testing"]},
    )
)
FOLDER = {
    "SKILL.md": SKILL,
    "scripts/loop.sh": "#!/bin/sh\nfor i in $(seq 50); do pytest -q -p no:randomly || exit 1; done\n",
    "reference/orders.md": "# Orders\n\nRun with -p randomly to shuffle.\n",
}


@pytest.fixture()
def both(hub):  # type: ignore[no-untyped-def]
    """Bob twice: in-process and over HTTP, in the tenant where the skills are."""
    with hub.db.session() as s:
        key = create_agent(s, "bob", "default")[1]
    with TestClient(create_app(hub)) as tc:
        remote = Ultron(base_url="http://testserver", api_key=key, transport=tc._transport)
        local = Ultron(hub=hub, agent="bob")
        yield local, remote
        remote.close()


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, content in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(content)
    return root


def tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def dump(items):  # type: ignore[no-untyped-def]
    return [i.model_dump(mode="json") for i in items]


def test_both_backends_answer_the_same(both, published):  # type: ignore[no-untyped-def]
    local, remote = both
    published.upload_memory("docker build cache lost after COPY of the repo", scope="private")  # alice's
    for query in ("docker build cache pip", "postgres lock timeout"):
        assert dump(local.search_skills(query)) == dump(remote.search_skills(query))
    for status in ("active", "superseded", "all"):
        assert dump(local.list_skills(status)) == dump(remote.list_skills(status))
    slug = local.list_skills()[0].slug
    assert local.get_skill(slug).model_dump() == remote.get_skill(slug).model_dump()
    assert local.skill_md(slug) == remote.skill_md(slug) == remote.skill_md(slug, "1.0.0")
    assert dump(local.skill_history(slug)) == dump(remote.skill_history(slug))
    assert dump(local.list_clusters()) == dump(remote.list_clusters())
    for c in local.list_clusters():
        assert local.get_cluster(c.id).model_dump() == remote.get_cluster(str(c.id)).model_dump()
    for client in (local, remote):
        with pytest.raises(NotFound):
            client.get_skill("no-such-skill")
        with pytest.raises(ValidationFailed, match="MAJOR.MINOR.PATCH"):
            client.get_skill(slug, "latest")
        with pytest.raises(NotFound):
            client.get_cluster("00000000-0000-0000-0000-000000000000")
        with pytest.raises(ValueError, match="2000"):
            client.search_skills("x" * 2001)


def test_exports_are_identical_and_parse_back(both, published, tmp_path):  # type: ignore[no-untyped-def]
    local, remote = both
    slug = local.list_skills()[0].slug
    a = local.export_skill(slug, tmp_path / "a")
    b = remote.export_skill(slug, tmp_path / "b")
    assert a == tmp_path / "a" / slug and b == tmp_path / "b" / slug
    assert tree(a) == tree(b) == {"SKILL.md": local.skill_md(slug)}
    doc = parse(tree(a)["SKILL.md"])
    assert doc.name == local.get_skill(slug).name


def test_a_folder_round_trips_through_upload_and_export(both, tmp_path):  # type: ignore[no-untyped-def]
    local, remote = both
    src = write(tmp_path / "src", FOLDER)
    write(src, {".git/config": "[core]\n", "__pycache__/x.pyc": "junk", ".env": "SECRET=1\n"})
    (src / "link.md").symlink_to(src / "SKILL.md")
    first = remote.upload_skill(src)
    assert (first.skill.slug, first.skill.version) == ("flaky-test-triage", "1.0.0")
    assert first.skill.files == ["reference/orders.md", "scripts/loop.sh"]  # hidden, cache, link skipped
    out = remote.export_skill("flaky-test-triage", tmp_path / "out")
    got = tree(out)
    assert {k: v for k, v in got.items() if k != "SKILL.md"} == {
        k: v for k, v in FOLDER.items() if k != "SKILL.md"
    }
    sent, back = parse(FOLDER["SKILL.md"]), parse(got["SKILL.md"])
    assert (back.name, back.description, back.body) == (sent.name, sent.description, sent.body)
    second = local.upload_skill(out)  # the exported folder, uploaded again in-process
    assert (second.skill.version, second.previous_version) == ("1.1.0", "1.0.0")
    again = tree(local.export_skill("flaky-test-triage", tmp_path / "again"))
    assert {k: v for k, v in again.items() if k != "SKILL.md"} == {
        k: v for k, v in got.items() if k != "SKILL.md"
    }
    old = tree(remote.export_skill("flaky-test-triage", tmp_path / "old", version="1.0.0"))
    assert parse(old["SKILL.md"]).metadata["version"] == "1.0.0"


def test_reading_a_folder_refuses_what_cannot_be_a_skill(tmp_path):  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationFailed, match="SKILL.md"):
        bundle.read_dir(write(tmp_path / "none", {"README.md": "x"}))
    binary = write(tmp_path / "bin", {"SKILL.md": SKILL})
    (binary / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(ValidationFailed, match="logo.png"):
        bundle.read_dir(binary)
    assert bundle.skill_dirs(write(tmp_path / "many" / "a", {"SKILL.md": SKILL}).parent) == [
        tmp_path / "many" / "a"
    ]


def test_writing_never_leaves_the_target_folder(tmp_path):  # type: ignore[no-untyped-def]
    for bad in ({"../escape.md": "x"}, {"/abs.md": "x"}, {"a/../../b": "x"}):
        with pytest.raises(ValidationFailed):
            bundle.write_dir(tmp_path, "skill", {"SKILL.md": SKILL, **bad})
    for slug in ("..", "a/b", ".hidden"):
        with pytest.raises(ValidationFailed):
            bundle.write_dir(tmp_path, slug, {"SKILL.md": SKILL})
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "out").mkdir()
    os.symlink(outside, tmp_path / "out" / "skill")  # the target is a link
    with pytest.raises(ValidationFailed, match="link"):
        bundle.write_dir(tmp_path / "out", "skill", {"SKILL.md": SKILL})
    (tmp_path / "out2" / "skill").mkdir(parents=True)
    os.symlink(outside, tmp_path / "out2" / "skill" / "scripts")  # a folder inside it is a link
    with pytest.raises(ValidationFailed, match="outside"):
        bundle.write_dir(tmp_path / "out2", "skill", {"SKILL.md": SKILL, "scripts/x.sh": "x"})
    assert list(outside.iterdir()) == []
    assert not (tmp_path / "escape.md").exists()
