"""The Skill Hub and clusters over HTTP, on real Postgres: every route, its 4xx paths, tenant isolation,
zip and upload round trips, and that bad uploads store nothing."""

from __future__ import annotations

import io
import json
import stat
import uuid
import zipfile
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from ultron.api.app import create_app
from ultron.db.models import EvolutionRecord, KnowledgeCluster, Skill, SkillFile
from ultron.errors import PayloadTooLarge, ValidationFailed
from ultron.hub import build_worker
from ultron.skills import bundle, evolve
from ultron.skills.format import SkillDoc, Version, parse, render
from ultron.tenancy import create_agent, local_actor
from ultron.worker.evolution import run_evolution_cycle

HIT_FIELDS = {"slug", "name", "description", "version", "categories", "similarity", "score"}
SKILL = render(
    SkillDoc(
        "Release Checklist",
        "Cut a release of a Python package without surprises",
        "## When to use\n\nBefore tagging a release.\n\n## Steps\n\n1. Run `scripts/check.sh`.\n"
        "2. Read `reference/notes.md`.\n3. Tag and push.\n",
        {"categories": ["release", "python"]},
    )
)
FILES = {
    "SKILL.md": SKILL,
    "scripts/check.sh": "#!/bin/sh\nset -eu\npython -m pytest -q\npython -m build\n",
    "reference/notes.md": "# Notes\n\nKeep the changelog in step with the tag.\n",
}


@pytest.fixture()
def keys(hub):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return {
            "bob": create_agent(s, "bob", "default")[1],  # alice's tenant, where the skills are
            "eve": create_agent(s, "eve", "globex")[1],
        }


@pytest.fixture()
def client(hub):  # type: ignore[no-untyped-def]
    with TestClient(create_app(hub, allow_open=False)) as c:
        yield c


@pytest.fixture()
def bob(client, keys):  # type: ignore[no-untyped-def]
    client.headers["Authorization"] = f"Bearer {keys['bob']}"
    return client


def tenant_of(hub):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return local_actor(s).tenant_id


def stored(hub) -> tuple[int, int, int]:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return tuple(  # type: ignore[return-value]
            s.scalar(select(func.count()).select_from(t)) for t in (Skill, SkillFile, EvolutionRecord)
        )


def slug_with(bob, word: str) -> str:  # type: ignore[no-untyped-def]
    return next(s["slug"] for s in bob.get("/skills").json() if word in s["slug"])


