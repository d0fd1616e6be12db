"""/docs and /redoc render in Chromium with every request to anywhere but the hub refused (offline)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from ultron.bench.screenshots import VIEWPORT, chromium_path, launch

needs_chromium = pytest.mark.skipif(
    chromium_path() is None,
    reason="no Chromium at /usr/bin/chromium: install Debian's package (apt-get install -y chromium) to run "
    "the browser tests",
)

# Screenshots land here when set (to look at them); else in the test's tmp dir.
REDOCLY_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"
SHOTS = os.environ.get("ULTRON_TEST_SCREENSHOTS")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as p:
        b = launch(p)
        yield b
        b.close()


def _offline_page(browser: Any, hub_url: str) -> tuple[Any, list[str], list[str]]:
    """A page that can reach only the hub: anything else is aborted, as with no network."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    hub_host = urlsplit(hub_url).netloc
    elsewhere: list[str] = []
    errors: list[str] = []

    def route(r: Any) -> None:
        url = r.request.url
        if urlsplit(url).netloc == hub_host or url.startswith(("data:", "blob:")):
            r.continue_()
        else:
            elsewhere.append(url)
            r.abort()

    page.route("**/*", route)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(20_000)
    return page, elsewhere, errors


def _shot(page: Any, tmp_path: Path, name: str) -> None:
    out = Path(SHOTS) if SHOTS else tmp_path
    out.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out / name))


@needs_chromium
def test_swagger_ui_renders_offline(browser, live_hub, tmp_path):
    page, elsewhere, errors = _offline_page(browser, live_hub)
    page.goto(f"{live_hub}/docs")
    page.wait_for_selector(".swagger-ui .info h1.title")
    assert "Ultron" in page.text_content(".swagger-ui .info h1.title")
    # The operations are listed: the schema was fetched and rendered, not just the shell.
    page.wait_for_selector(".opblock-summary-path[data-path='/memories/search']")
    assert page.locator(".opblock").count() > 20
    _shot(page, tmp_path, "docs.png")
    assert not errors, errors
    assert not elsewhere, f"the explorer reached outside the hub: {elsewhere}"
    page.context.close()


@needs_chromium
def test_redoc_renders_offline(browser, live_hub, tmp_path):
    page, elsewhere, errors = _offline_page(browser, live_hub)
    page.goto(f"{live_hub}/redoc")
    page.wait_for_selector("h1:has-text('Ultron')")
    page.wait_for_selector("h2:has-text('Search Memories')")  # an operation from the schema
    _shot(page, tmp_path, "redoc.png")
    assert not errors, errors
    # ReDoc's "API docs by Redocly" credit tries one logo image and removes it when it fails to load.
    elsewhere = [u for u in elsewhere if u != REDOCLY_LOGO]
    assert not elsewhere, f"the explorer reached outside the hub: {elsewhere}"
    page.context.close()


def test_explorer_assets_serve_only_listed_names(client):
    ok = client.get("/docs/assets/swagger-ui-bundle.js")
    assert ok.status_code == 200 and ok.headers["content-type"].startswith("text/javascript")
    assert "SwaggerUIBundle" in ok.text
    assert client.get("/docs/assets/..%2Fexplorer.py").status_code == 404
    assert client.get("/docs/assets/app.py").status_code == 404
    html = client.get("/docs").text
    assert "/docs/assets/swagger-ui-bundle.js" in html and "cdn" not in html.lower()
    assert "cdn" not in client.get("/redoc").text.lower()
