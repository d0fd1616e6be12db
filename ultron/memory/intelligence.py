"""The memory pipeline's judgement calls: an LLM when one is configured, the heuristics otherwise.

Every LLM answer is parsed and validated; a provider error or an unusable answer is logged, counted and
answered by the heuristic instead, so no method raises because a model misbehaved. The one exception
is `merge`: when an LLM is configured and fails, the caller keeps the stored text (returns None)
rather than getting the heuristic's cruder merge, and the next duplicate upload retries.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from ultron.memory import heuristic, prompts
from ultron.memory.text import MEMORY_TYPES
from ultron.providers.base import ChatModel, ProviderError
from ultron.providers.jsonparse import parse_json
from ultron.providers.tokens import count_tokens, truncate_to_tokens

logger = logging.getLogger(__name__)

DEFAULT_MAX_INPUT_TOKENS = 8192
# The classifier needs the gist, not the whole record.
CLASSIFY_INPUT_TOKENS = 3072
# Each side of a same-subject judgement; the subject is in the head of a memory.
JUDGE_SIDE_TOKENS = 512
# Per-field floor for merge inputs, so a small budget still shows the model something of each field.
MERGE_FIELD_INPUT_MIN_TOKENS = 64
MERGE_FIELD_MAX_TOKENS = 2048
EXTRACT_MAX_CHUNKS = 8
EXTRACT_MAX_ITEMS = 50
EXTRACT_FIELD_MAX_TOKENS = 1024
EXTRACT_DEFAULT_CONFIDENCE = 0.7
MAX_TAGS = 10
# Shares of an input budget given to each field of a memory.
FIELD_SHARES = {"content": 0.6, "context": 0.2, "resolution": 0.2}
# Answer budgets; estimates over-count English, so these leave the model room.
CLASSIFY_REPLY_TOKENS = 64
JUDGE_REPLY_TOKENS = 64
EXTRACT_REPLY_TOKENS = 4096


def _memory_fields(content: str, context: str, resolution: str, budget: int) -> dict[str, str]:
    values = {"content": content, "context": context, "resolution": resolution}
    return {
        name: truncate_to_tokens(value or "", max(int(budget * FIELD_SHARES[name]), 1))
        for name, value in values.items()
    }


def _record_fields(memory: dict[str, Any], budget: int) -> dict[str, str]:
    return _memory_fields(
        str(memory.get("content") or ""),
        str(memory.get("context") or ""),
        str(memory.get("resolution") or ""),
        budget,
    )


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "false", "no"):
        return value.strip().lower() in ("true", "yes")
    return None


def _confidence(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return EXTRACT_DEFAULT_CONFIDENCE
    return min(max(number, 0.0), 1.0) if number == number else EXTRACT_DEFAULT_CONFIDENCE


def _tags(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    tags = [tag.strip().lower() for tag in value if isinstance(tag, str) and tag.strip()]
    return list(dict.fromkeys(tags))[:MAX_TAGS]


def _extracted_item(raw: Any) -> dict[str, Any] | None:
    """A validated extraction item, or None if it has no content or non-text fields."""
    if not isinstance(raw, dict):
        return None
    fields = {name: raw.get(name) or "" for name in ("content", "context", "resolution")}
    if not all(isinstance(value, str) for value in fields.values()) or not fields["content"].strip():
        return None
    item: dict[str, Any] = {
        name: truncate_to_tokens(value.strip(), EXTRACT_FIELD_MAX_TOKENS) for name, value in fields.items()
    }
    item["confidence"] = _confidence(raw.get("confidence"))
    item["tags"] = _tags(raw.get("tags"))
    return item


def _chunks(text: str, budget: int) -> list[str]:
    """Paragraphs packed greedily into chunks of at most `budget` tokens; an oversized paragraph is cut."""
    chunks: list[str] = []
    current: list[str] = []
    used = 0
    for paragraph in (p.strip() for p in text.split("\n\n")):
        if not paragraph:
            continue
        paragraph = truncate_to_tokens(paragraph, budget)
        cost = count_tokens(paragraph)
        if current and used + cost > budget:
            chunks.append("\n\n".join(current))
            current, used = [], 0
        current.append(paragraph)
        used += cost
    if current:
        chunks.append("\n\n".join(current))
    return chunks


class MemoryIntelligence:
    """Type, summaries, same-subject judgement, merge and extraction for memories. Thread-safe."""

    def __init__(
        self,
        chat: ChatModel | None,
        *,
        l0_max_tokens: int = 64,
        l1_max_tokens: int = 256,
        max_input_tokens: int = DEFAULT_MAX_INPUT_TOKENS,
    ) -> None:
        self._chat = chat
        self.l0_max_tokens = l0_max_tokens
        self.l1_max_tokens = l1_max_tokens
        self.max_input_tokens = max_input_tokens
        self._counts = {"llm_calls": 0, "llm_failures": 0, "fallbacks": 0}
        self._lock = threading.Lock()

    @property
    def llm_available(self) -> bool:
        return self._chat is not None

    @property
    def counters(self) -> dict[str, int]:
        """A snapshot of llm_calls, llm_failures and fallbacks, for metrics."""
        with self._lock:
            return dict(self._counts)

    def _count(self, *names: str) -> None:
        with self._lock:
            for name in names:
                self._counts[name] += 1

    def _failed(self, task: str, reason: str, *, fallback: bool = True) -> None:
        # The reason only: prompts and answers hold user data and stay out of logs.
        logger.warning("LLM %s failed (%s)%s", task, reason, "; using the heuristic" if fallback else "")
        self._count("llm_failures", *(["fallbacks"] if fallback else []))

    def ask_text(
        self, task: str, system: str, user: str, max_tokens: int, *, fallback: bool = True
    ) -> str | None:
        """One chat call; the raw answer, or None (logged and counted) when the call fails."""
        assert self._chat is not None
        self._count("llm_calls")
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        try:
            return self._chat.chat(messages, max_tokens=max_tokens)
        except ProviderError as exc:
            self._failed(task, f"{exc.provider} {exc.kind}, status {exc.status_code}", fallback=fallback)
            return None
        except Exception:  # a ChatModel that broke its contract: a bug worth a traceback, not an outage
            logger.exception("chat model %s raised outside its contract", self._chat.model_name)
            self._failed(task, "unexpected exception", fallback=fallback)
            return None

    def ask(self, task: str, system: str, user: str, max_tokens: int, *, fallback: bool = True) -> Any:
        """One chat call parsed as JSON; None (logged and counted) when the call or the parse fails."""
        reply = self.ask_text(task, system, user, max_tokens, fallback=fallback)
        if reply is None:
            return None
        parsed = parse_json(reply)
        if parsed is None:
            self._failed(task, "answer is not JSON", fallback=fallback)
        return parsed

    _ask = ask  # the older private name, still used by trajectory and companion

    def unusable(self, task: str, reason: str, *, fallback: bool = True) -> None:
        """Count (and log, without the answer) an answer the caller could not use."""
        self._failed(task, reason, fallback=fallback)

    def infer_type(self, content: str, context: str = "", resolution: str = "") -> str:
        """One of MEMORY_TYPES."""
        if self._chat is None:
            return heuristic.infer_type(content, context, resolution)
        budget = min(self.max_input_tokens, CLASSIFY_INPUT_TOKENS)
        user = prompts.tagged("memory", _memory_fields(content, context, resolution, budget))
        answer = self.ask("infer_type", prompts.CLASSIFY, user, CLASSIFY_REPLY_TOKENS)
        if answer is None:
            return heuristic.infer_type(content, context, resolution)
        value = answer.get("memory_type", answer.get("type")) if isinstance(answer, dict) else None
        memory_type = value.strip().lower() if isinstance(value, str) else ""
        if memory_type not in MEMORY_TYPES:
            self._failed("infer_type", "answer is not one of the six types")
            return heuristic.infer_type(content, context, resolution)
        return memory_type

    def summarize(
        self,
        content: str,
        context: str = "",
        resolution: str = "",
        l0_max_tokens: int | None = None,
        l1_max_tokens: int | None = None,
    ) -> tuple[str, str]:
        """(L0, L1) within the token budgets, whatever length the model answers with."""
        l0_max = l0_max_tokens or self.l0_max_tokens
        l1_max = l1_max_tokens or self.l1_max_tokens
        if self._chat is None:
            return heuristic.summarize(content, context, resolution, l0_max, l1_max)
        system = prompts.SUMMARIZE.format(l0=l0_max, l1=l1_max)
        user = prompts.tagged("memory", _memory_fields(content, context, resolution, self.max_input_tokens))
        answer = self.ask("summarize", system, user, 2 * (l0_max + l1_max) + 128)
        if answer is None:
            return heuristic.summarize(content, context, resolution, l0_max, l1_max)
        l0 = answer.get("l0", answer.get("summary_l0")) if isinstance(answer, dict) else None
        l1 = answer.get("l1", answer.get("overview_l1")) if isinstance(answer, dict) else None
        if not (isinstance(l0, str) and l0.strip() and isinstance(l1, str) and l1.strip()):
            self._failed("summarize", "answer lacks l0 or l1 text")
            return heuristic.summarize(content, context, resolution, l0_max, l1_max)
        return truncate_to_tokens(" ".join(l0.split()), l0_max), truncate_to_tokens(l1.strip(), l1_max)

    def judge_same(self, a: dict[str, Any], b: dict[str, Any]) -> bool:
        """Whether two memories (dicts with content/context/resolution) cover the same subject."""
        if self._chat is None:
            return heuristic.same_subject(a, b)
        budget = min(JUDGE_SIDE_TOKENS, self.max_input_tokens // 2)
        user = (
            prompts.tagged("memory_a", _record_fields(a, budget))
            + "\n"
            + prompts.tagged("memory_b", _record_fields(b, budget))
        )
        answer = self.ask("judge_same", prompts.JUDGE, user, JUDGE_REPLY_TOKENS)
        if answer is None:
            return heuristic.same_subject(a, b)
        verdict = (
            _as_bool(answer.get("same", answer.get("same_subject"))) if isinstance(answer, dict) else None
        )
        if verdict is None:
            self._failed("judge_same", "answer has no true/false verdict")
            return heuristic.same_subject(a, b)
        return verdict

    def merge(self, existing: dict[str, Any], incoming: dict[str, Any]) -> dict[str, str] | None:
        """Merged {content, context, resolution}, or None to keep the stored text as it is."""
        if self._chat is None:
            return heuristic.merge(existing, incoming)
        field_budget = max(MERGE_FIELD_INPUT_MIN_TOKENS, self.max_input_tokens // 6)
        system = prompts.MERGE.format(field_tokens=MERGE_FIELD_MAX_TOKENS)
        user = prompts.tagged("existing", _record_fields(existing, 3 * field_budget)) + "\n"
        user += prompts.tagged("incoming", _record_fields(incoming, 3 * field_budget))
        answer = self.ask("merge", system, user, 3 * MERGE_FIELD_MAX_TOKENS + 256, fallback=False)
        merged = self._merged_fields(answer)
        if merged is None:
            return None
        unchanged = all(merged[name] == str(existing.get(name) or "").strip() for name in merged)
        return None if unchanged else merged

    def _merged_fields(self, answer: Any) -> dict[str, str] | None:
        """The merge answer's three fields, validated and capped; None (counted) if unusable."""
        if answer is None:
            return None
        raw = answer if isinstance(answer, dict) else {}
        values = [raw.get(name) for name in ("content", "context", "resolution")]
        texts = ["" if value is None else value for value in values]
        if not raw or not all(isinstance(t, str) for t in texts) or not str(texts[0]).strip():
            self._failed("merge", "answer lacks text fields", fallback=False)
            return None
        return {
            name: truncate_to_tokens(str(text).strip(), MERGE_FIELD_MAX_TOKENS)
            for name, text in zip(("content", "context", "resolution"), texts, strict=True)
        }

    def extract(self, text: str) -> list[dict[str, Any]]:
        """Self-contained memory items ({content, context, resolution, confidence, tags}) found in `text`."""
        if self._chat is None:
            return heuristic.extract(text)
        chunks = _chunks(text, self.max_input_tokens)
        if len(chunks) > EXTRACT_MAX_CHUNKS:
            logger.warning(
                "extract: text has %d chunks; only the first %d are read", len(chunks), EXTRACT_MAX_CHUNKS
            )
        items: list[dict[str, Any]] = []
        for chunk in chunks[:EXTRACT_MAX_CHUNKS]:
            items.extend(self._extract_chunk(chunk))
        return items[:EXTRACT_MAX_ITEMS]

    def _extract_chunk(self, chunk: str) -> list[dict[str, Any]]:
        answer = self.ask("extract", prompts.EXTRACT, f"<text>\n{chunk}\n</text>", EXTRACT_REPLY_TOKENS)
        if answer is None:
            return heuristic.extract(chunk)
        raw_items = answer.get("memories") if isinstance(answer, dict) else answer
        if not isinstance(raw_items, list):
            self._failed("extract", "answer has no memories list")
            return heuristic.extract(chunk)
        items = [item for item in map(_extracted_item, raw_items) if item is not None]
        if raw_items and not items:
            self._failed("extract", "no answer item has content")
            return heuristic.extract(chunk)
        return items