def zipped(entries: dict[str, bytes], *, link: str | None = None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries.items():
            z.writestr(name, data)
        if link:
            info = zipfile.ZipInfo(link)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            z.writestr(info, "/etc/passwd")
    return out.getvalue()


# --- search and the catalogue --------------------------------------------------------------------------


def test_search_finds_the_latest_active_version_with_its_fields(bob, published):  # type: ignore[no-untyped-def]
    r = bob.post("/skills/search", json={"query": "my docker build reinstalls pip packages every time"})
    assert r.status_code == 200
    hits = r.json()
    assert 1 <= len(hits) <= 3 and set(hits[0]) == HIT_FIELDS
    assert "docker" in hits[0]["slug"] and hits[0]["version"] == "1.0.0" and hits[0]["score"] > 0
    assert hits == sorted(hits, key=lambda h: -h["similarity"])
    assert len(bob.post("/skills/search", json={"query": "postgres lock", "limit": 1}).json()) == 1


@pytest.mark.parametrize(
    "body",
    [{"query": ""}, {"query": "x" * 2001}, {"query": "x", "limit": 0}, {"query": "x", "limit": 51}, {}],
)
def test_bad_search_bodies_are_422(bob, body):  # type: ignore[no-untyped-def]
    r = bob.post("/skills/search", json=body)
    assert r.status_code == 422 and r.json()["error"] == "validation_error"


def test_superseded_skills_leave_search_but_are_listed_with_their_status(hub, bob, published):  # type: ignore[no-untyped-def]
    listed = bob.get("/skills").json()
    assert len(listed) == 3 and {s["status"] for s in listed} == {"active"}
    assert [s["created_at"] for s in listed] == sorted((s["created_at"] for s in listed), reverse=True)
    docker = slug_with(bob, "docker")
    with hub.db.session() as s:
        hub.skills.supersede(s, tenant_of(hub), docker)
    query = {"query": "docker build cache pip install", "limit": 50}
    assert docker not in [h["slug"] for h in bob.post("/skills/search", json=query).json()]
    assert [s["slug"] for s in bob.get("/skills", params={"status": "superseded"}).json()] == [docker]
    assert docker not in [s["slug"] for s in bob.get("/skills").json()]
    assert len(bob.get("/skills", params={"status": "all"}).json()) == 3
    assert bob.get(f"/skills/{docker}").json()["status"] == "superseded"
    assert bob.get("/skills", params={"status": "gone"}).status_code == 422


def test_list_pages_with_limit_and_offset(bob, published):  # type: ignore[no-untyped-def]
    every = [s["slug"] for s in bob.get("/skills", params={"status": "all"}).json()]
    page = [s["slug"] for s in bob.get("/skills", params={"limit": 1, "offset": 1}).json()]
    assert page == every[1:2]
    assert bob.get("/skills", params={"limit": 0}).status_code == 422
    assert bob.get("/skills", params={"offset": -1}).status_code == 422


def test_a_skill_in_full_with_versions_sorted_as_numbers(hub, bob, published):  # type: ignore[no-untyped-def]
    slug = slug_with(bob, "postgres")
    one = bob.get(f"/skills/{slug}").json()
    assert one["versions"] == ["1.0.0"] and one["files"] == [] and one["status"] == "active"
    assert one["source_cluster_id"] and one["body"].strip()
    with hub.db.session() as s:
        base = hub.skills.latest(s, tenant_of(hub), slug)
        doc = SkillDoc(base.name, base.description, base.body + "\nMore.", {})
        for v in ("1.9.0", "1.10.0"):
            hub.skills.save(s, tenant_of(hub), slug, Version.parse(v), doc, 0.9, base.source_cluster_id)
    latest = bob.get(f"/skills/{slug}").json()
    assert latest["version"] == "1.10.0" and latest["versions"] == ["1.10.0", "1.9.0", "1.0.0"]
    assert bob.get(f"/skills/{slug}", params={"version": "1.0.0"}).json()["body"] == one["body"]
    bad = bob.get(f"/skills/{slug}", params={"version": "1.2"})
    assert bad.status_code == 422 and "MAJOR.MINOR.PATCH" in bad.json()["detail"]
    missing = bob.get(f"/skills/{slug}", params={"version": "2.0.0"})
    assert missing.status_code == 404 and "2.0.0" in missing.json()["detail"]
    assert bob.get("/skills/no-such-skill").status_code == 404


def test_skill_md_is_exactly_what_the_service_renders(hub, bob, published):  # type: ignore[no-untyped-def]
    slug = slug_with(bob, "pytest")
    r = bob.get(f"/skills/{slug}/SKILL.md")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/markdown")
    with hub.db.session() as s:
        assert r.text == hub.skills.skill_md(hub.skills.latest(s, tenant_of(hub), slug))
    assert bob.get(f"/skills/{slug}/SKILL.md", params={"version": "9.9.9"}).status_code == 404
    assert bob.get(f"/skills/{slug}/SKILL.md", params={"version": "v1"}).status_code == 422


def test_the_zip_unzips_to_a_skill_md_that_parses_back_to_the_same_skill(bob, published):  # type: ignore[no-untyped-def]
    slug = slug_with(bob, "docker")
    r = bob.get(f"/skills/{slug}/archive.zip")
    assert r.status_code == 200 and r.headers["content-type"] == "application/zip"
    assert (
        r.headers["content-disposition"].startswith("attachment;")
        and f"{slug}.zip" in r.headers["content-disposition"]
    )
    with zipfile.ZipFile(io.BytesIO(r.content)) as z:
        assert z.namelist() == [f"{slug}/SKILL.md"]
        doc = parse(z.read(f"{slug}/SKILL.md").decode())
    skill = bob.get(f"/skills/{slug}").json()
    assert (doc.name, doc.description, doc.body) == (skill["name"], skill["description"], skill["body"])
    assert doc.metadata["version"] == "1.0.0" and doc.metadata["source_cluster"] == skill["source_cluster_id"]
    assert bob.get(f"/skills/{slug}/archive.zip").content == r.content  # deterministic bytes


def test_history_lists_evolution_records_newest_first(hub, bob, published):  # type: ignore[no-untyped-def]
    slug = slug_with(bob, "docker")
    first = bob.get(f"/skills/{slug}/history").json()
    assert [(r["trigger"], r["status"], r["new_version"]) for r in first] == [
        ("crystallize", "published", "1.0.0")
    ]
    assert len(first[0]["memory_ids"]) >= 5 and first[0]["finished_at"]
    name = bob.get(f"/skills/{slug}").json()["name"]
    upload = {**FILES, "SKILL.md": render(SkillDoc(name, "by hand", "## Steps\n\n1. a\n", {}))}
    assert bob.post("/skills", json={"files": upload}).status_code == 201
    history = bob.get(f"/skills/{slug}/history").json()
    assert [r["trigger"] for r in history] == ["upload", "crystallize"]
    assert (history[0]["old_version"], history[0]["new_version"]) == ("1.0.0", "1.1.0")
    assert "bob" in history[0]["detail"]
    assert len(bob.get(f"/skills/{slug}/history", params={"limit": 1}).json()) == 1
    assert bob.get(f"/skills/{slug}/history", params={"limit": 0}).status_code == 422
    assert bob.get("/skills/no-such-skill/history").status_code == 404


# --- upload --------------------------------------------------------------------------------------------


def test_an_uploaded_folder_round_trips_through_the_zip(bob):  # type: ignore[no-untyped-def]
    r = bob.post("/skills", json={"files": FILES})
    assert r.status_code == 201, r.text
    result = r.json()
    skill = result["skill"]
    assert (skill["slug"], skill["version"], result["previous_version"]) == (
        "release-checklist",
        "1.0.0",
        None,
    )
    assert skill["files"] == ["reference/notes.md", "scripts/check.sh"] and skill["score"] is None
    assert skill["categories"] == ["release", "python"] and skill["source_cluster_id"] is None
    z = zipfile.ZipFile(io.BytesIO(bob.get("/skills/release-checklist/archive.zip").content))
    got = {n.split("/", 1)[1]: z.read(n).decode() for n in z.namelist()}
    assert set(got) == set(FILES)
    assert {p: got[p] for p in FILES if p != "SKILL.md"} == {
        p: c for p, c in FILES.items() if p != "SKILL.md"
    }
    sent, back = parse(FILES["SKILL.md"]), parse(got["SKILL.md"])
    assert (back.name, back.description, back.body) == (sent.name, sent.description, sent.body)
    assert back.metadata["categories"] == sent.metadata["categories"]
    hits = bob.post("/skills/search", json={"query": "release checklist for a python package"}).json()
    assert hits[0]["slug"] == "release-checklist"


def test_a_zip_upload_of_an_exported_archive_becomes_the_next_version(bob):  # type: ignore[no-untyped-def]
    assert bob.post("/skills", json={"files": FILES}).status_code == 201
    archive = bob.get("/skills/release-checklist/archive.zip").content
    r = bob.post("/skills", content=archive, headers={"Content-Type": "application/zip"})
    assert r.status_code == 201, r.text
    assert (r.json()["skill"]["version"], r.json()["previous_version"]) == ("1.1.0", "1.0.0")
    assert r.json()["skill"]["files"] == ["reference/notes.md", "scripts/check.sh"]
    flat = zipped({p: c.encode() for p, c in FILES.items()})  # SKILL.md at the zip's root works too
    r = bob.post("/skills", content=flat, headers={"Content-Type": "application/zip"})
    assert r.json()["skill"]["version"] == "1.2.0"
    assert bob.get("/skills/release-checklist").json()["versions"] == ["1.2.0", "1.1.0", "1.0.0"]


def test_uploading_a_published_slug_bumps_its_minor_version(hub, bob, published):  # type: ignore[no-untyped-def]
    slug = slug_with(bob, "pytest")
    text = render(SkillDoc("Anything", "hand-written", "## Steps\n\n1. use function scope\n", {"slug": slug}))
    r = bob.post("/skills", json={"files": {"SKILL.md": text}}).json()
    assert (r["skill"]["slug"], r["skill"]["version"], r["previous_version"]) == (slug, "1.1.0", "1.0.0")
    assert r["skill"]["versions"] == ["1.1.0", "1.0.0"]
    found = bob.post("/skills/search", json={"query": "hand-written use function scope", "limit": 50}).json()
    assert [h["version"] for h in found if h["slug"] == slug] == ["1.1.0"]


def test_an_uploaded_versions_files_survive_the_engines_next_revision(hub, bob, published):  # type: ignore[no-untyped-def]
    slug = slug_with(bob, "postgres")
    steps = "## Steps\n\n1. set lock_timeout\n"
    text = render(SkillDoc("x", "by hand", steps, {"slug": slug}, {"license": "MIT"}))
    files = {
        "SKILL.md": text,
        "scripts/blockers.sql": "SELECT pg_blocking_pids(pid) FROM pg_stat_activity;\n",
    }
    assert bob.post("/skills", json={"files": files}).json()["skill"]["version"] == "1.1.0"
    cluster = bob.get(f"/skills/{slug}").json()["source_cluster_id"]  # of the latest: the upload has none
    assert cluster is None
    cluster = bob.get(f"/skills/{slug}", params={"version": "1.0.0"}).json()["source_cluster_id"]
    hub.skills.verify = lambda doc, members: evolve.Verdict(True, 0.99, "")
    with hub.db.session() as s:
        assert (
            hub.skills.evolve_cluster(s, tenant_of(hub), uuid.UUID(cluster), "recrystallize") == "published"
        )
    revised = bob.get(f"/skills/{slug}").json()
    assert (revised["version"], revised["files"]) == ("1.2.0", ["scripts/blockers.sql"])
    assert revised["source_cluster_id"] == cluster and revised["description"] != "by hand"
    z = zipfile.ZipFile(io.BytesIO(bob.get(f"/skills/{slug}/archive.zip").content))
    assert z.read(f"{slug}/scripts/blockers.sql").decode() == files["scripts/blockers.sql"]
    assert parse(z.read(f"{slug}/SKILL.md").decode()).extra == {"license": "MIT"}  # its front matter too


def test_uploaded_text_is_redacted_before_it_is_stored(hub, bob):  # type: ignore[no-untyped-def]
    files = {
        "SKILL.md": render(SkillDoc("Deploy", "Mail ops@example.com first", "## Steps\n\n1. deploy\n", {})),
        "scripts/deploy.sh": "export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz123456\n",
    }
    r = bob.post("/skills", json={"files": files})
    assert r.status_code == 201 and r.json()["redacted"]
    md = bob.get("/skills/deploy/SKILL.md").text
    z = zipfile.ZipFile(io.BytesIO(bob.get("/skills/deploy/archive.zip").content))
    script = z.read("deploy/scripts/deploy.sh").decode()
    assert "ops@example.com" not in md and "<EMAIL_ADDRESS>" in md
    assert "sk-proj" not in script and "OPENAI_API_KEY=<" in script
    with hub.db.session() as s:
        assert "sk-proj" not in s.scalar(select(SkillFile.content))


BAD_PATHS = ["../evil.sh", "/etc/passwd", "scripts/../../x", ".env", "scripts/.hidden", "a\\b", "C:/x"]
BAD_PATHS += ["scripts//x", "./x", "scripts/x.", " x", "nul\x00.sh"]


@pytest.mark.parametrize("path", BAD_PATHS)
def test_unsafe_paths_are_refused_and_nothing_is_stored(hub, bob, path):  # type: ignore[no-untyped-def]
    before = stored(hub)
    r = bob.post("/skills", json={"files": {**FILES, path: "x"}})
    assert r.status_code == 422 and r.json()["error"] == "validation_error", r.text
    if "\x00" not in path:  # zipfile itself cuts a name at NUL
        r = bob.post("/skills", content=zipped({"SKILL.md": SKILL.encode(), path: b"x"}), headers=ZIP)
        assert r.status_code == 422, r.text
    assert stored(hub) == before


ZIP = {"Content-Type": "application/zip"}


@pytest.mark.parametrize(
    ("files", "detail"),
    [
        ({"README.md": "x"}, "SKILL.md"),
        ({"SKILL.md": "no front matter"}, "front matter"),
        ({"SKILL.md": "---\ndescription: d\n---\nbody"}, "name"),
        ({"SKILL.md": "---\nname: x\nmetadata: {categories: 3}\n---\nbody"}, "categories"),
        ({"SKILL.md": SKILL, "scripts": "x", "scripts/run.sh": "y"}, "folder"),
        ({"SKILL.md": SKILL, "A.md": "x", "a.md": "y"}, "case"),
        ({"SKILL.md": SKILL, "bin.dat": "a\x00b"}, "binary"),
    ],
)
def test_invalid_skills_are_422_and_store_nothing(hub, bob, files, detail):  # type: ignore[no-untyped-def]
    before = stored(hub)
    r = bob.post("/skills", json={"files": files})
    assert r.status_code == 422 and detail in r.json()["detail"], r.text
    assert stored(hub) == before


def test_zip_slip_links_garbage_and_binary_zips_are_refused(hub, bob):  # type: ignore[no-untyped-def]
    before = stored(hub)
    cases = [
        zipped({"skill/SKILL.md": SKILL.encode(), "skill/../../evil.sh": b"rm -rf /"}),
        zipped({"SKILL.md": SKILL.encode()}, link="scripts/passwd"),
        zipped({"SKILL.md": SKILL.encode(), "logo.png": b"\x89PNG\r\n\x1a\n\xff\xfe"}),
        zipped({"SKILL.md": SKILL.encode(), "a.txt": b"1"}),  # the control case: accepted
        b"PK\x03\x04 this is not a zip",
    ]
    codes = [bob.post("/skills", content=c, headers=ZIP).status_code for c in cases]
    assert codes == [422, 422, 422, 201, 422]
    assert stored(hub)[0] == before[0] + 1
    assert (
        bob.post("/skills", content=b"{not json", headers={"Content-Type": "application/json"}).status_code
        == 422
    )
    assert bob.post("/skills", json={"files": {"SKILL.md": SKILL}, "extra": 1}).status_code == 422


def test_too_many_files_or_bytes_are_413_and_store_nothing(hub, bob):  # type: ignore[no-untyped-def]
    before = stored(hub)
    many = {"SKILL.md": SKILL, **{f"refs/{i}.md": "x" for i in range(bundle.MAX_FILES)}}
    r = bob.post("/skills", json={"files": many})
    assert r.status_code == 413 and r.json()["error"] == "payload_too_large"
    big = {"SKILL.md": SKILL, "refs/big.md": "x" * (bundle.MAX_TOTAL_BYTES + 1)}
    assert bob.post("/skills", json={"files": big}).status_code == 413
    # A small zip that inflates past the limit (its declared sizes are checked before inflating).
    bomb = zipped({"SKILL.md": SKILL.encode(), "refs/big.md": b"x" * (bundle.MAX_TOTAL_BYTES + 1)})
    assert len(bomb) < 100_000
    assert bob.post("/skills", content=bomb, headers=ZIP).status_code == 413
    assert stored(hub) == before


def test_the_body_is_read_only_up_to_its_cap(hub, bob, monkeypatch):  # type: ignore[no-untyped-def]
    from ultron.skills import router

    monkeypatch.setattr(router, "MAX_UPLOAD_BODY", 1000)
    before = stored(hub)
    r = bob.post("/skills", json={"files": {**FILES, "refs/pad.md": "x" * 1000}})
    assert r.status_code == 413 and "1000 bytes" in r.json()["detail"]
    assert stored(hub) == before


def test_a_zip_that_lies_about_its_sizes_is_still_bounded():
    data = bytearray(zipped({"SKILL.md": SKILL.encode(), "big.md": b"y" * (bundle.MAX_TOTAL_BYTES + 10)}))
    # Rewrite big.md's declared size in the central directory to 1 byte: inflating must still stop.
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as z:
        info = z.getinfo("big.md")
    central = data.rfind(b"PK\x01\x02", 0, data.rfind(b"big.md"))
    data[central + 24 : central + 28] = (1).to_bytes(4, "little")
    assert info.file_size > bundle.MAX_TOTAL_BYTES
    with pytest.raises((PayloadTooLarge, ValidationFailed)):  # the CRC check or the read bound
        bundle.read_zip(bytes(data))


# --- tenants -------------------------------------------------------------------------------------------


def test_another_tenant_sees_nothing_and_its_uploads_stay_its_own(hub, client, keys, published):  # type: ignore[no-untyped-def]
    eve = {"Authorization": f"Bearer {keys['eve']}"}
    bob = {"Authorization": f"Bearer {keys['bob']}"}
    slug = next(s["slug"] for s in client.get("/skills", headers=bob).json() if "docker" in s["slug"])
    cluster = client.get("/clusters", headers=bob).json()[0]["id"]
    assert client.post("/skills/search", json={"query": "docker build cache"}, headers=eve).json() == []
    assert client.get("/skills", params={"status": "all"}, headers=eve).json() == []
    for path in ("", "/SKILL.md", "/archive.zip", "/history"):
        assert client.get(f"/skills/{slug}{path}", headers=eve).status_code == 404, path
    assert client.get("/clusters", headers=eve).json() == []
    assert client.get(f"/clusters/{cluster}", headers=eve).status_code == 404
    name = client.get(f"/skills/{slug}", headers=bob).json()["name"]
    mine = {"SKILL.md": render(SkillDoc(name, "eve's own", "## Steps\n\n1. x\n", {}))}
    r = client.post("/skills", json={"files": mine}, headers=eve).json()
    assert (r["skill"]["slug"], r["skill"]["version"]) == (slug, "1.0.0")
    assert client.get(f"/skills/{slug}", headers=bob).json()["versions"] == ["1.0.0"]
    assert client.get(f"/skills/{slug}", headers=bob).json()["description"] != "eve's own"
    assert client.get("/skills", headers={}).status_code == 401


# --- clusters ------------------------------------------------------------------------------------------


def test_clusters_are_listed_largest_first_with_readiness(hub, bob, stocked):  # type: ignore[no-untyped-def]
    before = bob.get("/clusters").json()
    assert [c["member_count"] for c in before] == sorted((c["member_count"] for c in before), reverse=True)
    with hub.db.session() as s:
        ready = {str(i) for i in hub.clusters.get_clusters_ready_to_crystallize(s, tenant_of(hub), 100)}
    assert len(ready) == 3 and {c["id"] for c in before if c["readiness"] == "crystallize"} == ready
    assert run_evolution_cycle(hub.db, hub.skills)["published"] == 3
    after = bob.get("/clusters").json()
    assert all(c["readiness"] is None for c in after)
    assert sum(1 for c in after if c["skill_slug"]) == 3
    docker = next(c for c in after if "docker" in (c["skill_slug"] or ""))
    for text in (
        "docker build cache lost because the pip install layer comes after COPY of the source",
        "docker pip install layer cache invalidated by a changed requirements file order",
        "docker build cache for pip install layers is missed on CI without --cache-from",
    ):
        stocked.upload_memory(text)
    build_worker(hub).run_cycle(("cluster",), quiet=True)  # the worker's tick: their clusters
    listed = {c["id"]: c for c in bob.get("/clusters").json()}
    with hub.db.session() as s:
        again = {str(i) for i in hub.clusters.get_clusters_ready_to_recrystallize(s, tenant_of(hub), 100)}
    assert {i for i, c in listed.items() if c["readiness"] == "recrystallize"} == again
    assert docker["id"] in again
    with hub.db.session() as s:  # backing off: nothing to do until next_attempt_at
        s.get(KnowledgeCluster, (uuid.UUID(docker["id"]), tenant_of(hub))).next_attempt_at = datetime.now(
            UTC
        ) + timedelta(hours=1)
    assert bob.get(f"/clusters/{docker['id']}").json()["readiness"] is None
    assert bob.get("/clusters", params={"limit": 1, "offset": 1}).json()[0]["id"] == list(listed)[1]


def test_a_cluster_in_full_shows_its_members_and_never_a_private_memory(hub, bob, published):  # type: ignore[no-untyped-def]
    private = published.upload_memory(
        "docker build cache misses when pip install runs after COPY . in the Dockerfile", scope="private"
    )
    clusters = bob.get("/clusters").json()
    docker = next(c for c in clusters if "docker" in (c["skill_slug"] or ""))
    one = bob.get(f"/clusters/{docker['id']}").json()
    # Skills are tenant-wide, so a private memory joins no cluster: the count did not move.
    assert one["member_count"] == one["members_at_last_version"] == docker["member_count"]
    assert one["skill"]["slug"] == docker["skill_slug"] and one["skill"]["version"] == "1.0.0"
    assert one["superseded_slugs"] == []
    ids = [m["id"] for m in one["members"]]
    assert len(ids) == one["member_count"] and str(private.id) not in ids
    assert [m["similarity"] for m in one["members"]] == sorted(
        (m["similarity"] for m in one["members"]), reverse=True
    )
    assert all(m["summary"] and m["memory_type"] for m in one["members"])
    theirs = published.get_cluster(docker["id"])  # not even its owner sees it in a cluster
    assert str(private.id) not in [str(m.id) for m in theirs.members]
    assert bob.get("/clusters/not-a-uuid").status_code == 422
    assert bob.get("/clusters/00000000-0000-0000-0000-000000000000").status_code == 404


def test_the_routes_are_in_the_openapi_schema(client):  # type: ignore[no-untyped-def]
    paths = client.get("/openapi.json").json()["paths"]
    for p in ("/skills", "/skills/search", "/skills/{slug}", "/skills/{slug}/SKILL.md"):
        assert p in paths
    assert {
        "/skills/{slug}/archive.zip",
        "/skills/{slug}/history",
        "/clusters",
        "/clusters/{cluster_id}",
    } <= set(paths)
    assert set(paths["/skills"]["post"]["requestBody"]["content"]) == {"application/json", "application/zip"}
    assert json.dumps(paths)  # serializable


def test_an_uploaded_skills_own_front_matter_survives_export_and_new_versions(hub, bob):  # type: ignore[no-untyped-def]
    text = (
        "---\nname: Release Checklist\ndescription: Cut a release\nlicense: Apache-2.0\n"
        "allowed-tools: Bash(git:*) Read\nreviewed: 2026-01-31\nowner: release-team@example.com\n"
        'metadata: {"author": "ops", "categories": ["release"], "tags": ["python", "pypi"]}\n---\n\n'
        "## Steps\n\n1. Run the tests.\n2. Tag and push.\n"
    )
    r = bob.post("/skills", json={"files": {"SKILL.md": text}})
    assert r.status_code == 201, r.text
    back = parse(bob.get("/skills/release-checklist/SKILL.md").text)
    assert back.extra == {
        "license": "Apache-2.0",
        "allowed-tools": "Bash(git:*) Read",
        "reviewed": "2026-01-31",  # a YAML date, kept as its text
        "owner": "<EMAIL_ADDRESS>",  # front matter is redacted like the rest
    }
    assert back.metadata["author"] == "ops" and back.metadata["tags"] == ["python", "pypi"]
    assert back.metadata["categories"] == ["release"] and back.metadata["version"] == "1.0.0"
    # the zip carries the same SKILL.md, and uploading it again keeps every key in the next version
    archive = bob.get("/skills/release-checklist/archive.zip").content
    r = bob.post("/skills", content=archive, headers={"Content-Type": "application/zip"})
    assert r.json()["skill"]["version"] == "1.1.0"
    again = parse(bob.get("/skills/release-checklist/SKILL.md").text)
    assert again.extra == back.extra and again.metadata == {**back.metadata, "version": "1.1.0"}
    # an older version still exports what it was uploaded with
    first = bob.get("/skills/release-checklist/SKILL.md", params={"version": "1.0.0"}).text
    assert parse(first).extra == back.extra and parse(first).metadata["version"] == "1.0.0"
