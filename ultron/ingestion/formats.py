"""Session files as agents write them, normalized to one message shape.

Supported, detected line by line: OpenAI-style message JSONL, Anthropic content-block JSONL, Claude Code
session logs (`{"type": "user"|"assistant", "message": {...}}`) and Codex CLI session logs (rollout files
with `{"type": "response_item", "payload": {...}}`, and the older bare-item layout). A line that is not
JSON, or JSON that none of them describes, is reported with its line number and skipped.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ultron.trajectory.messages import Message, parse_time

ROLES = ("system", "user", "assistant", "tool")
# Claude Code and Codex write bookkeeping lines that carry no conversation.
_SKIPPED_TYPES = {
    "summary",
    "file-history-snapshot",
    "turn_context",
    "event_msg",
    "compacted",
    "queue-operation",
    "state",
}


@dataclass
class LineError:
    line: int
    error: str


@dataclass
class ParsedSession:
    messages: list[Message] = field(default_factory=list)
    errors: list[LineError] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    formats: Counter[str] = field(default_factory=Counter)

    @property
    def format(self) -> str:
        return self.formats.most_common(1)[0][0] if self.formats else "empty"


def _text_of(value: Any) -> str:
    """Text from a string, a list of content parts or blocks, or a dict with a text field."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(t for t in (_text_of(v) for v in value) if t)
    if isinstance(value, dict):
        for key in ("text", "content", "output", "input_text", "output_text"):
            if key in value and value.get("type") not in ("image", "image_url", "input_image"):
                return _text_of(value[key])
        return ""
    return str(value)


def _arguments(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _tool_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    return {"id": str(call_id or ""), "name": str(name or ""), "arguments": _arguments(arguments)}


# --- OpenAI-style -----------------------------------------------------------------------------------


def _openai(obj: dict[str, Any], line: int, when: datetime | None) -> list[Message]:
    role = obj.get("role")
    if role == "function":
        role = "tool"
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}")
    calls = None
    if isinstance(obj.get("tool_calls"), list):
        calls = [
            _tool_call(
                c.get("id"), (c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments")
            )
            for c in obj["tool_calls"]
            if isinstance(c, dict)
        ]
    elif isinstance(obj.get("function_call"), dict):
        fc = obj["function_call"]
        calls = [_tool_call(None, fc.get("name"), fc.get("arguments"))]
    reasoning = obj.get("reasoning_content") or obj.get("reasoning")
    return [
        Message(
            role=role,
            content=_text_of(obj.get("content")),
            reasoning=_text_of(reasoning) or None,
            tool_calls=calls or None,
            tool_call_id=obj.get("tool_call_id"),
            name=obj.get("name"),
            is_error=obj.get("is_error") if isinstance(obj.get("is_error"), bool) else None,
            stop_reason=obj.get("stop_reason") or obj.get("finish_reason"),
            sent_at=when,
            line=line,
        )
    ]


# --- Anthropic content blocks (also the inner message of Claude Code logs) --------------------------


def _anthropic(obj: dict[str, Any], line: int, when: datetime | None) -> list[Message]:
    role = obj.get("role")
    if role not in ("user", "assistant", "system"):
        raise ValueError(f"unknown role {role!r}")
    blocks = obj.get("content")
    if not isinstance(blocks, list):
        return _openai(obj, line, when)
    texts: list[str] = []
    thinking: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[Message] = []
    for block in blocks:
        if isinstance(block, str):
            texts.append(block)
            continue
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text") or ""))
        elif kind in ("thinking", "redacted_thinking"):
            thinking.append(str(block.get("thinking") or ""))
        elif kind in ("tool_use", "server_tool_use"):
            calls.append(_tool_call(block.get("id"), block.get("name"), block.get("input")))
        elif kind == "tool_result":
            results.append(
                Message(
                    role="tool",
                    content=_text_of(block.get("content")),
                    tool_call_id=block.get("tool_use_id"),
                    is_error=bool(block.get("is_error")) if "is_error" in block else None,
                    sent_at=when,
                    line=line,
                )
            )
    out = list(results)
    text = "\n".join(t for t in texts if t)
    if text or calls or thinking:
        out.append(
            Message(
                role=role,
                content=text,
                reasoning="\n".join(thinking) or None,
                tool_calls=calls or None,
                stop_reason=obj.get("stop_reason"),
                sent_at=when,
                line=line,
            )
        )
    return out


# --- Codex CLI ------------------------------------------------------------------------------------


def _codex_item(item: dict[str, Any], line: int, when: datetime | None) -> list[Message]:
    kind = item.get("type")
    if kind == "message":
        role = item.get("role")
        role = "system" if role == "developer" else role
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}")
        return [Message(role=role, content=_text_of(item.get("content")), sent_at=when, line=line)]
    if kind in ("function_call", "custom_tool_call"):
        args = item.get("arguments", item.get("input"))
        call = _tool_call(item.get("call_id") or item.get("id"), item.get("name"), args)
        return [Message(role="assistant", tool_calls=[call], sent_at=when, line=line)]
    if kind == "local_shell_call":
        call = _tool_call(item.get("call_id") or item.get("id"), "shell", item.get("action"))
        return [Message(role="assistant", tool_calls=[call], sent_at=when, line=line)]
    if kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
        output = item.get("output")
        parsed = _arguments(output)
        text, is_error = output, None
        if isinstance(parsed, dict):
            text = parsed.get("output", output)
            code = (parsed.get("metadata") or {}).get("exit_code")
            is_error = None if code is None else code != 0
        return [
            Message(
                role="tool",
                content=_text_of(text),
                tool_call_id=item.get("call_id"),
                is_error=is_error,
                sent_at=when,
                line=line,
            )
        ]
    if kind == "reasoning":
        text = _text_of(item.get("summary")) or _text_of(item.get("content"))
        return [Message(role="assistant", reasoning=text or None, sent_at=when, line=line)] if text else []
    if kind in ("web_search_call", "ghost_snapshot"):
        return []
    raise ValueError(f"unknown Codex item type {kind!r}")


