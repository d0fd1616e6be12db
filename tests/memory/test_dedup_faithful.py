"""Issue 31 through the real upload path on the default offline setup (local e5, heuristic judge,
shared scope with redaction): two texts that state different facts stay two memories however close
their embeddings are; consolidation keeps what a split separated apart."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from ultron.db.models import Memory
from ultron.hub import build_worker
from ultron.memory import faithful
from ultron.memory.schemas import UploadRequest
from ultron.tenancy import local_actor


@pytest.fixture()
def local_hub(make_hub):  # type: ignore[no-untyped-def]
    return make_hub(embedding_provider="local")


def up(hub, content: str, context: str = "", resolution: str = ""):  # type: ignore[no-untyped-def]
    req = UploadRequest(content=content, context=context, resolution=resolution)
    with hub.db.session() as s:
        return hub.memory.upload(s, local_actor(s), req)


def active(hub) -> int:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return s.execute(
            select(func.count()).select_from(Memory).where(Memory.status == "active")
        ).scalar_one()


DIFFERENT_FACTS = [
    pytest.param(
        "In the 1995 final Ajax, the club from the Netherlands, beat Milan, the club from Italy, 1-0.",
        "In the 1995 final Ajax, the club from Italy, beat Milan, the club from the Netherlands, 1-0.",
        id="clubs-countries-swapped",
    ),
    pytest.param(
        "After university she moved to London for work and later returned to South Africa to teach.",
        "After university she moved to South Africa for work and later returned to London to teach.",
        id="moved-and-returned-reversed",
    ),
    pytest.param(
        "Sevilla beat Valencia 3-1 in the cup semi-final on Sunday.",
        "Valencia beat Sevilla 3-1 in the cup semi-final on Sunday.",
        id="winner-and-loser-swapped",
    ),
    pytest.param(
        "In the 2012 election Obama won 51% of the vote and Romney 48%.",
        "In the 2012 election Romney won 51% of the vote and Obama 48%.",
        id="vote-shares-swapped",
    ),
    pytest.param(
        "Is eating a centipede poisonous?",
        "Is a centipede bite poisonous?",
        id="question-object-changed",
    ),
    pytest.param(
        "Who is this in the photo, Priya Raman?",
        "Who is this in the photo, Lucas Moreau?",
        id="two-names-redacted-alike",
    ),
    pytest.param(
        "巴塞罗那在决赛中击败了皇家马德里。", "皇家马德里在决赛中击败了巴塞罗那。", id="zh-winner-swapped"
    ),
    pytest.param("吃蜈蚣有毒吗？", "被蜈蚣咬了有毒吗？", id="zh-question-object"),
    # Direction words (up / down, before / after, on / off, in / out, to / from) are function words to the
    # content checks: these pairs differed in nothing else they read, and merged automatically.
    pytest.param(
        "Memory usage went up after the upgrade.", "Memory usage went down after the upgrade.", id="up-down"
    ),
    pytest.param(
        "Run the migrations before the deploy.", "Run the migrations after the deploy.", id="before-after"
    ),
    pytest.param(
        "Turn the cache on for the staging build.", "Turn the cache off for the staging build.", id="on-off"
    ),
    pytest.param("Opt in to the beta channel.", "Opt out of the beta channel.", id="opt-in-out"),
    pytest.param(
        "Users must log in before the export.", "Users must log out before the export.", id="log-in-out"
    ),
    pytest.param(
        "Copy the nightly dump to the backup bucket.",
        "Copy the nightly dump from the backup bucket.",
        id="to-from",
    ),
]


@pytest.mark.parametrize(("first", "second"), DIFFERENT_FACTS)
def test_two_different_facts_stay_two_memories(local_hub, first, second):
    assert up(local_hub, first).decision == "created"
    assert up(local_hub, second).decision == "created"
    assert active(local_hub) == 2


# The shape of a coding agent's run summaries (public SWE-bench runs): one line of what was fixed, then
# the same account of the work. e5 puts these at 0.93-0.96 and the evidence terms they share satisfy
# same_subject, so they were judge-merged into one memory.
_RUN = (
    "The agent reproduced the failure with a small script, read the code around the failing call, changed "
    "the function, added a regression test and ran the full test suite, which passed."
)
CODING_FIXES = [
    ("The pytest bug: tests in symlinked directories were collected twice. " + _RUN,),
    ("The Django bug: old session data could not be decoded after the upgrade. " + _RUN,),
    ("The sympy bug: simplify gave a wrong result for a power of a negative base. " + _RUN,),
    ("The Sphinx bug: autodoc ignored the private members option of a class. " + _RUN,),
]


def test_four_unrelated_coding_fixes_stay_four(local_hub):
    decisions = [up(local_hub, *fix).decision for fix in CODING_FIXES]
    assert decisions == ["created"] * 4
    assert active(local_hub) == 4


def test_the_same_fact_in_other_words_still_merges(local_hub):
    a = up(local_hub, "The nightly backup job didn't finish because the disk on the db server was full.")
    b = up(local_hub, "The nightly backup job did not finish, because the disk on the db server was full")
    assert b.decision in ("merged", "merged_judge") and b.record.id == a.record.id


def test_consolidation_never_merges_back_a_split_contribution(make_hub):
    hub = make_hub(embedding_provider="local", consolidate_enabled=True)
    first = up(hub, "nginx returns 502 Bad Gateway after deploy", "upstream gunicorn on port 8000",
               "gunicorn was not started; fix the systemd unit")  # fmt: skip
    second = up(hub, "nginx returns 502 Bad Gateway after the deploy", "upstream gunicorn on port 8000",
                "gunicorn was not started; fix its systemd unit")  # fmt: skip
    assert second.decision in ("merged", "merged_judge") and second.record.id == first.record.id
    with hub.db.session() as s:
        actor = local_actor(s)
        merged = next(
            c for c in hub.memory.contributions(s, actor, first.record.id) if c.decision != "created"
        )
        hub.memory.split(s, actor, first.record.id, merged.id)
    assert active(hub) == 2
    outcome = build_worker(hub).run_cycle(("consolidate",))[0]
    assert outcome.status == "ok" and outcome.counts["merged"] == 0
    assert active(hub) == 2


DIRECTION_FLIPS = [
    ("Memory usage went up after the upgrade.", "Memory usage went down after the upgrade."),
    ("Scale the workers up at night.", "Scale the workers down at night."),
    ("Run the migrations before the deploy.", "Run the migrations after the deploy."),
    ("Opt in to the beta channel.", "Opt out of the beta channel."),
    ("Copy the nightly dump to the backup bucket.", "Copy the nightly dump from the backup bucket."),
]
SAME_DIRECTION = [
    ("Turn the cache off for staging builds.", "For staging builds, turn the cache off."),
    ("Run the migrations before the deploy.", "Before the deploy, run the migrations."),
    ("Scale the workers up at night.", "At night, scale up the workers."),
]


@pytest.mark.parametrize(("first", "second"), DIRECTION_FLIPS)
def test_a_flipped_direction_word_is_another_fact_to_both_gates(first, second):
    a, b = {"content": first}, {"content": second}
    assert "direction" in faithful.disagreements(a, b)
    assert not faithful.may_merge_automatically(a, b) and not faithful.may_merge_judged(a, b)


@pytest.mark.parametrize(("first", "second"), SAME_DIRECTION)
def test_the_same_direction_words_moved_in_the_sentence_still_agree(first, second):
    assert faithful.same_fact({"content": first}, {"content": second})
