"""The one input-validation layer that REST, MCP, the SDK and the CLI share.

Postgres cannot store NUL in text, UTF-8 cannot carry a lone surrogate, a bigint stops at 2**63 - 1 and
Python's JSON parser recurses once per nesting level: each of those, let through, used to surface as a
500 deep inside a query. They are refused here, up front, as a 4xx with a message that names the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel

from ultron.errors import ValidationFailed

# REST's caps on free-text questions (`POST /memories/search` query, the brief's task hint).
MAX_QUERY_CHARS = 4000
MAX_TASK_CHARS = 4000
# A JSON document nested deeper than this is refused before it is parsed.
MAX_JSON_DEPTH = 64
# Offsets, limits and version parts must fit a Postgres bigint (and any sane page).
MAX_INT = 2**63 - 1
# A column of Postgres' `integer` (a thread position, a count) stops at 2**31 - 1: a request field bound
# for one is capped here so that it is a 422 naming the field, not a 500 from the INSERT or, stored, an
# overflow in every later query that adds to it.
INT4_MAX = 2**31 - 1
MAX_OFFSET = 1_000_000_000

_SURROGATE = re.compile("[\ud800-\udfff]")
# Bidirectional controls reorder how a name is shown (U+202E makes "exe.txt" read "txt.exe").
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def text_problem(value: str) -> str | None:
    """Why `value` cannot be stored as text, or None."""
    if "\x00" in value:
        return "contains a NUL character (\\u0000): text cannot hold binary data"
    if _SURROGATE.search(value):
        return "contains a lone UTF-16 surrogate, which is not valid Unicode"
    return None


def check_text(value: str, field: str, *, max_chars: int | None = None) -> str:
    problem = text_problem(value)
    if problem is not None:
        raise ValidationFailed(f"{field} {problem}")
    if max_chars is not None and len(value) > max_chars:
        raise ValidationFailed(f"{field} is {len(value)} characters; the limit is {max_chars}")
    return value


def check_int(value: int, field: str, *, low: int = 0, high: int = MAX_INT) -> int:
    if not low <= value <= high:
        raise ValidationFailed(f"{field} must be between {low} and {high}")
    return value


def path_problem(value: str) -> str | None:
    """Why `value` cannot be a file or import name (text problems, bidi or other control characters)."""
    problem = text_problem(value)
    if problem is not None:
        return problem
    if any(ch in BIDI_CONTROLS or (ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0) for ch in value):
        return f"{value.encode('unicode_escape').decode()!r} holds a bidi or control character"
    return None


def check_path(value: str, field: str = "path") -> str:
    """A file name inside a skill or an upload: plain text without bidirectional or control characters."""
    problem = path_problem(value)
    if problem is not None:
        raise ValidationFailed(f"{field} {problem}")
    return value


def _path_name(value: str) -> str:
    problem = path_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


# A request field that names a file or an import (refused with a 422 like check_path).
PathName = Annotated[str, AfterValidator(_path_name)]


def _strings(value: Any, where: str, depth: int = 0) -> Iterator[tuple[str, str]]:
    if depth > MAX_JSON_DEPTH:
        raise ValidationFailed(f"input is nested deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, BaseModel):
        yield from _strings(value.model_dump(), where, depth + 1)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            name = f"{where}.{key}" if where else str(key)
            if isinstance(key, str):
                yield name, key
            yield from _strings(item, name, depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        for i, item in enumerate(value):
            yield from _strings(item, f"{where}[{i}]", depth + 1)
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        raise ValidationFailed(f"{where or 'value'} is out of range")


def check_all(value: Any, where: str = "") -> None:
    """Every string anywhere in `value` (dicts, lists, pydantic models) is storable text."""
    for name, text in _strings(value, where):
        check_text(text, name or "value")


def json_depth_exceeds(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether a JSON text nests deeper than `limit`, found by one scan (no parse, no recursion)."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False  # cannot nest deeper than the brackets it holds
    depth = 0
    in_string = escaped = False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return False
