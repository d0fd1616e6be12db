"""The composition root: every service gets its collaborators when it is built, and none gets the hub."""

from __future__ import annotations

from ultron.companion.skills import SkillBriefSource
from ultron.hub import Hub


def _services(hub: Hub) -> dict[str, object]:
    return {
        "memory": hub.memory,
        "companion": hub.companion,
        "companion.hooks": hub.companion.hooks,
        "clusters": hub.clusters,
        "skills": hub.skills,
        "ingestion": hub.ingestion,
        "ingestion.imports": hub.ingestion.imports,
    }


def test_services_share_the_hubs_collaborators(hub: Hub) -> None:
    assert hub.memory.companion is hub.companion.hooks
    assert hub.memory.clusters is hub.clusters
    assert hub.memory.term_stats is hub.term_stats
    assert hub.memory.runtime is hub.runtime is hub.companion.hooks.runtime
    assert hub.memory.hits is hub.hits
    assert hub.skills.clusters is hub.clusters
    assert hub.skills.redactor is hub.redactor is hub.ingestion.scrubber.redactor
    assert hub.companion.memory is hub.memory
    source = hub.companion.skill_source
    assert isinstance(source, SkillBriefSource) and source.skills is hub.skills
    assert hub.ingestion.memory is hub.memory
    assert hub.ingestion.imports.scrubber is hub.ingestion.scrubber


def test_no_service_holds_the_hub(hub: Hub) -> None:
    for name, service in _services(hub).items():
        held = [attr for attr, value in vars(service).items() if isinstance(value, Hub)]
        assert not held, f"{name} holds the hub in {held}"
