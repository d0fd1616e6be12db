"""Canonical message content, message digests and segment fingerprints."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from ultron.trajectory.messages import Message


def canonical(m: Message) -> str:
    """The parts of a message that define it (timestamps and source lines do not)."""
    body: dict[str, Any] = {
        "role": m.role,
        "content": m.content,
        "reasoning": m.reasoning,
        "tool_calls": m.tool_calls,
        "tool_call_id": m.tool_call_id,
        "stop_reason": m.stop_reason,
    }
    return json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def message_digest(m: Message) -> str:
    return hashlib.sha256(canonical(m).encode()).hexdigest()[:16]


def fingerprint(messages: Iterable[Message]) -> str:
    """16 hex characters of SHA-256 over the canonical content of the messages, in order."""
    h = hashlib.sha256()
    for m in messages:
        h.update(canonical(m).encode())
        h.update(b"\n")
    return h.hexdigest()[:16]
