"""Skill search ranks by the skill's problem (issue 32): a query naming a problem finds the skill whose
title and symptoms name it, not the one whose fixes and harness text happen to share more words. Before,
a skill was embedded from its whole body, and a search for "marshmallow TimeDelta serialization precision"
ranked a skill of Django boilerplate first."""

from __future__ import annotations

from ultron.skills.format import SkillDoc, embedding_text, render
from ultron.tenancy import local_actor

HARNESS = (
    "Consider the following issue description. Can you help me implement the necessary changes to the "
    "repository so that the requirements specified in the issue description are met? Execute bash "
    "commands, explore the repo, create a script to reproduce the error, edit the source code, rerun "
    "the reproduce script, think about edge cases. "
)
# Skills as the offline synthesizer writes them (ultron/skills/evolve.py): "When to use", then entries.
MARSHMALLOW = SkillDoc(
    "marshmallow TimeDelta serialization loses precision",
    "One symptom and the fix that worked for it.",
    "## When to use\n\n- TimeDelta fields round microseconds away when serialized [m:0000aaaa]\n\n"
    "## Symptoms and fixes\n\n- **Symptom:** AssertionError: 345 != 344 (TimeDelta precision) "
    "**Fix that worked:** in `fields.py`: `- return int(value.total_seconds() / base_unit.total_seconds())` "
    "`+ return round(value.total_seconds() / base_unit.total_seconds())` (verified with: `pytest "
    "tests/test_fields.py`) [m:0000aaaa]\n\n" + HARNESS * 6,
    {},
)
DJANGO = SkillDoc(
    "Bash Consider Description Execute",
    "Django admin changes.",
    "## When to use\n\n- Django admin list_display ordering [m:0000bbbb]\n\n"
    "## Symptoms and fixes\n\n- **Symptom:** admin.E108 list_display refers to a missing field "
    "**Fix that worked:** in `admin.py`: `+ list_display = ('name',)` with serialization precision of the "
    "DecimalField kept [m:0000bbbb]\n",
    {},
)


def test_a_skills_embedding_holds_its_problem_not_its_fixes_or_harness_text():
    text = embedding_text(MARSHMALLOW.name, MARSHMALLOW.description, MARSHMALLOW.body)
    assert "TimeDelta fields round microseconds" in text and "AssertionError: 345 != 344" in text
    assert "Can you help me" not in text and "total_seconds" not in text
    # a body without symptoms or "When to use" is embedded as it is
    assert "1. run it" in embedding_text("n", "d", "## Steps\n\n1. run it\n")


def test_a_query_naming_a_problem_ranks_that_problems_skill_first(hub):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        actor = local_actor(s)
        for doc in (MARSHMALLOW, DJANGO):
            hub.skills.upload(s, actor, {"SKILL.md": render(doc)})
    with hub.db.session() as s:
        hits = hub.skills.search(s, local_actor(s).tenant_id, "marshmallow TimeDelta serialization precision")
    assert [h["name"] for h in hits][:1] == [MARSHMALLOW.name], hits
