"""Tolerant JSON extraction from LLM output. Never raises: anything unreadable is None."""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
# Reasoning models may think aloud before answering; the thoughts can hold braces of their own.
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
# Prose before the answer may hold stray brackets; try this many opening positions before giving up.
MAX_DECODE_STARTS = 32

_decoder = json.JSONDecoder()


def _candidates(text: str) -> list[str]:
    """The fenced blocks first (the model's own marking of its answer), then the whole text."""
    text = _THINK.sub("", text).strip()
    return [block.strip() for block in _FENCE.findall(text)] + [text]


def _raw_decode_first(text: str) -> Any | None:
    starts = [i for i, ch in enumerate(text) if ch in "{["][:MAX_DECODE_STARTS]
    for start in starts:
        try:
            value, _ = _decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict | list):
            return value
    return None


def _bracket_slice(text: str) -> Any | None:
    """Outermost {...} or [...] slice; catches JSON with junk the decoder stops at, e.g. `{...}}`."""
    for open_ch, close_ch in ("{}", "[]"):
        start, end = text.find(open_ch), text.rfind(close_ch)
        if 0 <= start < end:
            try:
                return json.loads(text[start : end + 1])
            except ValueError:
                continue
    return None


def _parse_one(text: str) -> Any | None:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict | list):
        return value
    found = _raw_decode_first(text)
    return found if found is not None else _bracket_slice(text)


def parse_json(text: object) -> Any | None:
    """The first JSON object or array in `text`, or None."""
    if not isinstance(text, str) or not text.strip():
        return None
    for candidate in _candidates(text):
        try:
            value = _parse_one(candidate)
        except RecursionError:
            return None
        if value is not None:
            return value
    return None


def parse_json_object(text: object) -> dict[str, Any] | None:
    """Like parse_json, but only a JSON object counts."""
    value = parse_json(text)
    return value if isinstance(value, dict) else None
