"""Tolerant JSON extraction from LLM output."""

from __future__ import annotations

from typing import Any

import pytest

from ultron.providers.jsonparse import parse_json, parse_json_object


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"memory_type": "error"}', {"memory_type": "error"}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ("```\n[1, 2, 3]\n```", [1, 2, 3]),
        ('Sure! Here is the JSON:\n```json\n{"same": true}\n```\nHope it helps.', {"same": True}),
        ('Here you go: {"l0": "短", "l1": "长"} -- done', {"l0": "短", "l1": "长"}),
        ('{"a": 1}}', {"a": 1}),  # trailing junk the decoder stops before
        ('<think>maybe {"memory_type": "life"}?</think>{"memory_type": "error"}', {"memory_type": "error"}),
        ('Use {braces} carefully. {"ok": [1, {"x": null}]}', {"ok": [1, {"x": None}]}),
        ('{"text": "a } inside a string"}', {"text": "a } inside a string"}),
    ],
)
def test_parses_wrapped_json(text: str, expected: Any) -> None:
    assert parse_json(text) == expected


@pytest.mark.parametrize(
    "text",
    [None, "", "   ", "no json here", '{"a": 1', "```json\n{broken: yes}\n```", "42", '"just a string"', 12],
)
def test_unreadable_output_is_none(text: Any) -> None:
    assert parse_json(text) is None


def test_deeply_nested_input_does_not_raise() -> None:
    assert parse_json("[" * 100_000) is None


def test_parse_json_object_rejects_arrays() -> None:
    assert parse_json_object("[1, 2]") is None
    assert parse_json_object('x {"k": "v"} y') == {"k": "v"}
