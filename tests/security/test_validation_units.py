"""The shared validation layer and the safe YAML loader, at their edges."""

from __future__ import annotations

import json

import pytest

from ultron import safe_yaml, validation
from ultron.errors import ValidationFailed


def test_json_depth_counts_brackets_outside_strings_only():
    assert not validation.json_depth_exceeds(b"[" * 64 + b"]" * 64)
    assert validation.json_depth_exceeds(b"[" * 65 + b"]" * 65)
    in_string = json.dumps({"text": "[" * 500 + '\\" [[[ {{{'}).encode()
    assert not validation.json_depth_exceeds(in_string)
    escaped_quote = b'{"a": "\\"[[[[", "b": ' + b"[" * 70 + b"]" * 70 + b"}"
    assert validation.json_depth_exceeds(escaped_quote)


@pytest.mark.parametrize("value", ["a\x00b", "\ud800", "x\udfffy"])
def test_unstorable_text_is_refused_with_the_field_name(value):
    with pytest.raises(ValidationFailed, match="^content "):
        validation.check_text(value, "content")
    with pytest.raises(ValidationFailed, match=r"tags\[1\]"):
        validation.check_all({"tags": ["ok", value]})


def test_integers_past_a_bigint_and_bidi_paths_are_refused():
    with pytest.raises(ValidationFailed):
        validation.check_all({"offset": 2**63})
    validation.check_all({"offset": 2**63 - 1})
    with pytest.raises(ValidationFailed, match="bidi"):
        validation.check_path("notes/\u202etxt.exe")
    assert validation.check_path("notes/plain.md") == "notes/plain.md"


def test_safe_yaml_loads_ordinary_documents_and_refuses_bombs_and_depth():
    assert safe_yaml.load("a: &x {b: 1}\nc: *x\n") == {"a": {"b": 1}, "c": {"b": 1}}
    assert safe_yaml.load("") is None
    wide = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 5)
    )
    with pytest.raises(ValidationFailed, match="expands|aliases"):
        safe_yaml.load(wide)
    with pytest.raises(ValidationFailed, match="nested"):
        safe_yaml.load("a: " + "[" * 100 + "]" * 100)
    with pytest.raises(ValidationFailed, match="not valid YAML"):
        safe_yaml.load("a: [unclosed")
    with pytest.raises(ValidationFailed, match="the limit is 65536"):
        safe_yaml.load("a: " + "x" * 70_000)