# --- dispatch -------------------------------------------------------------------------------------


def normalize_line(obj: Any, line: int, session: ParsedSession) -> list[Message]:
    """The messages one JSON line holds (possibly none); raises ValueError for an unknown shape."""
    if not isinstance(obj, dict):
        raise ValueError("line is not a JSON object")
    when = parse_time(obj.get("timestamp") or obj.get("created_at") or obj.get("time"))
    kind = obj.get("type")
    if obj.get("_type") == "metadata" or kind in ("session_meta", "metadata"):
        meta: dict[str, Any] = obj["payload"] if isinstance(obj.get("payload"), dict) else obj
        session.metadata.update({k: v for k, v in meta.items() if k not in ("_type", "type", "instructions")})
        session.formats["codex" if kind == "session_meta" else "openai"] += 0
        return []
    if "payload" in obj and kind in ("response_item", "event_msg", "turn_context", "compacted"):
        session.formats["codex"] += 1
        if kind != "response_item":
            return []
        payload = obj["payload"]
        if not isinstance(payload, dict):
            raise ValueError("payload is not an object")
        return _codex_item(payload, line, when)
    if kind in ("user", "assistant", "system") and isinstance(obj.get("message"), dict):
        session.formats["claude_code"] += 1
        if obj.get("sessionId"):
            session.metadata.setdefault("session_id", obj["sessionId"])
        if obj.get("cwd"):
            session.metadata.setdefault("cwd", obj["cwd"])
        inner = dict(obj["message"])
        inner.setdefault("role", kind)
        if inner.get("role") not in ("user", "assistant", "system"):
            inner["role"] = kind
        return _anthropic(inner, line, when)
    if kind in _SKIPPED_TYPES or obj.get("record_type") == "state":
        return []
    if kind in ("message", "function_call", "function_call_output", "reasoning", "local_shell_call"):
        session.formats["codex"] += 1
        return _codex_item(obj, line, when)
    if "id" in obj and "instructions" in obj and "role" not in obj:  # old Codex header line
        session.formats["codex"] += 1
        session.metadata.update({"session_id": obj.get("id")})
        return []
    if "role" in obj:
        content = obj.get("content")
        blocky = isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result", "thinking") for b in content
        )
        session.formats["anthropic" if blocky else "openai"] += 1
        return _anthropic(obj, line, when) if blocky else _openai(obj, line, when)
    raise ValueError("no role, type or payload: not a message this hub knows")


def _merge_reasoning(messages: list[Message]) -> list[Message]:
    """Codex writes reasoning as its own item; attach it to the assistant message that follows."""
    out: list[Message] = []
    pending: list[str] = []
    for m in messages:
        if m.role == "assistant" and m.reasoning and not m.content and not m.tool_calls:
            pending.append(m.reasoning)
            continue
        if pending and m.role == "assistant":
            m.reasoning = "\n".join([*pending, m.reasoning or ""]).strip() or None
            pending = []
        out.append(m)
    if pending:
        out.append(Message(role="assistant", reasoning="\n".join(pending)))
    return out


def _is_empty(m: Message) -> bool:
    return not (m.content.strip() or m.tool_calls or m.reasoning or m.role == "tool")


def parse_session(data: bytes) -> ParsedSession:
    """Parse a session file; bad lines become LineErrors (1-based line numbers), the rest messages."""
    session = ParsedSession()
    text = data.decode("utf-8-sig", errors="replace")  # editors on Windows write a BOM
    messages: list[Message] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError as exc:  # JSONDecodeError, or int() refusing a 4,300-digit number
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            session.errors.append(LineError(number, f"not JSON: {why}"))
            continue
        try:
            messages.extend(normalize_line(obj, number, session))
        except (ValueError, TypeError, AttributeError) as exc:
            session.errors.append(LineError(number, str(exc)))
    session.messages = [m for m in _merge_reasoning(messages) if not _is_empty(m)]
    return session
