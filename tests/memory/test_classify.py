"""Offline typing, importance, chit-chat and the diary split (issue 34, item 6).

The labelled set is tests/data/typing_sentences.jsonl: 200 sentences written for this test (error reports,
fixes, preferences, personal facts, plans, chat filler; English and Chinese), a `dev` part the rules were
tuned on and a `held-out` part they were not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ultron.memory import classify
from ultron.memory.heuristic import extract, infer_type

SENTENCES = [
    json.loads(line)
    for line in (Path(__file__).parent.parent / "data" / "typing_sentences.jsonl")
    .read_text("utf-8")
    .splitlines()
    if line.strip()
]


def _band(importance: int) -> str:
    return "high" if importance >= 7 else "low" if importance <= 3 else "normal"


def _accuracy(rows: list[dict[str, str]]) -> float:
    return sum(infer_type(r["text"]) == r["type"] for r in rows) / len(rows)


def test_the_set_is_200_labelled_sentences_with_a_held_out_part() -> None:
    assert len(SENTENCES) == 200
    assert {r["split"] for r in SENTENCES} == {"dev", "held-out"}
    assert {"error-report", "fix", "preference", "personal-fact", "plan", "chit-chat"} <= {
        r["category"] for r in SENTENCES
    }


def test_type_accuracy_on_the_200_sentences_is_at_least_0_9() -> None:
    assert _accuracy(SENTENCES) >= 0.9


def test_type_accuracy_on_the_held_out_part() -> None:
    # Not tuned on: the rules were written against the dev part only (docs/memory-types.md has both).
    assert _accuracy([r for r in SENTENCES if r["split"] == "held-out"]) >= 0.85


@pytest.mark.parametrize(
    "text",
    [
        "error[E0502]: cannot borrow `x` as mutable because it is also borrowed as immutable",
        "fatal: refusing to merge unrelated histories",
        "pip install times out",
        # stop 27's trial as a new user: typed `pattern` (only "OOMKilled" / "oom-killed" marked it)
        "gunicorn workers killed by the OOM killer at 2 GiB: lowered --workers to 2",
        "the OOM-killer took postgres down at 3am",
    ],
)
def test_failures_without_an_exception_name_are_errors(text: str) -> None:
    assert infer_type(text) == "error"


# Stop 26's trial as a new user: a make failure uploaded as a memory was typed `pattern` (make's fatal
# lines have no exception name and no "error:"), and one explaining it with make's own word "recipe" was
# typed `life` (the food word). The lines below are as GNU make, CMake and bash print them.
@pytest.mark.parametrize(
    "text",
    [
        "Makefile:3: *** missing separator.  Stop.",
        "make: *** [Makefile:12: build] Error 2",
        "make: *** No rule to make target 'install'.  Stop.",
        "make: *** missing separator. Stop. The recipe line starts with spaces, not a tab",
        "CMake Error at CMakeLists.txt:4 (find_package): Could not find a package configuration file",
        "bash: ./deploy.sh: Permission denied",
    ],
)
def test_build_tools_fatal_lines_are_errors(text: str) -> None:
    assert infer_type(text) == "error"


def test_a_makefile_recipe_is_not_a_cooking_recipe() -> None:
    assert infer_type("Makefile recipe lines must start with a tab, not spaces") != "life"


# Stop 27: an upload about test isolation ("pytest fixtures ... leak state between database tests") was
# typed `security`: any "leak" was. What leaks decides: a secret or people's data is security; memory,
# goroutines, file descriptors, state between tests or a tap are not.
@pytest.mark.parametrize(
    "text",
    [
        "The AWS access key leaked in a public GitHub commit",
        "We found a data leak: customer emails were exposed via the export endpoint",
        "tokens were leaking into the nginx access logs",
        "the staging password was leaked on Slack",
        "a DNS leak on the VPN showed our real resolver",
        "API密钥泄露到了公开仓库",
    ],
)
def test_a_leaked_secret_is_security(text: str) -> None:
    assert infer_type(text) == "security"


@pytest.mark.parametrize(
    "text",
    [
        "pytest fixtures with scope=session leak state between database tests",
        "the goroutine leak grew the heap to 4 GB",
        "file descriptors leak when the client never closes the socket",
        "a memory leak in the image resizer",
        "内存泄漏导致服务重启",
    ],
)
def test_a_leak_of_no_secret_is_not_security(text: str) -> None:
    assert infer_type(text) != "security"
    assert infer_type("Grandma's recipe for plum cake needs a day") == "life"


@pytest.mark.parametrize(
    "turn",
    [
        "Maya: That's great! Which dates did you pick?",
        "Jonas: Honestly a bit chaotic. I finally left the flat and moved into a place with a tiny balcony.",
        "Maya: The night shifts are brutal, but I like the kids on the ward.",
        "Priya: 好久不见，最近怎么样？",
    ],
)
def test_personal_chat_turns_are_not_patterns(turn: str) -> None:
    assert infer_type(turn) != "pattern"


def test_importance_is_inferred_on_the_labelled_set() -> None:
    right = sum(
        _band(classify.infer_importance(infer_type(r["text"]), r["text"])) == r["importance"]
        for r in SENTENCES
    )
    assert right / len(SENTENCES) >= 0.9
    assert classify.infer_importance("error", "Production is down: every pod is OOMKilled") >= 7
    assert classify.infer_importance("life", "We got married last Saturday!") >= 7
    assert classify.infer_importance("error", "KeyError: 'x' in my notebook") == 5


def test_chit_chat_is_flagged_low_value() -> None:
    turn = "Maya: That's great! Which dates did you pick?"
    assert classify.is_chit_chat(turn)
    assert classify.infer_importance(infer_type(turn), turn) <= 3
    assert not classify.is_chit_chat("Maya: We picked May 12 to 19 for Lisbon.")
    assert not classify.is_chit_chat("Great, the deploy works now.")


def test_a_diary_paragraph_is_split_into_its_events() -> None:
    diary = (
        "Busy Saturday. In the morning I took Biscuit to the vet for his vaccinations. After lunch we drove "
        "to IKEA and bought the bookshelf for the living room. In the evening Lily had her first piano "
        "recital. Later we ordered pizza and watched a movie with the kids."
    )
    items = [i["content"] for i in extract(diary)]
    assert len(items) == 4
    assert items[0].startswith("Busy Saturday. In the morning")
    assert "IKEA" in items[1] and "recital" in items[2] and "pizza" in items[3]
    zh = "早上带孩子去打疫苗。中午和老同学吃了顿火锅。下午在家修好了漏水的水龙头。晚上陪女儿练了一小时钢琴。"
    assert len(extract(zh)) == 4


def test_a_troubleshooting_story_stays_one_memory() -> None:
    story = "pip install failed on the runner. Then I retried with a mirror. Later the build passed again."
    assert len(extract(story)) == 1
    assert len(extract("The service is a FastAPI app. It talks to Postgres. It returns JSON.")) == 1


def test_a_redacted_speaker_label_is_a_speaker_label() -> None:
    # redaction writes the speaker's name as a placeholder: still a label, not the turn's words
    assert classify.words_of("<PERSON>: Love these chats. Later!") == "Love these chats. Later!"
    assert classify.words_of("Maya: Love these chats.") == "Love these chats."
    assert classify.words_of("Error: connection refused") == "Error: connection refused"


def test_a_word_tree_matches_where_its_flat_alternation_does():
    # Stop 28: _TECH's word list as a prefix tree (re tried a flat list's words one by one at every word
    # start: 38 -> 12 us an upload). Words that are prefixes of others, and a trailing \b deciding.
    import re

    from ultron.memory.classify import _TECH_WORDS, word_tree

    words = _TECH_WORDS + "|a|ab|abc|x-y|x"
    flat = re.compile(r"(?i:\b(?:" + words + r")\b)")
    tree = re.compile(r"(?i:\b(?:" + word_tree(words) + r")\b)")
    assert tree.pattern != flat.pattern
    samples = [
        *(w for w in words.split("|")),
        *(w + "s" for w in words.split("|")),
        *(w[:-1] for w in words.split("|")),
        *(w.upper() for w in words.split("|")),
        "the apis were down",
        "api-gateway",
        "Production logs",
        "prodx",
        "abcd ab",
        "x-y-z",
        "xy",
        "",
    ]
    assert [bool(tree.search(s)) for s in samples] == [bool(flat.search(s)) for s in samples]
    assert sum(bool(flat.search(s)) for s in samples) > 100  # most samples match: the test reads both sides


@pytest.mark.parametrize(
    ("text", "memory_type"),
    [
        # stop 29's trial of sentences not in the labelled set
        ("Can you keep replies under five lines?", "preference"),
        ("No spoilers for the new season please.", "preference"),
        ("Never paste the production database URL into the chat.", "security"),
    ],
)
def test_asks_about_replies_and_rules_about_secrets_are_typed_as_such(text, memory_type):
    assert infer_type(text) == memory_type
