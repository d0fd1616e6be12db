"""Heuristic segmentation and the metrics, on normalized messages (no database)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from ultron.ingestion.formats import parse_session
from ultron.trajectory.canonical import fingerprint
from ultron.trajectory.messages import Message
from ultron.trajectory.metrics import heuristic_metrics, weighted_total
from ultron.trajectory.segmentation import _valid_cover, heuristic_spans

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def user(text: str, minutes: float = 0) -> Message:
    return Message(role="user", content=text, sent_at=T0 + timedelta(minutes=minutes))


def assistant(text: str, minutes: float = 0, calls: list[str] | None = None) -> Message:
    tool_calls = [{"id": c, "name": "shell", "arguments": {}} for c in calls or []] or None
    return Message(
        role="assistant", content=text, tool_calls=tool_calls, sent_at=T0 + timedelta(minutes=minutes)
    )


def tool(call: str, text: str, minutes: float = 0) -> Message:
    return Message(role="tool", content=text, tool_call_id=call, sent_at=T0 + timedelta(minutes=minutes))


def test_a_new_goal_splits_and_a_follow_up_does_not():
    messages = [
        user("The nginx reverse proxy returns 502 for the billing api after deploy"),
        assistant("The upstream port changed; update proxy_pass."),
        user("Still 502 after updating proxy_pass, what next?"),
        assistant("Reload nginx: nginx -s reload."),
        user("Write a haiku about autumn leaves falling in the mountains"),
        assistant("Crimson leaves drift down..."),
    ]
    assert [(s.start, s.end) for s in heuristic_spans(messages)] == [(0, 3), (4, 5)]


def test_never_split_inside_a_tool_run_and_split_after_a_long_pause():
    messages = [
        user("Deploy the staging cluster with the new helm chart values"),
        assistant("Deploying.", calls=["c1"]),
        # An unrelated-looking user line while the tool call is open stays in the task.
        user("Meanwhile compile a grocery list for tonight's dinner party please"),
        tool("c1", "release upgraded"),
        assistant("Deployed.", minutes=1),
        user("deploy staging cluster helm chart again with replicas three", minutes=120),
        assistant("Done.", minutes=121),
    ]
    assert [(s.start, s.end) for s in heuristic_spans(messages)] == [(0, 4), (5, 6)]


def test_segments_cover_every_message_contiguously():
    rows = []
    for i in range(90):
        topic = i // 9
        role = "user" if i % 3 == 0 else "assistant"
        rows.append(
            {"role": role, "content": f"topic {topic} step {i} alpha{topic}x beta{topic}y gamma{topic}z"}
        )
    data = "\n".join(json.dumps(r) for r in rows).encode()
    messages = parse_session(data).messages
    spans = heuristic_spans(messages)
    assert spans[0].start == 0 and spans[-1].end == len(messages) - 1
    assert all(a.end + 1 == b.start for a, b in zip(spans, spans[1:], strict=False))


def test_llm_answers_must_cover_the_window_exactly():
    assert _valid_cover({"segments": [{"start": 1, "end": 3}, {"start": 4, "end": 5}]}, 5)
    assert _valid_cover([{"start": 1, "end": 5}], 5)
    assert _valid_cover({"segments": [{"start": 1, "end": 3}, {"start": 5, "end": 5}]}, 5) is None  # gap
    assert _valid_cover({"segments": [{"start": 1, "end": 3}, {"start": 3, "end": 5}]}, 5) is None  # overlap
    assert _valid_cover({"segments": [{"start": 1, "end": 4}]}, 5) is None  # short
    assert _valid_cover({"segments": [{"start": "1", "end": 5}]}, 5) is None
    assert _valid_cover("garbage", 5) is None


def test_fingerprints_are_16_hex_and_ignore_timestamps():
    a = [user("hello there", 0), assistant("hi", 1)]
    b = [user("hello there", 50), assistant("hi", 51)]
    assert fingerprint(a) == fingerprint(b) and len(fingerprint(a)) == 16
    assert fingerprint(a) != fingerprint([user("hello there!"), assistant("hi")])


def test_metrics_read_the_trajectory():
    good = [
        user("fix the failing build"),
        assistant("running", calls=["a"]),
        tool("a", "error: linker failed"),
        assistant("retrying with the flag", calls=["b"]),
        tool("b", "build ok"),
        assistant("Fixed: the build passes now."),
        user("thanks!"),
    ]
    metrics = heuristic_metrics(good)
    assert metrics["completion"].value == 1.0
    assert metrics["tool_success"].value == 0.5 and metrics["errors_recovered"].value == 1.0
    assert weighted_total(metrics) >= 0.7
    corrected = [
        user("rename the module"),
        assistant("renamed utils"),
        user("no, that's wrong, I meant helpers"),
    ]
    assert heuristic_metrics(corrected)["user_corrections"].value == 0.5
    assert weighted_total(heuristic_metrics(corrected)) < 0.7


def _fixed_then(reply: str) -> list[Message]:
    edit = [
        {"id": "e", "name": "Edit", "arguments": {"file_path": "a.py", "old_string": "x", "new_string": "y"}}
    ]
    check = [{"id": "t", "name": "Bash", "arguments": {"command": "pytest -q"}}]
    return [
        Message("user", "the loader crashes on files with a byte order mark, make it handle them"),
        Message("assistant", "", tool_calls=edit),
        Message("tool", "edited", tool_call_id="e"),
        Message("assistant", "", tool_calls=check),
        Message("tool", "4 passed in 0.31s", tool_call_id="t", is_error=False),
        Message("assistant", "Fixed: the loader opens files as utf-8-sig."),
        Message("user", reply),
        Message("assistant", "On it."),
    ]


def test_a_request_after_a_finished_task_is_a_task_of_its_own():
    spans = heuristic_spans(_fixed_then("thanks! now also add a test for the byte order mark case"))
    assert [(s.start, s.end) for s in spans] == [(0, 5), (6, 7)]


@pytest.mark.parametrize(
    "reply",
    [
        "thanks, but the loader still crashes on the acme file",
        "same error on the byte order mark file",
        "thanks!",
    ],
)
def test_a_reply_that_the_work_is_not_done_stays_in_its_task(reply):
    assert [(s.start, s.end) for s in heuristic_spans(_fixed_then(reply))] == [(0, 7)]
