"""The one message shape every session is normalized to (ingestion's parsers produce it; the trajectory
pipeline segments, scores and extracts from it)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


@dataclass
class Message:
    """One normalized message. `line` is where it came from (1-based) in the source file."""

    role: str
    content: str = ""
    reasoning: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool | None = None
    stop_reason: str | None = None
    sent_at: datetime | None = None
    line: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "content": self.content,
            "reasoning": self.reasoning,
            "tool_calls": self.tool_calls,
            "tool_call_id": self.tool_call_id,
            "name": self.name,
            "is_error": self.is_error,
            "stop_reason": self.stop_reason,
            "sent_at": self.sent_at.isoformat() if self.sent_at else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Message:
        sent = data.get("sent_at")
        return cls(
            role=data["role"],
            content=data.get("content") or "",
            reasoning=data.get("reasoning"),
            tool_calls=data.get("tool_calls"),
            tool_call_id=data.get("tool_call_id"),
            name=data.get("name"),
            is_error=data.get("is_error"),
            stop_reason=data.get("stop_reason"),
            sent_at=parse_time(sent) if sent else None,
        )


def parse_time(value: Any) -> datetime | None:
    """ISO 8601 strings and Unix seconds (or milliseconds) to aware UTC datetimes."""
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            seconds = value / 1000.0 if value > 1e11 else float(value)
            return datetime.fromtimestamp(seconds, tz=UTC)
        if isinstance(value, str) and value.strip():
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return None
