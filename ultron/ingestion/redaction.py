"""The one place where redaction applies to everything ingestion stores.

Session messages (text, reasoning, tool calls and results), raw archives, imported conversations and
ingest_text payloads all pass through a `Scrubber` before they reach the database or a model. With
redaction disabled (no redactor) it passes data through unchanged.
"""

from __future__ import annotations

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
        if self.redactor is None or not value:
            return value, {}
        result = self.redactor.redact(value)
        return result.text, dict(result.entities)

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
        """Archive bytes: decoded as UTF-8 (invalid bytes replaced), redacted, re-encoded."""
        if self.redactor is None:
            return data, {}
        clean, counts = self.text(data.decode("utf-8", errors="replace"))
        return clean.encode("utf-8"), counts
