"""What a new user reads on the dashboard without hovering (issue 35): cluster names on the map, labels on
the network, whole overview cards, plain words for each setting, and Enter running the brief. Each test
saves a screenshot under ULTRON_SCREENSHOT_DIR when set (they were looked at)."""

from __future__ import annotations

from pathlib import Path

import httpx
from sqlalchemy import update

from tests.web.test_dashboard_browser import _sign_in, browser, page  # noqa: F401  (fixtures)
from tests.web.test_dashboard_companion import SHOTS, _shot
from ultron.config import EDITABLE
from ultron.db.models import KnowledgeCluster

# Every text box of the overview's cards, measured: a clipped one is wider inside than its box.
CLIPPED = """() => [...document.querySelectorAll('.kpi .label, .kpi .value, .kpi .sub')]
  .filter((el) => el.scrollWidth > el.clientWidth)
  .map((el) => el.closest('.kpi').dataset.testid + ': ' + el.textContent)"""


def test_unnamed_clusters_are_called_by_their_members_distinguishing_words(page, live_hub, hub, skilled):  # noqa: F811
    # As before any cluster crystallizes: none has a name yet.
    with hub.db.session() as s:
        s.execute(update(KnowledgeCluster).values(topic=""))
    key = skilled.keys["claude-code"]
    data = httpx.get(
        f"{live_hub}/api/dashboard/map?fresh=true", headers={"Authorization": f"Bearer {key}"}
    ).json()
    assert data["clusters"] and not any(c["topic"] for c in data["clusters"])
    docker = next(c for c in data["clusters"] if c["skill_slug"] and "docker" in c["skill_slug"])
    _sign_in(page, live_hub, key)
    page.click("#nav a[data-page=map]")
    page.wait_for_selector("[data-testid=map-svg] [data-testid=map-cluster-label]")
    _shot(page, "first-hour-map")
    labels = page.locator("[data-testid=map-cluster-label]").all_text_contents()
    assert labels and all(label.strip(" ◆…") for label in labels), labels
    names = page.locator("[data-testid=map-clusters] [data-testid=cluster-name]").all_text_contents()
    assert names and all(n.strip() and n != "unnamed" for n in names), names
    row = page.locator(f"[data-testid=map-clusters] .cluster-row[data-cluster='{docker['id']}'] .name")
    assert "docker" in row.text_content().split(" · "), row.text_content()  # its members' own word
    # Different clusters are told apart by different words.
    assert len(set(names)) == len(names), names
    page.click(f"[data-testid=map-cluster][data-cluster='{docker['id']}']")
    page.wait_for_selector("#drawer [data-testid=cluster-panel]")
    assert page.text_content("#drawer [data-testid=cluster-topic]") == row.text_content()


def test_the_network_has_labels_to_read_without_hovering(page, live_hub, demo):  # noqa: F811
    _sign_in(page, live_hub, demo.keys["claude-code"])
    page.click("#nav a[data-page=network]")
    page.wait_for_selector("[data-testid=network-svg] [data-testid=network-label]")
    _shot(page, "first-hour-network")
    labels = page.locator("[data-testid=network-label]").all_text_contents()
    nodes = page.locator("[data-testid=network-svg] circle.net-node").count()
    assert len(labels) >= min(8, nodes) and all(t.strip() for t in labels), labels
    # No two labels overlap.
    boxes = [b for b in (el.bounding_box() for el in page.locator("[data-testid=network-label]").all()) if b]

    def overlap(a, b):  # type: ignore[no-untyped-def]
        return (
            a["x"] < b["x"] + b["width"] - 1
            and b["x"] < a["x"] + a["width"] - 1
            and a["y"] < b["y"] + b["height"] - 1
            and b["y"] < a["y"] + a["height"] - 1
        )

    assert not [(i, j) for i in range(len(boxes)) for j in range(i) if overlap(boxes[i], boxes[j])]


def test_overview_cards_are_not_truncated(page, live_hub, demo):  # noqa: F811
    _sign_in(page, live_hub, demo.keys["claude-code"])
    page.wait_for_selector("[data-testid=kpi-total] .value")
    _shot(page, "first-hour-overview")
    for width in (1440, 1180, 900):
        page.set_viewport_size({"width": width, "height": 900})
        assert page.evaluate(CLIPPED) == [], width


def test_enter_in_the_brief_task_runs_the_brief(page, live_hub, demo):  # noqa: F811
    _sign_in(page, live_hub, demo.keys["claude-code"])
    page.click("#nav a[data-page=brief]")
    page.wait_for_selector("[data-testid=brief-result] [data-testid=brief-budget-bar]")
    page.fill("[data-testid=brief-task]", "postgres connection refused in docker")
    with page.expect_response(lambda r: "/brief?" in r.url and "task=postgres" in r.url) as answer:
        page.press("[data-testid=brief-task]", "Enter")
    assert answer.value.ok
    page.wait_for_selector("[data-testid=brief-item]")
    _shot(page, "first-hour-brief")


def test_every_runtime_setting_says_in_plain_words_what_it_does(page, live_hub, demo):  # noqa: F811
    _sign_in(page, live_hub, demo.keys["claude-code"])  # an admin
    page.click("#nav a[data-page=settings]")
    page.wait_for_selector("[data-testid=runtime-table] tr[data-setting]")
    _shot(page, "first-hour-settings")
    if SHOTS:  # the runtime table's top, at screen size: the full page is too tall to read
        page.screenshot(path=str(Path(SHOTS) / "first-hour-settings-top.png"))
    rows = page.locator("[data-testid=runtime-table] tr[data-setting]")
    assert rows.count() == len(EDITABLE)
    for i in range(rows.count()):
        row = rows.nth(i)
        plain = row.locator("[data-testid=setting-plain]").text_content().strip()
        formula = row.locator(".fine").first.text_content().strip()
        assert plain and plain != formula, row.get_attribute("data-setting")
