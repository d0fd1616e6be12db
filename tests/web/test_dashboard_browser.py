"""The dashboard in a real browser: Debian's Chromium, driven by Playwright, against a live hub."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from ultron.bench.demo import DEMO_MEMORIES
from ultron.bench.screenshots import VIEWPORT, chromium_path, launch
from ultron.db.models import ImportJob, Memory
from ultron.memory.schemas import UploadRequest
from ultron.skills import evolve
from ultron.skills.format import SkillDoc, Version
from ultron.tenancy import authenticate, local_actor

pytestmark = pytest.mark.skipif(
    chromium_path() is None,
    reason="no Chromium at /usr/bin/chromium: install Debian's package (apt-get install -y chromium) to run "
    "the browser tests",
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as p:
        b = launch(p)
        yield b
        b.close()


@pytest.fixture()
def page(browser):  # type: ignore[no-untyped-def]
    context = browser.new_context(viewport=VIEWPORT)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    # Refused API calls (a wrong key) are logged as failed loads, which is expected; anything else
    # (a blocked script or style under the Content-Security-Policy, a JS error) is not.
    pg.on(
        "console",
        lambda msg: (
            errors.append(msg.text)
            if msg.type == "error" and "Failed to load resource" not in msg.text
            else None
        ),
    )
    pg.set_default_timeout(15_000)
    yield pg
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def _sign_in(page, url: str, key: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{url}/dashboard")
    page.wait_for_selector("#signin:not([hidden])")
    page.fill("#signin-key", key)
    page.click("#signin-form button[type=submit]")
    page.wait_for_selector("#app:not([hidden])")


def _db_memory(hub, memory_id) -> Memory:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return s.execute(select(Memory).where(Memory.id == memory_id)).scalar_one()


def test_sign_in_keeps_the_key_in_session_storage_only(page, live_hub, demo):
    page.goto(f"{live_hub}/dashboard")
    page.wait_for_selector("#signin:not([hidden])")
    page.fill("#signin-key", "ult_not-a-real-key")
    page.click("#signin-form button[type=submit]")
    page.wait_for_selector("#signin-error:has-text('unknown API key')")
    assert page.is_hidden("#app")
    _sign_in(page, live_hub, demo.keys["cursor-agent"])
    assert page.text_content("[data-testid=agent-name]") == "cursor-agent"
    assert page.evaluate("sessionStorage.getItem('ultron.apiKey')") == demo.keys["cursor-agent"]
    assert page.evaluate("localStorage.length") == 0
    page.click("[data-testid=sign-out]")
    page.wait_for_selector("#signin:not([hidden])")
    assert page.evaluate("sessionStorage.getItem('ultron.apiKey')") is None


def test_every_page_shows_the_hubs_data(page, live_hub, demo):
    _sign_in(page, live_hub, demo.keys["claude-code"])
    page.wait_for_selector("[data-testid=activity-chart] rect")
    assert page.text_content("[data-testid=kpi-total] .value") == str(len(DEMO_MEMORIES))
    assert page.text_content("[data-testid=kpi-pinned] .value") == "1"
    assert page.text_content("[data-testid=by-tier] [data-key=hot] .num") == "2"
    assert "worker" in page.text_content("[data-testid=worker]").lower()

    page.click("#nav a[data-page=memories]")
    page.wait_for_selector("#memory-rows tr[data-id]")
    assert page.locator("#memory-rows tr[data-id]").count() == len(DEMO_MEMORIES)
    assert (
        page.text_content("[data-testid=memory-count]")
        == f"1–{len(DEMO_MEMORIES)} of {len(DEMO_MEMORIES)} memories"
    )
    page.select_option("select[data-filter=tier]", "hot")
    # A locator wait, not wait_for_function: the page's Content-Security-Policy forbids eval.
    page.wait_for_selector("#memory-rows tr[data-id]:nth-child(2)")
    page.wait_for_selector("#memory-rows tr[data-id]:nth-child(3)", state="detached")
    tiers = page.locator("#memory-rows tr[data-id] .chip.tier-hot")
    assert tiers.count() == page.locator("#memory-rows tr[data-id]").count() == 2

    page.click("#nav a[data-page=map]")
    page.wait_for_selector("[data-testid=map-svg] circle.node")
    assert page.locator("[data-testid=map-svg] circle.node").count() == len(DEMO_MEMORIES) - 1
    page.click(f"[data-testid=map-svg] circle.node[data-id='{demo.memory_ids[2]}']")
    page.wait_for_selector("#drawer [data-testid=memory-title]")
    assert "env" in page.text_content("#drawer [data-testid=memory-title]")

    page.click("#nav a[data-page=skills]")
    # The demo's memories are too spread out for any cluster to reach the crystallization threshold.
    page.wait_for_selector("[data-testid=skills-empty]")
    assert "reaches 5 members" in page.text_content("[data-testid=skills-empty]")
    page.click("#nav a[data-page=trajectories]")
    page.wait_for_selector(".page-head h1:has-text('Trajectories')")
    page.click("#nav a[data-page=settings]")
    page.wait_for_selector("[data-testid=settings-table] tr")
    assert "embedding_provider" in page.text_content("[data-testid=settings-table]")


def test_search_shows_score_components(page, live_hub, demo):
    _sign_in(page, live_hub, demo.keys["claude-code"])
    page.click("#nav a[data-page=search]")
    page.fill("[data-testid=search-q]", "postgres connection refused docker")
    page.click("[data-testid=search-go]")
    page.wait_for_selector(".result")
    first = page.locator(".result").first
    assert "Postgres connection refused" in first.text_content()
    for component in ("relevance", "vector", "full text", "tier boost", "hotness"):
        assert first.locator(f"[data-component='{component}'] .fill").count() == 1
    first.click()
    page.wait_for_selector("#drawer [data-testid=memory-title]")
    assert "Postgres connection refused" in page.text_content("#drawer [data-testid=memory-title]")


def test_open_a_memory_and_pin_it_without_counting_hits(page, live_hub, hub, demo):
    target = demo.memory_ids[5]
    hub.hits.flush()
    before = _db_memory(hub, target)
    assert not before.pinned
    _sign_in(page, live_hub, demo.keys["claude-code"])
    page.click("#nav a[data-page=memories]")
    page.click(f"#memory-rows tr[data-id='{target}']")
    page.wait_for_selector("#drawer [data-testid=contributions] .contrib")
    assert page.text_content("#drawer [data-testid=memory-title]").startswith(
        "Kubernetes pod CrashLoopBackOff"
    )
    page.click("#drawer .tabs button[data-level=full]")
    assert "ConfigMap" in page.text_content("#drawer [data-testid=memory-text]")
    assert page.locator("#drawer [data-testid=hit-chart]").count() == 1
    page.click("#drawer [data-testid=pin]")
    page.wait_for_selector("#drawer [data-testid=pinned-chip]")
    page.wait_for_selector(f"#memory-rows tr[data-id='{target}'] td.summary:has-text('★')")
    hub.hits.flush()
    after = _db_memory(hub, target)
    assert after.pinned and after.hit_count == before.hit_count


def test_edit_archive_and_delete(page, live_hub, hub, demo):
    target = demo.memory_ids[6]
    _sign_in(page, live_hub, demo.keys["claude-code"])
    page.goto(f"{live_hub}/dashboard#/memories/{target}")
    page.wait_for_selector("#drawer [data-testid=edit]")
    page.click("#drawer [data-testid=edit]")
    page.fill("[data-testid=edit-form] input[name=tags]", "http, retry, backoff")
    page.click("[data-testid=edit-form] button[type=submit]")
    page.wait_for_selector("#drawer [data-testid=archive]")
    assert _db_memory(hub, target).tags == ["http", "retry", "backoff"]
    page.click("#drawer [data-testid=archive]")
    page.wait_for_selector("#drawer .chip.archived")
    assert _db_memory(hub, target).status == "archived"
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#drawer [data-testid=delete]")
    page.wait_for_selector("#drawer", state="hidden")
    with hub.db.session() as s:
        assert s.scalars(select(Memory).where(Memory.id == target)).first() is None


def test_an_open_loopback_hub_skips_sign_in(page, hub):
    from ultron.api.app import create_app
    from ultron.web.serve import LiveServer

    with hub.db.session() as s:
        hub.memory.upload(s, local_actor(s), UploadRequest(content="nginx 502 after upstream restart"))
    with LiveServer(create_app(hub, allow_open=True)) as url:
        page.goto(f"{url}/dashboard#/memories")
        page.wait_for_selector("#memory-rows tr[data-id]")
        assert page.is_hidden("#signin")
        assert page.text_content("[data-testid=agent-name]") == "local"
        assert "nginx 502" in page.text_content("#memory-rows")


CHAT_EXPORT = """User: How do I stop git from asking for my password on every push over HTTPS?
Assistant: Use a credential helper (git config --global credential.helper store) or switch the remote to SSH.
User: Switched to SSH, works now.
---
User: Why does my docker build ignore .dockerignore?
Assistant: It must sit in the build context's root; you passed a subfolder as the context.
User: Moved it, the image is 300 MB smaller.
"""


def test_import_a_file_and_watch_its_progress(page, live_hub, demo):
    import httpx

    key = demo.keys["claude-code"]
    features = httpx.get(f"{live_hub}/api/dashboard/features", headers={"Authorization": f"Bearer {key}"})
    if not features.json()["imports"]:
        pytest.skip("this hub has no import endpoints yet")
    _sign_in(page, live_hub, demo.keys["claude-code"])
    page.click("#nav a[data-page=trajectories]")
    page.wait_for_selector("[data-testid=import-go]")
    page.select_option("[data-testid=import-kind]", "text")
    page.set_input_files(
        "[data-testid=import-file]",
        files=[{"name": "chats.txt", "mimeType": "text/plain", "buffer": CHAT_EXPORT.encode()}],
    )
    page.click("[data-testid=import-go]")
    page.wait_for_selector("[data-testid=import-progress][data-status=done]", timeout=30_000)
    progress = page.locator("[data-testid=import-progress]").first
    assert progress.get_attribute("data-progress") == "100"
    assert "2 of 2 conversations" in progress.text_content()
    page.click("[data-testid=import-review]")
    page.wait_for_selector("[data-testid=import-review-items] tr")
    assert page.locator("[data-testid=import-review-items] tr").count() == 2


def _features(url: str, key: str) -> dict[str, bool]:
    import httpx

    return httpx.get(f"{url}/api/dashboard/features", headers={"Authorization": f"Bearer {key}"}).json()


def test_pause_and_resume_an_import_from_the_page(page, live_hub, hub, demo):
    key = demo.keys["claude-code"]
    if not _features(live_hub, key)["imports"]:
        pytest.skip("this hub has no import endpoints yet")
    # Queued by the service but not run: it stays at 0 of 2 until someone advances it, so the page has
    # time to pause it. Resuming through the page starts the runner, as POST /imports/{id}/resume does.
    with hub.db.session() as s:
        job = hub.ingestion.imports.start(
            s, authenticate(s, key), "text", "slow-chats.txt", CHAT_EXPORT.encode()
        )
    row = f"[data-testid=import-jobs] tr[data-job='{job.id}']"
    _sign_in(page, live_hub, key)
    page.click("#nav a[data-page=trajectories]")
    page.wait_for_selector(f"{row} [data-testid=import-progress][data-status=running]")
    assert "0 of 2 conversations · running" in page.text_content(f"{row} [data-testid=import-progress]")
    assert page.locator(f"{row} [data-testid=import-resume]").count() == 0

    page.click(f"{row} [data-testid=import-pause]")
    page.wait_for_selector(f"{row} [data-testid=import-progress][data-status=paused]")
    assert "0 of 2 conversations · paused" in page.text_content(f"{row} [data-testid=import-progress]")
    assert page.locator(f"{row} [data-testid=import-pause]").count() == 0
    with hub.db.session() as s:
        assert s.scalars(select(ImportJob).where(ImportJob.id == job.id)).one().status == "paused"

    page.click(f"{row} [data-testid=import-resume]")
    page.wait_for_selector(f"{row} [data-testid=import-progress][data-status=done]", timeout=30_000)
    progress = page.locator(f"{row} [data-testid=import-progress]")
    assert progress.get_attribute("data-progress") == "100"
    assert "2 of 2 conversations · done" in progress.text_content()
    assert page.locator(f"{row} [data-testid=import-pause], {row} [data-testid=import-resume]").count() == 0
    with hub.db.session() as s:
        assert s.scalars(select(ImportJob).where(ImportJob.id == job.id)).one().status == "done"


def _skill(hub, slug: str, version: str | None = None):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        skill = hub.skills.latest(s, local_actor(s).tenant_id, slug, version)
        return skill, hub.skills.skill_md(skill)


def test_skills_page_shows_a_skill_its_versions_history_and_download(page, live_hub, hub, skilled):
    _sign_in(page, live_hub, skilled.keys["cursor-agent"])
    page.click("#nav a[data-page=skills]")
    page.wait_for_selector("[data-testid=skills-table] tr[data-slug]")
    rows = page.locator("[data-testid=skills-table] tr[data-slug]")
    slugs = [rows.nth(i).get_attribute("data-slug") for i in range(rows.count())]
    assert len(slugs) == 3
    assert "null" not in page.inner_text("main")  # an absent optional element is not written as text
    docker = next(slug for slug in slugs if "docker" in slug)
    latest, latest_md = _skill(hub, docker)
    docker_row = f"[data-testid=skills-table] tr[data-slug='{docker}']"
    assert latest.name in page.text_content(docker_row) and "v1.1.0" in page.text_content(docker_row)

    page.click(docker_row)
    page.wait_for_selector("[data-testid=skill-md][data-version='1.1.0'] h2")
    assert page.text_content("[data-testid=skill-name]") == latest.name
    md = "[data-testid=skill-md]"
    assert page.locator(f"{md} h1").all_text_contents() == [latest.name]
    assert page.locator(f"{md} h2").all_text_contents() == ["When to use", "Symptoms and fixes"]
    # the offline skill: one entry per distinct fix of the 8 members, no numbered steps
    fixes = [e for e in evolve.entries_of(latest.body) if evolve.FIX in e]
    assert page.locator(f"{md} li:has-text('Fix that worked')").count() == len(fixes) >= 5
    assert page.locator(f"{md} ol > li").count() == 0
    assert page.locator(f"{md} .cite").count() > len(fixes) and "##" not in page.text_content(md)
    assert "version: 1.1.0" in page.text_content("[data-testid=skill-front-matter]")
    history = page.locator("[data-testid=skill-history] tr[data-record]")
    assert history.count() == 2
    assert history.nth(0).get_attribute("data-status") == "published"
    assert (
        "recrystallize" in history.nth(0).text_content() and "1.0.0 → 1.1.0" in history.nth(0).text_content()
    )
    # the verifier's scores, old -> new (the demo's first docker version scores 1.00 since the cluster's
    # refine pass moved the image-worker memory out of it: 0.90 before)
    assert "1.00 → 1.00" in history.nth(0).text_content()
    assert "crystallize" in history.nth(1).text_content() and "1.0.0" in history.nth(1).text_content()

    with page.expect_download() as download:
        page.click("[data-testid=skill-download]")
    assert download.value.suggested_filename == "SKILL.md"
    assert Path(download.value.path()).read_text(encoding="utf-8") == latest_md

    page.select_option("[data-testid=skill-version]", "1.0.0")
    page.wait_for_selector(f"{md}[data-version='1.0.0'] h2")
    older, older_md = _skill(hub, docker, "1.0.0")
    assert "version: 1.0.0" in page.text_content("[data-testid=skill-front-matter]")
    older_fixes = [e for e in evolve.entries_of(older.body) if evolve.FIX in e]
    # fewer than the revision's: two of the first members shared a fix, and the follow-ups added three
    assert page.locator(f"{md} li:has-text('Fix that worked')").count() == len(older_fixes) < len(fixes)
    assert "latest is v1.1.0" in page.text_content(".page-head")
    with page.expect_download() as download:
        page.click("[data-testid=skill-download]")
    assert Path(download.value.path()).read_text(encoding="utf-8") == older_md != latest_md
    page.click("[data-testid=skill-versions] [data-version='1.1.0']")
    page.wait_for_selector(f"{md}[data-version='1.1.0']")
    page.click("[data-testid=skills-back]")
    page.wait_for_selector("[data-testid=skills-table]")


def test_skill_md_is_rendered_as_text_never_as_html(page, live_hub, hub, skilled):
    body = "\n".join(
        [
            "# Hostile <b>skill</b>",
            "",
            "Text with <img src=x onerror=alert(1)> and <script>alert(2)</script> in it.",
            "Some **bold**, some *italic*, some `inline <code>` and a [doc link](https://example.com/docs).",
            "A [bad link](javascript:alert%283%29) and snake_case_words stay as they are.",
            "",
            "## Steps",
            "",
            "1. first",
            "   - nested <i>point</i>",
            "2. second",
            "",
            "```bash",
            "echo '<script>alert(4)</script>'",
            "```",
        ]
    )
    with hub.db.session() as s:
        tenant = local_actor(s).tenant_id
        doc = SkillDoc("Hostile skill", "a <b>description</b>", body, {"categories": ["test"]})
        hub.skills.save(s, tenant, "hostile-skill", Version(1, 0, 0), doc, 0.5, None)
    _sign_in(page, live_hub, skilled.keys["claude-code"])
    page.goto(f"{live_hub}/dashboard#/skills/hostile-skill")
    md = "[data-testid=skill-md]"
    page.wait_for_selector(f"{md} h2")
    assert page.locator(f"{md} img, {md} script, {md} b, {md} i").count() == 0
    assert page.text_content(f"{md} h1") == "Hostile <b>skill</b>"
    text = page.text_content(md)
    assert "<img src=x onerror=alert(1)>" in text and "<script>alert(2)</script>" in text
    assert page.text_content(f"{md} strong") == "bold" and page.text_content(f"{md} em") == "italic"
    assert page.text_content(f"{md} p code") == "inline <code>"
    assert page.get_attribute(f"{md} a", "href") == "https://example.com/docs"
    assert page.locator(f"{md} a").count() == 1 and "bad link (javascript:alert%283%29)" in text
    assert "snake_case_words" in text
    assert page.text_content(f"{md} ol > li > ul > li") == "nested <i>point</i>"
    assert page.text_content(f"{md} pre code") == "echo '<script>alert(4)</script>'"
    assert page.locator("[data-testid=skill-history]").count() == 0  # saved directly: no records
    assert "not crystallized" in page.text_content(".table-card")


def test_the_map_draws_clusters_and_links_their_skill(page, live_hub, skilled):
    import httpx

    key = skilled.keys["claude-code"]
    data = httpx.get(f"{live_hub}/api/dashboard/map", headers={"Authorization": f"Bearer {key}"}).json()
    docker = next(c for c in data["clusters"] if c["skill_slug"] and "docker" in c["skill_slug"])
    members = [n for n in data["nodes"] if n["cluster_id"] == docker["id"]]
    _sign_in(page, live_hub, key)
    page.click("#nav a[data-page=map]")
    page.wait_for_selector("[data-testid=map-svg] [data-testid=map-cluster]")
    drawn = sum(1 for c in data["clusters"] if sum(n["cluster_id"] == c["id"] for n in data["nodes"]) >= 2)
    assert page.locator("[data-testid=map-cluster]").count() == drawn >= 3
    # Named clusters are labelled where a label fits (the layout decides which), skilled ones with a ◆;
    # unnamed ones (italic) by their members' words (tests/web/test_dashboard_first_hour.py).
    named = {f"{'◆ ' if c['skill_slug'] else ''}{c['topic']}" for c in data["clusters"] if c["topic"]}
    labels = page.locator("[data-testid=map-cluster-label]:not(.unnamed)").all_text_contents()
    assert labels and all(any(n.startswith(label.rstrip("…")) for n in named) for label in labels), labels
    assert (
        page.locator(f"[data-testid=map-clusters] .cluster-row[data-cluster='{docker['id']}']").count() == 1
    )

    # no marker covers another (stop 28: two clusters' means fell close, one diamond took the other's clicks)
    box = "els => els.map(e => { const b = e.getBBox(); return [b.x, b.y, b.width] })"
    boxes = page.eval_on_selector_all("[data-testid=map-cluster]", box)
    for i, (x1, y1, w1) in enumerate(boxes):
        for x2, y2, w2 in boxes[i + 1 :]:
            distance = ((x1 + w1 / 2 - x2 - w2 / 2) ** 2 + (y1 + w1 / 2 - y2 - w2 / 2) ** 2) ** 0.5
            assert distance >= (w1 + w2) / 2, boxes

    page.click(f"[data-testid=map-cluster][data-cluster='{docker['id']}']")
    page.wait_for_selector("#drawer [data-testid=cluster-panel]")
    assert page.text_content("#drawer [data-testid=cluster-topic]") == docker["topic"]
    assert page.text_content("#drawer [data-testid=cluster-size]") == str(docker["member_count"])
    assert page.locator("#drawer [data-testid=cluster-members] tr[data-id]").count() == len(members)
    assert page.evaluate("location.hash") == f"#/map/{docker['id']}"
    page.click("#drawer [data-testid=cluster-skill]")
    page.wait_for_selector("[data-testid=skill-md] h2")
    assert page.text_content("[data-testid=skill-name]") == docker["skill_name"]
    assert page.is_hidden("#drawer")

    page.goto(f"{live_hub}/dashboard#/map/{docker['id']}")  # a link to a cluster opens its panel
    page.wait_for_selector("#drawer [data-testid=cluster-panel]")
    page.keyboard.press("Escape")
    page.uncheck("[data-testid=map-clusters-toggle]")
    assert page.is_hidden("[data-testid=map-cluster] >> nth=0")
