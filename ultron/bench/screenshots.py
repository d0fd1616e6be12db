"""`ultron bench screenshots DIR`: a PNG of every dashboard page, taken with headless Chromium.

Against a running hub (`--url`, `--api-key`), or against a throw-away hub on a fresh embedded database
filled with demo data (`--demo`). Uses Playwright for Python with the system's Chromium (Debian's
`chromium` package); it never downloads a browser.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from ultron.api.app import create_app
from ultron.bench.demo import seed_demo, spread_days
from ultron.config import Settings
from ultron.hub import Hub
from ultron.web.serve import LiveServer

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PAGES = ("overview", "memories", "memory-detail", "search", "map", "skills", "trajectories", "settings")
VIEWPORT = {"width": 1440, "height": 960}


def chromium_path() -> str | None:
    """The system Chromium, if installed (ULTRON_CHROMIUM overrides the lookup)."""
    for candidate in (os.environ.get("ULTRON_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def launch(playwright: Any) -> Any:
    path = chromium_path()
    if path is None:
        raise RuntimeError("no Chromium found: install Debian's package with `apt-get install -y chromium`")
    return playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)


def sign_in(page: Any, base_url: str, api_key: str | None) -> None:
    """Open the dashboard; sign in with the key when the hub asks for one."""
    page.goto(f"{base_url}/dashboard#/overview")
    page.wait_for_selector("#app:not([hidden]), #signin:not([hidden])")
    if page.is_visible("#signin"):
        if not api_key:
            raise RuntimeError("the hub asks for an API key: pass --api-key")
        page.fill("#signin-key", api_key)
        page.click("#signin-form button[type=submit]")
        page.wait_for_selector("#app:not([hidden])")


def capture(page: Any, base_url: str, out: Path, search_query: str) -> list[Path]:
    """Visit every page (and open one memory, one cluster, one skill; run one search); a PNG each."""
    shots: list[Path] = []

    def shot(name: str, full_page: bool = True) -> None:
        page.wait_for_timeout(250)  # let the last paint settle
        path = out / f"{len(shots) + 1:02d}-{name}.png"
        page.screenshot(path=str(path), full_page=full_page)
        shots.append(path)

    page.goto(f"{base_url}/dashboard#/overview")
    page.wait_for_selector("[data-testid=activity-chart]")
    shot("overview")
    page.goto(f"{base_url}/dashboard#/memories")
    page.wait_for_selector("#memory-rows tr[data-id]")
    shot("memories")
    page.click("#memory-rows tr[data-id]")
    page.wait_for_selector("[data-testid=memory-title]")
    page.wait_for_selector("[data-testid=contributions]")
    page.click(".tabs button[data-level=full]")
    shot("memory-detail", full_page=False)  # the drawer covers the viewport
    page.keyboard.press("Escape")
    page.goto(f"{base_url}/dashboard#/search")
    page.fill("[data-testid=search-q]", search_query)
    page.click("[data-testid=search-go]")
    page.wait_for_selector("[data-testid=score-bars]")
    shot("search")
    for name, selector in (
        ("map", "[data-testid=map-svg]"),
        ("skills", ".page-head h1"),
        ("trajectories", ".page-head h1"),
        ("settings", "[data-testid=settings-table] tr"),
    ):
        page.goto(f"{base_url}/dashboard#/{name}")
        page.wait_for_selector(selector)
        shot(name)
        if name == "map":
            page.check("[data-testid=map-islands-toggle]")
            page.wait_for_selector("[data-testid=map-island-list]")
            shot("map-islands")
            page.uncheck("[data-testid=map-islands-toggle]")
        if name == "map" and page.locator("[data-testid=map-cluster]").count():
            page.click("[data-testid=map-cluster]")
            page.wait_for_selector("[data-testid=cluster-panel]")
            shot("map-cluster", full_page=False)
            page.keyboard.press("Escape")
        if name == "skills" and page.locator("tr[data-slug]").count():
            page.click("tr[data-slug]")
            page.wait_for_selector("[data-testid=skill-md] h2")
            shot("skill-detail")
        if name == "trajectories" and page.locator("tr[data-session]").count():
            page.click("tr[data-session]")
            page.wait_for_selector("[data-testid=segments]")
            shot("session-detail", full_page=False)
            page.keyboard.press("Escape")
    return shots


def screenshots(base_url: str, out: Path, api_key: str | None, search_query: str) -> list[Path]:
    from playwright.sync_api import sync_playwright  # optional: the browser part needs playwright

    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            sign_in(page, base_url, api_key)
            return capture(page, base_url, out, search_query)
        finally:
            browser.close()


def demo_screenshots(out: Path, settings: Any, search_query: str) -> list[Path]:
    """A fresh embedded database with demo data, served on loopback, photographed, thrown away."""
    data_dir = Path(tempfile.mkdtemp(prefix="ultron-demo-"))
    data_dir.chmod(0o755)
    demo_settings = Settings.model_validate(
        {**settings.model_dump(), "database_url": None, "data_dir": data_dir, "embedding_provider": "hash"}
    )
    hub = Hub.open(demo_settings)
    try:
        demo = seed_demo(hub, with_import=True, with_skills=True)
        spread_days(hub)
        with LiveServer(create_app(hub, allow_open=True)) as url:
            return screenshots(url, out, demo.keys["claude-code"], search_query)
    finally:
        hub.close()  # also stops the embedded server
        shutil.rmtree(data_dir, ignore_errors=True)


def main(args: Any, settings: Any) -> int:
    out = Path(args.dir)
    if args.demo:
        shots = demo_screenshots(out, settings, args.query)
    elif not args.url:
        print("pass --url of a running hub (with --api-key if it needs one), or --demo", file=sys.stderr)
        return 2
    else:
        shots = screenshots(args.url.rstrip("/"), out, args.api_key, args.query)
    for path in shots:
        print(path)
    print(f"{len(shots)} screenshots in {out}", file=sys.stderr)
    return 0
