"""Three or more similar reflections produce a pin suggestion in the brief (issue 19)."""

from __future__ import annotations

from tests.companion.conftest import agent

LESSON = "Cron jobs never see the project venv: always call the interpreter by its absolute path"


def test_a_lesson_reflected_three_times_is_suggested_for_a_pin(hub):
    alice = agent(hub, "alice")
    first = alice.reflect(LESSON).record
    alice.reflect(LESSON + ".")
    assert alice.brief().suggestions == []  # twice is not yet a pattern
    third = alice.reflect(LESSON + "!").record
    alice.reflect("Kubernetes liveness probes need an initial delay longer than the app's start-up")
    suggestions = alice.brief().suggestions
    assert len(suggestions) == 1
    s = suggestions[0]
    group = {s.id, *s.similar_ids}
    assert len(group) == 3 and {first.id, third.id} <= group
    assert "3 similar reflections" in s.reason
    # another agent's private reflections are not its business
    assert agent(hub, "bob").brief().suggestions == []
    # once pinned, the suggestion goes away
    alice.pin_memory(s.id)
    assert alice.brief().suggestions == []
