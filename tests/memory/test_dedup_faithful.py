"""Issue 31 through the real upload path on the default offline setup (local e5, heuristic judge,
shared scope with redaction): two texts that state different facts stay two memories however close
their embeddings are; consolidation keeps what a split separated apart."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from ultron.db.models import Memory
from ultron.hub import build_worker
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
]


@pytest.mark.parametrize(("first", "second"), DIFFERENT_FACTS)
def test_two_different_facts_stay_two_memories(local_hub, first, second):
    assert up(local_hub, first).decision == "created"
    assert up(local_hub, second).decision == "created"
    assert active(local_hub) == 2


CODING_FIXES = [
    (
        "pytest collects tests twice when the rootdir contains symlinked directories",
        "running pytest in a repo with a symlink to the tests folder",
        "resolve the collected paths with os.path.realpath before comparing them in _pytest/main.py",
    ),
    (
        "Django session data fails to decode after upgrading, SessionBase.decode raises an error",
        "sessions written before the upgrade use the legacy encoding",
        "fall back to _legacy_decode in django/contrib/sessions/backends/base.py",
    ),
    (
        "sympy simplify returns a wrong result for an expression with a power of a negative base",
        "simplify((-2)**x * 2**(-x)) in sympy/simplify/simplify.py",
        "only combine the powers in powsimp when the base is positive",
    ),
    (
        "Sphinx autodoc ignores the :private-members: option for a class",
        "documenting a module with automodule and private members",
        "pass the private-members option through in sphinx/ext/autodoc/__init__.py",
    ),
]


def test_four_unrelated_coding_fixes_stay_four(local_hub):
    decisions = [up(local_hub, *fix).decision for fix in CODING_FIXES]
    assert decisions == ["created"] * 4
    assert active(local_hub) == 4


def test_the_same_fact_in_other_words_still_merges(local_hub):
    a = up(local_hub, "The nightly backup job failed because the disk on the database server was full.")
    b = up(local_hub, "The nightly backup job failed because the database server's disk was full.")
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
