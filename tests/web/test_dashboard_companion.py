"""The similarity network and the brief simulation in headless Chromium (issue 19); each test saves a
screenshot under ULTRON_SCREENSHOT_DIR when set (they were looked at)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.web.conftest import auth
from tests.web.test_dashboard_browser import _sign_in, browser, page  # noqa: F401  (fixtures)

SHOTS = os.environ.get("ULTRON_SCREENSHOT_DIR")


def _shot(pg, name: str) -> None:  # type: ignore[no-untyped-def]
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


def test_network_api_links_similar_memories(client, demo):
    data = client.get("/api/dashboard/network", headers=auth(demo.keys["claude-code"])).json()
    assert data["nodes"] and data["min_similarity"] > 0
    ids = {n["id"] for n in data["nodes"]}
    assert data["edges"] and all(e["source"] in ids and e["target"] in ids for e in data["edges"])
    assert all(e["similarity"] >= data["min_similarity"] for e in data["edges"])
    assert (
        client.get("/api/dashboard/network?limit=0", headers=auth(demo.keys["claude-code"])).status_code
        == 422
    )


def test_network_page_draws_nodes_and_links(page, live_hub, demo):  # noqa: F811
    _sign_in(page, live_hub, demo.keys["claude-code"])
    page.click("#nav a[data-page=network]")
    page.wait_for_selector("[data-testid=network-svg] .net-node")
    assert page.locator(".net-node").count() >= 10
    assert page.locator(".net-edge").count() >= 1
    _shot(page, "network")
    page.locator(".net-node").first.click()
    page.wait_for_selector("#drawer [data-testid=memory-title]")


def test_brief_simulation_shows_items_with_bars(page, live_hub, demo):  # noqa: F811
    _sign_in(page, live_hub, demo.keys["claude-code"])
    page.click("#nav a[data-page=brief]")
    page.wait_for_selector("[data-testid=brief-item]")
    page.fill("[data-testid=brief-task]", "docker build is slow")
    page.fill("[data-testid=brief-budget]", "300")
    page.click("[data-testid=brief-run]")
    page.locator("[data-testid=brief-result] b", has_text="of 300 tokens").wait_for()
    items = page.locator("[data-testid=brief-item]")
    assert items.count() >= 1
    assert items.first.locator(".bar-row[data-key=tokens] .fill").count() == 1
    assert page.locator("[data-testid=brief-budget-bar]").count() == 1
    _shot(page, "brief")
