"""Format normalizers on edge cases (no database)."""

from __future__ import annotations

import json

from ultron.ingestion.formats import parse_session
from ultron.trajectory.messages import Message, parse_time


def _parse(*lines: object) -> object:
    return parse_session("\n".join(json.dumps(line) for line in lines).encode())


def test_old_codex_layout_and_reasoning_attach_to_the_next_answer():
    parsed = _parse(
        {"id": "abc", "timestamp": "2025-04-01T10:00:00Z", "instructions": "be helpful"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "use ls"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "run ls"}]},
        {"record_type": "state"},
    )
    assert parsed.format == "codex" and parsed.errors == []
    assert [(m.role, m.content, m.reasoning) for m in parsed.messages] == [
        ("user", "list files", None),
        ("assistant", "run ls", "use ls"),
    ]


def test_openai_legacy_function_call_and_unknown_roles():
    parsed = _parse(
        {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": '{"x": 1}'}},
        {"role": "function", "name": "f", "content": "42"},
        {"role": "narrator", "content": "?"},
    )
    calls = parsed.messages[0].tool_calls
    assert calls == [{"id": "", "name": "f", "arguments": {"x": 1}}]
    assert parsed.messages[1].role == "tool"
    assert [e.line for e in parsed.errors] == [3]


def test_times_and_message_round_trip():
    assert parse_time(1714636800.5).year == 2024
    assert parse_time(1714636800500).year == 2024  # milliseconds
    assert parse_time("2025-06-01T10:00:00.000Z").tzinfo is not None
    assert parse_time("yesterday") is None
    m = Message(
        role="tool", content="x", tool_call_id="c", is_error=True, sent_at=parse_time("2025-01-01T00:00:00Z")
    )
    assert Message.from_json(m.to_json()) == m


def test_blank_lines_and_bom_are_not_errors():
    parsed = parse_session(
        b'\xef\xbb\xbf{"role": "user", "content": "hi"}\n\n   \n{"role": "assistant", "content": "yo"}\n'
    )
    assert len(parsed.messages) == 2
