"""The one place where redaction applies to everything ingestion stores.

Session messages (text, reasoning, tool calls and results), raw archives, imported conversations and
ingest_text payloads all pass through a `Scrubber` before they reach the database or a model. With
redaction disabled (no redactor) it passes data through unchanged.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from ultron.trajectory.messages import Message


class Scrubber:
    def __init__(self, redactor: Any):
        self.redactor = redactor

    @property
    def enabled(self) -> bool:
        return self.redactor is not None

    def text(self, value: str) -> tuple[str, dict[str, int]]:
        """`value` redacted; a long one in pieces of whole lines (TEXT_PIECE_CHARS): the NER model refuses a
        text over 1,000,000 characters (spaCy's max_length), which failed a session file with such a
        message and left every such archive unwritten."""
        if self.redactor is None or not value:
            return value, {}
        if len(value) <= TEXT_PIECE_CHARS:
            result = self.redactor.redact(value)
            return result.text, dict(result.entities)
        total: Counter[str] = Counter()
        pieces = []
        for piece in _pieces(value, TEXT_PIECE_CHARS):
            result = self.redactor.redact(piece)
            pieces.append(result.text)
            total.update(result.entities)
        return "".join(pieces), dict(total)

    def json(self, value: Any) -> tuple[Any, dict[str, int]]:
        if self.redactor is None or value is None:
            return value, {}
        clean, counts = self.redactor.redact_json(value)
        return clean, dict(counts)

    def messages(self, messages: list[Message]) -> dict[str, int]:
        """Redact messages in place; returns entity counts summed over them."""
        total: Counter[str] = Counter()
        if self.redactor is None:
            return {}
        for m in messages:
            m.content, found = self.text(m.content)
            total.update(found)
            if m.reasoning:
                m.reasoning, found = self.text(m.reasoning)
                total.update(found)
            if m.tool_calls:
                m.tool_calls, found = self.json(m.tool_calls)
                total.update(found)
        return dict(total)

    def raw(self, data: bytes) -> tuple[bytes, dict[str, int]]:
        """Archive bytes: decoded as UTF-8 (invalid bytes replaced), redacted, re-encoded. A JSON or JSON
        Lines file is redacted value by value, keys too, and written back one object a line: its strings are
        the messages just redacted (lookups), where the whole file read as one text ran the NER model over
        its keys, timestamps and escapes (~60 ms a small session file, 90 % of its ingest)."""
        if self.redactor is None:
            return data, {}
        text = data.decode("utf-8", errors="replace")
        parsed = _json_objects(text)
        if parsed is None:
            clean, counts = self.text(text)
            return clean.encode("utf-8"), counts
        total: Counter[str] = Counter()
        keys: dict[str, str] = {}
        lines = []
        for obj in parsed:
            if obj is _BLANK:
                lines.append("")
                continue
            clean_obj, found = self.json(self._keys(obj, keys, total))
            total.update(found)
            lines.append(json.dumps(clean_obj, ensure_ascii=False))
        return "\n".join(lines).encode("utf-8"), dict(total)

    def _keys(self, value: Any, seen: dict[str, str], total: Counter[str]) -> Any:
        """`value` with its dicts' keys redacted, each distinct key once (values: the redactor's
        `redact_json`)."""
        if isinstance(value, dict):
            out = {}
            for key, item in value.items():
                if isinstance(key, str) and key not in seen:
                    seen[key], found = self.text(key)
                    total.update(found)
                out[seen.get(key, key)] = self._keys(item, seen, total)
            return out
        if isinstance(value, list):
            return [self._keys(item, seen, total) for item in value]
        return value


# A text archive is redacted in pieces of whole lines of about this many characters.
TEXT_PIECE_CHARS = 100_000


def _pieces(text: str, size: int) -> list[str]:
    """`text` cut after a line end every `size` characters or so (a longer line is one piece)."""
    out: list[str] = []
    start = 0
    while start < len(text):
        cut = text.find("\n", start + size)
        end = len(text) if cut < 0 else cut + 1
        out.append(text[start:end])
        start = end
    return out


_BLANK = object()


def _json_objects(text: str) -> list[Any] | None:
    """The file as one JSON document ([it]) or as JSON Lines (one value a line, _BLANK for a blank line);
    None when it is neither."""
    try:
        return [json.loads(text)]
    except ValueError:
        pass
    out: list[Any] = []
    for line in text.split("\n"):
        if not line.strip():
            out.append(_BLANK)
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            return None
    return out
