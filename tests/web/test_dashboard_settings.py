"""Issue 19 in the dashboard, in headless Chromium against a live hub: runtime settings edited by an admin
(read-only for others), valence / arousal / importance on the memory panel, entity islands on the map.
Each test saves a screenshot under ULTRON_SCREENSHOT_DIR when set (they were looked at)."""

from __future__ import annotations

from sqlalchemy import func, select

from tests.web.conftest import auth
from tests.web.test_dashboard_browser import _db_memory, _sign_in, browser, page  # noqa: F401  (fixtures)
from tests.web.test_dashboard_companion import _shot
from ultron.db.models import ActivityEvent, Memory, MemoryEntity, RuntimeSetting
from ultron.memory.schemas import UploadRequest
from ultron.tenancy import authenticate

# Private memories keep names (docs/privacy.md), so these link people and places to islands.
ISLAND_MEMORIES = (
    "Alice Chen set up the VPN for the Berlin office on Monday",
    "Alice Chen asked for weekly reports about the Berlin office network",
    "Bob Martin moved the backups of the Berlin office to a new disk",
    "Bob Martin and Alice Chen reviewed the firewall rules together",
)


def _runtime(hub) -> dict[str, object]:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return {r.name: r.value for r in s.execute(select(RuntimeSetting)).scalars()}


def test_an_admin_edits_runtime_settings_and_bad_values_are_refused(page, live_hub, hub, demo):  # noqa: F811
    _sign_in(page, live_hub, demo.keys["claude-code"])
    page.click("#nav a[data-page=settings]")
    page.wait_for_selector("[data-testid=runtime-table] tr[data-setting=serendipity_relevance]")
    assert "embedding_provider" in page.text_content("[data-testid=settings-table]")
    # Out of range: refused in the page, nothing sent.
    page.fill("[data-testid=runtime-form] input[name=fulltext_weight]", "1.5")
    page.click("[data-testid=runtime-save]")
    page.wait_for_selector("[data-testid=runtime-error]:has-text('fulltext_weight: at most 1')")
    assert _runtime(hub) == {}
    # Each value in range, together not: the hub refuses with its reason and stores nothing.
    page.fill("[data-testid=runtime-form] input[name=fulltext_weight]", "0.5")
    page.fill("[data-testid=runtime-form] input[name=hot_percentile]", "70")
    page.fill("[data-testid=runtime-form] input[name=warm_percentile]", "40")
    page.click("[data-testid=runtime-save]")
    page.wait_for_selector("[data-testid=runtime-error]:has-text('<= 100')")
    assert _runtime(hub) == {}
    # Good values: stored, shown as changed by this agent, applied to the hub's search at once.
    page.fill("[data-testid=runtime-form] input[name=hot_percentile]", "20")
    page.fill("[data-testid=runtime-form] input[name=warm_percentile]", "40")
    page.fill("[data-testid=runtime-form] input[name=serendipity_relevance]", "0.75")
    page.uncheck("[data-testid=runtime-form] input[name=serendipity_enabled]")
    page.click("[data-testid=runtime-save]")
    page.wait_for_selector("tr.changed[data-setting=serendipity_enabled]")
    assert _runtime(hub) == {
        "hot_percentile": 20,
        "serendipity_relevance": 0.75,
        "serendipity_enabled": False,
    }
    assert "claude-code" in page.text_content("tr[data-setting=hot_percentile]")
    with hub.db.session() as s:
        actor = authenticate(s, demo.keys["claude-code"])
        assert hub.companion.tenant_settings(s, actor.tenant_id).serendipity_enabled is False
        events = s.execute(select(func.count()).where(ActivityEvent.kind == "settings")).scalar_one()
    assert events == 1
    _shot(page, "settings-runtime")
    page.click("[data-testid=reset-hot_percentile]")
    page.wait_for_selector("tr[data-setting=hot_percentile]:not(.changed)")
    assert "hot_percentile" not in _runtime(hub)


def test_other_agents_see_runtime_settings_read_only(page, live_hub, demo):  # noqa: F811
    _sign_in(page, live_hub, demo.keys["cursor-agent"])
    page.click("#nav a[data-page=settings]")
    page.wait_for_selector("[data-testid=runtime-readonly]")
    assert page.locator("[data-testid=runtime-save]").count() == 0
    assert page.locator("[data-testid=runtime-form] input[name=tier_boost_hot]").is_disabled()


