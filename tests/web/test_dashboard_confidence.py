"""Confidence where people look: the dashboard's search and brief show it, every bar and number of a search
result is on one 0-1 scale, and a search with nothing confident says so first. Each test saves a screenshot
under ULTRON_SCREENSHOT_DIR when set (they were looked at)."""

from __future__ import annotations

import re

from tests.web.test_dashboard_browser import _sign_in, browser, page  # noqa: F401  (fixtures)
from tests.web.test_dashboard_companion import _shot

NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def _search(page, query: str) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    page.fill("[data-testid=search-q]", query)
    page.click("[data-testid=search-go]")
    page.wait_for_selector("[data-testid=search-results] .result, [data-testid=search-results] .card")


def test_search_shows_confidence_on_one_scale(page, live_hub, demo):  # noqa: F811
    _sign_in(page, live_hub, demo.keys["claude-code"])
    page.click("#nav a[data-page=search]")
    _search(page, "postgres connection refused docker")
    first = page.locator(".result").first
    assert "Postgres connection refused" in first.text_content()
    assert first.locator("[data-testid=confidence]").text_content() == "high confidence"
    assert page.locator("[data-testid=nothing-confident]").count() == 0
    numbers = page.locator(".result .comp .num").all_text_contents()
    assert numbers and all(0 <= float(n) <= 1 for n in numbers if NUMBER.match(n)), numbers
    assert all(NUMBER.match(n) or n.startswith("×") for n in numbers), numbers
    big = [float(t.split()[0]) for t in page.locator(".result .score-big").all_text_contents()]
    assert big and all(0 <= b <= 1 for b in big)
    _shot(page, "search-confident")


def test_the_type_filter_changes_the_top_result(page, live_hub, demo):  # noqa: F811
    _sign_in(page, live_hub, demo.keys["claude-code"])
    page.click("#nav a[data-page=search]")
    _search(page, "postgres connection refused docker")
    assert "Postgres connection refused" in page.locator(".result").first.text_content()
    page.select_option("[data-testid=search-type]", "security")
    page.click("[data-testid=search-go]")
    page.locator(".result").first.locator(".chip[data-type=security]").wait_for()
    types = [c.get_attribute("data-type") for c in page.locator(".result .rank .chip[data-type]").all()]
    assert types and set(types) == {"security"}, types


def test_a_search_with_nothing_confident_says_so_first(page, live_hub, demo):  # noqa: F811
    _sign_in(page, live_hub, demo.keys["claude-code"])
    page.click("#nav a[data-page=search]")
    _search(page, "What is Maya's favourite movie?")
    page.wait_for_selector("[data-testid=nothing-confident]")
    banner = page.locator("[data-testid=nothing-confident]")
    assert banner.text_content() == "Nothing confident found; closest matches:"
    chips = page.locator(".result [data-testid=confidence]").all_text_contents()
    assert chips and set(chips) == {"low confidence"}
    # the banner comes before the first result
    assert page.evaluate(
        "document.querySelector('[data-testid=nothing-confident]').compareDocumentPosition("
        "document.querySelector('.result')) & Node.DOCUMENT_POSITION_FOLLOWING"
    )
    _shot(page, "search-nothing-confident")


def test_the_brief_shows_each_items_confidence_for_a_task(page, live_hub, demo):  # noqa: F811
    _sign_in(page, live_hub, demo.keys["claude-code"])
    page.click("#nav a[data-page=brief]")
    page.wait_for_selector("[data-testid=brief-item]")
    page.fill("[data-testid=brief-task]", "postgres connection refused")
    page.click("[data-testid=brief-run]")
    page.locator("[data-testid=brief-item] [data-testid=confidence]").first.wait_for()
    items = page.locator("[data-testid=brief-item]")
    sections = [t.split()[0] for t in items.all_text_contents()]
    first = items.nth(sections.index("relevant"))  # right after the pins
    assert set(sections[: sections.index("relevant")]) <= {"pinned"}
    assert "Postgres" in first.text_content()
    assert first.locator("[data-testid=confidence]").text_content() == "high confidence"
    assert first.locator(".bar-row[data-key=relevance] .fill").count() == 1
    _shot(page, "brief-task")
