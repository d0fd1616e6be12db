"""Chat histories people already have: ChatGPT, Claude.ai and DeepSeek exports, Markdown, plain text.

Each parser turns an export into `Conversation`s (an id, a title, normalized messages). They are pure
functions of the bytes: the import service stores the result and turns it into sessions in batches.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ultron.errors import ValidationFailed
from ultron.trajectory.messages import Message, parse_time


@dataclass
class Conversation:
    external_id: str
    title: str
    messages: list[Message]


_ROLE_MAP = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "chatgpt": "assistant",
    "claude": "assistant",
    "deepseek": "assistant",
    "bot": "assistant",
    "model": "assistant",
    "system": "system",
    "tool": "tool",
    "用户": "user",
    "助手": "assistant",
}


def _load_json(data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8-sig", errors="replace"))
    except ValueError as exc:
        raise ValidationFailed(f"the export is not valid JSON: {exc}") from None


def _conversation_list(doc: Any) -> list[dict[str, Any]]:
    if isinstance(doc, dict):
        for key in ("conversations", "data", "chats", "items"):
            if isinstance(doc.get(key), list):
                doc = doc[key]
                break
        else:
            doc = [doc]
    if not isinstance(doc, list):
        raise ValidationFailed("the export holds no list of conversations")
    return [c for c in doc if isinstance(c, dict)]


def _digest_id(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


# --- tree-shaped exports (ChatGPT, DeepSeek) --------------------------------------------------------


def _path_to(mapping: dict[str, Any], leaf: str | None) -> list[dict[str, Any]]:
    """Nodes from the root to `leaf` (the branch the user last saw); without a leaf, the longest chain."""
    if leaf is None or leaf not in mapping:
        leaves = [k for k, node in mapping.items() if isinstance(node, dict) and not node.get("children")]
        leaf = leaves[-1] if leaves else next(iter(mapping), None)
    chain: list[dict[str, Any]] = []
    seen: set[str] = set()
    while leaf is not None and leaf in mapping and leaf not in seen:
        seen.add(leaf)
        node = mapping[leaf]
        chain.append(node)
        leaf = node.get("parent")
    return list(reversed(chain))


def _chatgpt_message(node: dict[str, Any]) -> Message | None:
    msg = node.get("message")
    if not isinstance(msg, dict):
        return None
    role = _ROLE_MAP.get(str((msg.get("author") or {}).get("role") or "").lower())
    content = msg.get("content") or {}
    parts = content.get("parts") if isinstance(content, dict) else None
    if isinstance(parts, list):
        text = "\n".join(p for p in parts if isinstance(p, str))
    else:
        text = str(content.get("text") or "") if isinstance(content, dict) else str(content)
    if role is None or role == "system" or not text.strip():
        return None
    return Message(role=role, content=text, sent_at=parse_time(msg.get("create_time")))


def parse_chatgpt(data: bytes) -> list[Conversation]:
    out = []
    for i, conv in enumerate(_conversation_list(_load_json(data))):
        mapping = conv.get("mapping")
        if not isinstance(mapping, dict):
            continue
        nodes = _path_to(mapping, conv.get("current_node"))
        messages = [m for m in map(_chatgpt_message, nodes) if m is not None]
        cid = str(conv.get("conversation_id") or conv.get("id") or _digest_id(i, conv.get("title")))
        out.append(Conversation(cid, str(conv.get("title") or ""), messages))
    return out


def _deepseek_message(node: dict[str, Any]) -> list[Message]:
    msg = node.get("message")
    if not isinstance(msg, dict):
        return []
    when = parse_time(msg.get("inserted_at"))
    fragments = msg.get("fragments")
    if not isinstance(fragments, list):
        single = _chatgpt_message(node)
        return [single] if single else []
    out: list[Message] = []
    thinking = ""
    for f in fragments:
        if not isinstance(f, dict):
            continue
        kind, text = str(f.get("type") or "").upper(), str(f.get("content") or "")
        if kind == "REQUEST" and text.strip():
            out.append(Message(role="user", content=text, sent_at=when))
        elif kind == "THINK":
            thinking += text
        elif kind == "RESPONSE" and text.strip():
            out.append(Message(role="assistant", content=text, reasoning=thinking or None, sent_at=when))
            thinking = ""
    return out


def parse_deepseek(data: bytes) -> list[Conversation]:
    out = []
    for i, conv in enumerate(_conversation_list(_load_json(data))):
        mapping = conv.get("mapping")
        if not isinstance(mapping, dict):
            continue
        nodes = _path_to(mapping, conv.get("current_node"))
        messages = [m for node in nodes for m in _deepseek_message(node)]
        cid = str(conv.get("id") or _digest_id(i, conv.get("title")))
        out.append(Conversation(cid, str(conv.get("title") or ""), messages))
    return out


# --- Claude.ai ------------------------------------------------------------------------------------


def _claude_text(msg: dict[str, Any]) -> str:
    blocks = msg.get("content")
    if isinstance(blocks, list):
        texts = [str(b.get("text") or "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
        if any(texts):
            return "\n".join(t for t in texts if t)
    return str(msg.get("text") or "")


def parse_claude(data: bytes) -> list[Conversation]:
    out = []
    for i, conv in enumerate(_conversation_list(_load_json(data))):
        raw = conv.get("chat_messages")
        if not isinstance(raw, list):
            continue
        messages = []
        for msg in raw:
            if not isinstance(msg, dict):
                continue
            role = _ROLE_MAP.get(str(msg.get("sender") or msg.get("role") or "").lower())
            text = _claude_text(msg)
            if role and text.strip():
                messages.append(Message(role=role, content=text, sent_at=parse_time(msg.get("created_at"))))
        cid = str(conv.get("uuid") or conv.get("id") or _digest_id(i, conv.get("name")))
        out.append(Conversation(cid, str(conv.get("name") or ""), messages))
    return out


# --- Markdown and plain text ----------------------------------------------------------------------

_ROLE_LINE = re.compile(
    r"^\s*(?:#{1,6}\s*|\*\*|__)?\s*(user|human|assistant|ai|chatgpt|claude|deepseek|bot|model|system|用户|助手)"
    r"\s*(?:\*\*|__)?\s*[:：]?\s*(?:\*\*|__)?\s*(.*)$",
    re.IGNORECASE,
)
_SEPARATOR = re.compile(r"^\s*(?:-{3,}|={3,}|\*{3,})\s*$", re.MULTILINE)
_H1 = re.compile(r"^# (?!#)(.+)$", re.MULTILINE)


def _is_role_line(line: str) -> re.Match[str] | None:
    m = _ROLE_LINE.match(line)
    if m is None:
        return None
    # "User:" / "## Assistant" / "**Human:** text": a marker, not a sentence starting with the word.
    marker = line[: m.start(2)] if m.group(2) else line
    return m if (":" in marker or "：" in marker or marker.lstrip().startswith(("#", "*", "_"))) else None


def _turns(text: str) -> list[Message]:
    messages: list[Message] = []
    role: str | None = None
    buffer: list[str] = []

    def flush() -> None:
        body = "\n".join(buffer).strip()
        if body:
            messages.append(Message(role=role or "user", content=body))

    for line in text.splitlines():
        m = _is_role_line(line)
        if m is not None:
            flush()
            role, buffer = _ROLE_MAP[m.group(1).lower()], [m.group(2)]
        else:
            buffer.append(line)
    flush()
    return messages


def _documents(text: str, split_h1: bool) -> list[tuple[str, str]]:
    """(title, body) per conversation: separated by --- lines, or (Markdown) by top-level headings."""
    parts = [p for p in _SEPARATOR.split(text) if p.strip()]
    if split_h1 and len(parts) <= 1 and len(_H1.findall(text)) > 1:
        starts = [m.start() for m in _H1.finditer(text)]
        parts = [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]
    out = []
    for part in parts:
        heading = _H1.search(part) if split_h1 else None
        title = heading.group(1).strip() if heading else part.strip().splitlines()[0][:80]
        body = _H1.sub("", part, count=1) if heading else part
        out.append((title, body))
    return out


def _parse_plain(data: bytes, split_h1: bool) -> list[Conversation]:
    text = data.decode("utf-8-sig", errors="replace")
    out = []
    for i, (title, body) in enumerate(_documents(text, split_h1)):
        messages = _turns(body)
        if messages:
            title = title if split_h1 else " ".join(messages[0].content.split())[:80]
            out.append(Conversation(_digest_id(i, title, body[:200]), title, messages))
    return out


def parse_markdown(data: bytes) -> list[Conversation]:
    return _parse_plain(data, split_h1=True)


def parse_text(data: bytes) -> list[Conversation]:
    return _parse_plain(data, split_h1=False)


PARSERS: dict[str, Callable[[bytes], list[Conversation]]] = {
    "chatgpt": parse_chatgpt,
    "claude": parse_claude,
    "deepseek": parse_deepseek,
    "markdown": parse_markdown,
    "text": parse_text,
}