def test_valence_arousal_and_importance_are_edited_on_the_memory_panel(page, live_hub, hub, demo):  # noqa: F811
    target = demo.memory_ids[4]
    _sign_in(page, live_hub, demo.keys["claude-code"])
    page.goto(f"{live_hub}/dashboard#/memories/{target}")
    page.wait_for_selector("#drawer [data-testid=mood-form]")
    before = _db_memory(hub, target)
    page.fill("[data-testid=mood-importance]", "11")
    page.click("[data-testid=mood-save]")
    page.wait_for_selector(
        "[data-testid=mood-error]:has-text('Importance must be a whole number from 1 to 10')"
    )
    assert _db_memory(hub, target).importance == before.importance
    page.fill("[data-testid=mood-valence]", "-0.6")
    page.fill("[data-testid=mood-arousal]", "0.9")
    page.fill("[data-testid=mood-importance]", "8")
    page.click("[data-testid=mood-save]")
    # The panel is drawn again from the hub's answer: the input's value attribute is the stored one.
    page.wait_for_selector("#drawer [data-testid=mood-importance][value='8']")
    after = _db_memory(hub, target)
    assert (after.valence, after.arousal, after.importance) == (-0.6, 0.9, 8)
    assert page.input_value("[data-testid=mood-arousal]") == "0.9"
    _shot(page, "memory-mood")


def test_the_map_shows_entity_islands_with_their_memories(page, live_hub, hub, client, demo):  # noqa: F811
    key = demo.keys["claude-code"]
    with hub.db.session() as s:
        actor = authenticate(s, key)
        ids = [
            hub.memory.upload(s, actor, UploadRequest(content=text, scope="private")).record.id
            for text in ISLAND_MEMORIES
        ]
    with hub.db.session() as s:
        linked = s.execute(
            select(MemoryEntity.name, func.count())
            .join(Memory, Memory.id == MemoryEntity.memory_id)
            .where(Memory.status == "active")
            .group_by(MemoryEntity.name)
            .having(func.count() >= 2)
        ).all()
    expected = {name for name, _ in linked}
    assert {"Alice Chen", "Berlin"} <= expected, linked  # what spaCy finds in the texts above
    data = client.get("/api/dashboard/map/entities?fresh=true", headers=auth(key)).json()
    assert {i["name"] for i in data["islands"]} == expected and data["total"] == len(expected)
    alice = next(i for i in data["islands"] if i["name"] == "Alice Chen")
    assert alice["kind"] == "person" and {str(i) for i in ids[:2]} | {str(ids[3])} == set(alice["memory_ids"])
    # Another agent does not see these private memories, so no island of them.
    other = client.get(
        "/api/dashboard/map/entities?fresh=true", headers=auth(demo.keys["cursor-agent"])
    ).json()
    assert not {"Alice Chen", "Berlin"} & {i["name"] for i in other["islands"]}
    assert client.get("/api/dashboard/map/entities?limit=0", headers=auth(key)).status_code == 422

    _sign_in(page, live_hub, key)
    page.click("#nav a[data-page=map]")
    page.wait_for_selector("[data-testid=map-svg] circle.node")
    dot = page.locator(f"circle.node[data-id='{ids[0]}']")
    start = (dot.get_attribute("cx"), dot.get_attribute("cy"))
    page.check("[data-testid=map-islands-toggle]")
    page.wait_for_selector("[data-testid=map-island]")
    drawn = set(page.eval_on_selector_all("[data-testid=map-island]", "els => els.map(e => e.dataset.name)"))
    assert drawn == expected
    assert page.get_attribute("[data-testid=map-island][data-name='Alice Chen']", "data-kind") == "person"
    assert (dot.get_attribute("cx"), dot.get_attribute("cy")) != start  # gathered towards its island
    assert "Alice Chen" in page.text_content("[data-testid=map-island-list]")
    _shot(page, "map-islands")
    page.uncheck("[data-testid=map-islands-toggle]")
    assert page.locator("[data-testid=map-island]").count() == 0
    assert (dot.get_attribute("cx"), dot.get_attribute("cy")) == start
