"""Reusable experiences {content, context, resolution, confidence, tags} from a good segment.

With an LLM the segment's transcript goes through MemoryIntelligence.extract. Offline, one experience per
segment: the user's goal (with the errors met on the way) as content, the task and tools as context, and
the assistant's closing answer as resolution.
"""

from __future__ import annotations

import re
from typing import Any

from ultron.providers.tokens import truncate_to_tokens
from ultron.trajectory.messages import Message
from ultron.trajectory.metrics import is_tool_error, transcript

FIELD_TOKENS = 600
MAX_TOOLS_IN_TAGS = 3
MAX_ERRORS = 3
_ERROR_LINE = re.compile(r"^.*\b(\w*(Error|Exception)|error:|fatal:|command not found).*$", re.MULTILINE)


def _first_user(messages: list[Message]) -> str:
    return next((m.content.strip() for m in messages if m.role == "user" and m.content.strip()), "")


def _closing_answer(messages: list[Message]) -> str:
    return next(
        (m.content.strip() for m in reversed(messages) if m.role == "assistant" and m.content.strip()), ""
    )


def _tool_names(messages: list[Message]) -> list[str]:
    names = [str(c.get("name") or "") for m in messages for c in m.tool_calls or []]
    return [n for n in dict.fromkeys(names) if n]


def _error_lines(messages: list[Message]) -> list[str]:
    lines: list[str] = []
    for m in messages:
        if m.role == "tool" and is_tool_error(m):
            found = _ERROR_LINE.search(m.content)
            line = (found.group(0) if found else m.content.strip().splitlines()[-1:] or [""])[0]
            lines.append(" ".join(line.split())[:300])
    return list(dict.fromkeys(x for x in lines if x))[:MAX_ERRORS]


def heuristic_experience(messages: list[Message], topic: str, confidence: float) -> list[dict[str, Any]]:
    goal = _first_user(messages)
    answer = _closing_answer(messages)
    if not goal or not answer:
        return []
    errors = _error_lines(messages)
    content = goal if not errors else f"{goal}\nErrors met: " + "; ".join(errors)
    tools = _tool_names(messages)
    context = f"Task: {topic}" + (f". Tools used: {', '.join(tools)}" if tools else "")
    return [
        {
            "content": truncate_to_tokens(content, FIELD_TOKENS),
            "context": truncate_to_tokens(context, FIELD_TOKENS),
            "resolution": truncate_to_tokens(answer, FIELD_TOKENS),
            "confidence": round(confidence, 4),
            "tags": ["trajectory", *[t.lower()[:64] for t in tools[:MAX_TOOLS_IN_TAGS]]],
        }
    ]


def extract_experiences(
    messages: list[Message], topic: str, score: float, intelligence: Any, budget: int
) -> list[dict[str, Any]]:
    if intelligence is not None and getattr(intelligence, "llm_available", False):
        items = intelligence.extract(f"Task: {topic}\n\n" + transcript(messages, budget))
        for item in items:
            item["tags"] = list(dict.fromkeys(["trajectory", *item.get("tags", [])]))
        return items
    return heuristic_experience(messages, topic, score)
