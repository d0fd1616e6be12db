"""Current facts (issue 34, item 2): an upload that changes the value of an older memory (a host, a version,
a date, a choice) is linked as superseding it; search ranks the current one first and flags the older one,
which stays stored and searchable; explain shows the link."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ultron.memory import supersede
from ultron.memory.schemas import UploadRequest
from ultron.tenancy import local_actor


def add(hub, content, **kw):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return hub.memory.upload(s, local_actor(s), UploadRequest(content=content, **kw)).record


def search(hub, query, **kw):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return hub.memory.search(s, local_actor(s), query, **kw)


def get(hub, memory_id):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return hub.memory.get(s, local_actor(s), memory_id)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (
            "The staging database runs on db-stage-1.",
            "We moved the staging database to db-stage-2 last night.",
        ),
        ("The CI runner uses Python 3.10.", "The CI runner now uses Python 3.12."),
        ("Lily's piano lesson is on Tuesday.", "Lily's piano lesson was moved to Thursday."),
        ("I prefer tabs for indentation.", "I switched to spaces for indentation now."),
        ("预发环境的数据库在 db-pre-1 上。", "预发环境的数据库已经迁到 db-pre-2 了。"),
    ],
)
def test_the_offline_rule_finds_an_update(old: str, new: str) -> None:
    assert supersede.updates({"content": new}, {"content": old})


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("The staging database is db-stage-1.", "The production database is db-prod-1."),
        ("Maya: I moved to the pediatric ward.", "Jonas: I moved into a flat in Ridgewood."),
        ("Which host is the staging database on?", "The staging database runs on db-stage-2."),
        # opposite choices, no stated change: two scopes of one preference
        (
            "User prefers 4-space indentation, never tabs, in Python and YAML files",
            "User prefers tabs for indentation in their JavaScript/TypeScript projects",
        ),
    ],
)
def test_different_subjects_and_questions_are_no_update(a: str, b: str) -> None:
    assert not supersede.updates({"content": b}, {"content": a})
    assert not supersede.updates({"content": a}, {"content": b})


def test_search_ranks_the_current_fact_first_and_flags_the_older(make_hub):  # type: ignore[no-untyped-def]
    hub = make_hub()
    old = add(hub, "The staging database runs on db-stage-1 in the Frankfurt region.")
    add(hub, "Redis eviction policy drops session keys under memory pressure.")
    new = add(hub, "We moved the staging database to db-stage-2 in the Frankfurt region.")
    assert new.id != old.id  # an update is kept as a second memory, not merged
    assert get(hub, old.id).superseded_by == new.id
    assert get(hub, new.id).superseded_by is None
    # the query shares the old wording word for word: the current fact still comes first
    results = search(hub, "staging database runs on db-stage-1", explain=True)
    ids = [r.record.id for r in results]
    assert ids[0] == new.id and old.id in ids  # kept and searchable
    stale = results[ids.index(old.id)]
    assert stale.record.superseded_by == new.id
    assert stale.explain is not None and stale.explain.superseded_by == new.id
    assert results[0].score > stale.score


def test_the_current_fact_is_brought_in_when_the_search_misses_it(make_hub):  # type: ignore[no-untyped-def]
    hub = make_hub()
    old = add(hub, "The CI runner uses Python 3.10 for the nightly build.")
    new = add(hub, "The CI runner now uses Python 3.12 for the nightly build.")
    results = search(hub, "Python 3.10 nightly build runner", limit=1, explain=True)
    assert [r.record.id for r in results] == [new.id]
    assert results[0].explain is not None
    assert results[0].explain.supersedes == old.id


def test_an_earlier_fact_uploaded_later_is_the_superseded_one(make_hub):  # type: ignore[no-untyped-def]
    hub = make_hub()
    new = add(
        hub,
        "The team standup moved to 10:15 starting this week.",
        occurred_at=datetime(2026, 5, 1, tzinfo=UTC),
    )
    old = add(hub, "The team standup is at 9:30 every day.", occurred_at=datetime(2026, 1, 1, tzinfo=UTC))
    assert get(hub, old.id).superseded_by == new.id
    assert get(hub, new.id).superseded_by is None


def test_an_update_is_never_merged_even_at_the_automatic_threshold(make_hub):  # type: ignore[no-untyped-def]
    # every pair of memories is "close enough" to merge without the judge: the update is still kept apart
    hub = make_hub(dedup_similarity_threshold=0.01, dedup_soft_threshold=0.01)
    old = add(hub, "Reports are exported as CSV.")
    new = add(hub, "Reports are exported as Parquet now.")
    assert new.id != old.id
    assert get(hub, old.id).superseded_by == new.id
    same = add(hub, "Reports are exported as CSV.")
    assert same.id == old.id  # a plain duplicate still merges


def turn(content: str, thread: str) -> dict[str, str]:
    return {"content": content, "thread": thread}


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # redaction puts "<PERSON>" for a speaker's name: the placeholder names no subject
        (
            turn("<PERSON>: I finally moved into a place in Ridgewood with a tiny balcony.", "c1/session-1"),
            turn("<PERSON>: Love these chats. Later!", "c1/session-1"),
        ),
        (
            turn("<PERSON>: Love these chats. Later!", "c1/session-1"),
            turn("<PERSON>: We moved receipt numbers to a Postgres sequence.", "c1/session-3"),
        ),
        # a number in a reply, sessions apart, with no stated change
        (
            turn("Maya: Yes, May 17. My goal is under two hours.", "c1/session-7"),
            turn(
                "<PERSON>: Under two hours! I saw you at kilometre 18, you looked like a superhero.",
                "c1/session-8",
            ),
        ),
        # "update" as a noun, and a subject only partly shared
        (
            turn(
                "<PERSON>: I have news too. I'm presenting at PyData Berlin in June about our churn model.",
                "c2/s4",
            ),
            turn(
                "<PERSON>: Work update: the churn model started drifting. AUC dropped from 0.84 to 0.71.",
                "c2/s5",
            ),
        ),
        # a reply picking up its question's words within one conversation
        (
            turn('<PERSON>: "Run like Biscuit is chasing you" is a great sign.', "c1/session-8"),
            turn("Maya: Biscuit has never chased anything in his life.", "c1/session-8"),
        ),
    ],
)
def test_chat_turns_that_only_share_a_speaker_or_reply_are_no_update(
    old: dict[str, str], new: dict[str, str]
) -> None:
    assert not supersede.updates(new, old)
    assert not supersede.updates(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("<PERSON>: I finally moved into a place in Ridgewood.", "<PERSON>: Love these chats. Later!"),
        ("<PERSON>: Love these chats. Later!", "<PERSON>: We moved receipt numbers to a Postgres sequence."),
    ],
)
def test_a_redaction_placeholder_is_no_shared_subject(old: str, new: str) -> None:
    assert not supersede.updates({"content": new}, {"content": old})
    assert not supersede.updates({"content": old}, {"content": new})


def test_a_stated_change_between_chat_turns_is_still_an_update() -> None:
    old = turn("Maya: The book club meets on Tuesday evenings at the library.", "c1/session-1")
    new = turn("<PERSON>: The book club moved to Thursday evenings at the library.", "c1/session-4")
    assert supersede.updates(new, old)


def test_a_reply_in_the_same_conversation_is_not_linked_on_upload(make_hub):  # type: ignore[no-untyped-def]
    hub = make_hub()
    asked = add(hub, '<PERSON>: "Run like Biscuit is chasing you" is a great sign.', thread="c1/session-8")
    reply = add(hub, "Maya: Biscuit has never chased anything in his life.", thread="c1/session-8")
    assert reply.id != asked.id
    assert get(hub, asked.id).superseded_by is None
    assert get(hub, reply.id).superseded_by is None


def test_the_later_memory_must_state_the_change(make_hub):  # type: ignore[no-untyped-def]
    # the earlier one holds the cue ("moving"): the later one tells how it went, it changes no value
    hub = make_hub()
    plan = add(
        hub,
        "We're moving from Redshift to Snowflake. The cutover is planned for the last weekend of February.",
    )
    done = add(hub, "The Snowflake cutover went well. Only one incident: a timezone bug in the loaders.")
    assert get(hub, plan.id).superseded_by is None
    assert get(hub, done.id).superseded_by is None


def _shipped_pairs() -> list[tuple[dict, dict]]:  # type: ignore[type-arg]
    """Every pair of memories the dedup sets ship (swapped entities, changed numbers, dates, versions,
    negations, paraphrases; English and Chinese), with the type the upload path would infer."""
    import json
    from pathlib import Path

    from ultron.memory.heuristic import infer_type

    data = Path(supersede.__file__).parents[1] / "bench" / "data"
    pairs = []
    for name in ("dedup_hard_pairs.jsonl", "dedup_calibration.jsonl"):
        for line in (data / name).read_text().splitlines():
            row = json.loads(line)
            a, b = ({**row[k], "memory_type": infer_type(row[k]["content"])} for k in ("a", "b"))
            pairs.append((a, b))
    return pairs


def test_a_memory_that_may_not_supersede_is_linked_with_none():
    """supersede.may_supersede lets an upload skip its supersede probe; it must never skip one that would
    have linked: over every shipped pair, in both directions, an update implies the newer side may."""
    pairs = _shipped_pairs()
    linked = skipped = 0
    for a, b in pairs:
        for newer, older in ((a, b), (b, a)):
            if supersede.updates(newer, older):
                linked += 1
                assert supersede.may_supersede(newer), (newer, older)
            skipped += not supersede.may_supersede(newer)
    assert len(pairs) > 1000 and linked > 50 and skipped > 0, (len(pairs), linked, skipped)


@pytest.mark.parametrize(
    ("memory", "may"),
    [
        ({"content": "Lily loves drawing horses with her grandmother."}, False),  # no value, no change
        ({"content": "The CI runner uses Python 3.12."}, True),  # a version
        ({"content": "We switched to spaces for indentation."}, True),  # the change cue
        ({"content": "预发环境的数据库已经迁到新机器了。"}, True),  # 迁到: the cue
        ({"content": "Lily loves drawing horses.", "occurred_at": datetime(2026, 1, 2, tzinfo=UTC)}, True),
        ({"content": "Build fails with exit code 2 in make", "memory_type": "error"}, False),
        ({"content": "Which host is the staging database on?"}, False),  # a question states no value
    ],
)
def test_which_memories_may_supersede(memory: dict, may: bool) -> None:  # type: ignore[type-arg]
    assert supersede.may_supersede(memory) is may
