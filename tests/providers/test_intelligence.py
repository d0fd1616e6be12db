"""MemoryIntelligence over real chat clients talking to the fake servers, and without any LLM."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.fakes.servers import FakeModelServer
from tests.providers.conftest import Remote
from ultron.memory import heuristic
from ultron.memory.intelligence import MemoryIntelligence
from ultron.providers.tokens import ELLIPSIS, count_tokens

ERROR_MEMORY = {
    "content": "Traceback: ModuleNotFoundError: No module named 'pandas'",
    "context": "Docker 容器内运行数据分析脚本",
    "resolution": "pip install pandas",
}


def _intelligence(server: FakeModelServer, **kwargs: Any) -> MemoryIntelligence:
    return MemoryIntelligence(Remote(server.flavor, server).chat(max_retries=1), **kwargs)


def _replies(server: FakeModelServer, *answers: Any) -> None:
    """Answer successive chat calls with these values (JSON-encoded unless already text)."""
    queue = [a if isinstance(a, str) else json.dumps(a, ensure_ascii=False) for a in answers]
    server.reply_fn = lambda messages: queue.pop(0)


def _user_prompts(server: FakeModelServer) -> list[str]:
    return [r.json["messages"][-1]["content"] for r in server.requests]


# --- failure falls back (both providers) --------------------------------------------------------------


def test_garbage_answers_fall_back_to_the_heuristic(remote: Remote) -> None:
    remote.server.mode = "garbage"
    intelligence = MemoryIntelligence(remote.chat(max_retries=1))

    assert intelligence.infer_type(**ERROR_MEMORY) == "error"
    assert intelligence.summarize(**ERROR_MEMORY) == heuristic.summarize(**ERROR_MEMORY)
    assert intelligence.counters == {"llm_calls": 2, "llm_failures": 2, "fallbacks": 2}


def test_merge_returns_none_when_the_llm_errors(remote: Remote) -> None:
    remote.server.mode = "500"
    intelligence = MemoryIntelligence(remote.chat(max_retries=1))
    existing = {**ERROR_MEMORY, "resolution": ""}
    incoming = {**ERROR_MEMORY, "resolution": "use conda install pandas"}

    # The heuristic would fill the empty resolution; with an LLM configured, a failure keeps the text as is.
    assert heuristic.merge(existing, incoming) is not None
    assert intelligence.merge(existing, incoming) is None
    assert intelligence.counters == {"llm_calls": 1, "llm_failures": 1, "fallbacks": 0}
    assert len(remote.server.requests) == 2  # the 500 was retried once


def test_llm_answers_are_used_when_valid(remote: Remote) -> None:
    _replies(remote.server, {"memory_type": "life"}, {"same": True})
    intelligence = MemoryIntelligence(remote.chat())

    assert intelligence.infer_type(**ERROR_MEMORY) == "life"  # the heuristic would say "error"
    assert intelligence.judge_same(ERROR_MEMORY, {"content": "乘机选座"}) is True
    assert intelligence.counters == {"llm_calls": 2, "llm_failures": 0, "fallbacks": 0}


# --- infer_type ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    ["I think this is an error.", json.dumps({"memory_type": "bug"}), json.dumps({"type": 3}), "[]"],
)
def test_unusable_type_answers_fall_back(fake_openai: FakeModelServer, reply: str) -> None:
    fake_openai.chat_reply = reply
    intelligence = _intelligence(fake_openai)

    assert intelligence.infer_type(**ERROR_MEMORY) == "error"
    assert intelligence.counters["fallbacks"] == 1


def test_type_answer_is_normalized(fake_openai: FakeModelServer) -> None:
    fake_openai.chat_reply = '```json\n{"memory_type": " Security "}\n```'
    assert _intelligence(fake_openai).infer_type(**ERROR_MEMORY) == "security"


def test_prompt_input_is_cut_to_the_token_budget(fake_openai: FakeModelServer) -> None:
    fake_openai.chat_reply = json.dumps({"memory_type": "pattern"})
    long_content = " ".join(f"word{i}" for i in range(5000)) + " THE_TAIL_MARKER"

    _intelligence(fake_openai, max_input_tokens=500).infer_type(long_content, "", "")

    (prompt,) = _user_prompts(fake_openai)
    assert "THE_TAIL_MARKER" not in prompt and ELLIPSIS in prompt
    assert count_tokens(prompt) < 600


# --- summarize ----------------------------------------------------------------------------------------


def test_summaries_from_a_verbose_llm_are_cut_to_budget(fake_openai: FakeModelServer) -> None:
    verbose = "这是一个非常长的总结。" * 100
    _replies(fake_openai, {"l0": "line one\nline two " + "very " * 200, "l1": verbose})
    intelligence = _intelligence(fake_openai, l0_max_tokens=16, l1_max_tokens=40)

    l0, l1 = intelligence.summarize(**ERROR_MEMORY)

    assert "\n" not in l0 and count_tokens(l0) <= 16 and l0.startswith("line one line two")
    assert count_tokens(l1) <= 40 and l1.endswith("。" + ELLIPSIS)


@pytest.mark.parametrize("answer", [{"l0": "only l0"}, {"l0": "", "l1": "x"}, {"l0": 1, "l1": "x"}])
def test_incomplete_summaries_fall_back(fake_openai: FakeModelServer, answer: dict[str, Any]) -> None:
    _replies(fake_openai, answer)
    intelligence = _intelligence(fake_openai)

    assert intelligence.summarize(**ERROR_MEMORY) == heuristic.summarize(**ERROR_MEMORY)
    assert intelligence.counters["fallbacks"] == 1


# --- judge_same ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("answer", "expected"), [({"same": False}, False), ({"same": "yes"}, True)])
def test_judge_reads_the_verdict(
    fake_openai: FakeModelServer, answer: dict[str, Any], expected: bool
) -> None:
    _replies(fake_openai, answer)
    assert _intelligence(fake_openai).judge_same(ERROR_MEMORY, ERROR_MEMORY) is expected


def test_judge_without_a_verdict_falls_back(fake_openai: FakeModelServer) -> None:
    _replies(fake_openai, {"answer": "maybe"})
    intelligence = _intelligence(fake_openai)

    assert intelligence.judge_same(ERROR_MEMORY, ERROR_MEMORY) is True  # the heuristic: identical text
    assert intelligence.counters["fallbacks"] == 1


# --- merge --------------------------------------------------------------------------------------------


def test_merge_returns_the_llm_fields(fake_openai: FakeModelServer) -> None:
    merged = {
        "content": "Python 缺少 pandas 模块",
        "context": "容器",
        "resolution": "pip 或 conda 安装 pandas",
    }
    _replies(fake_openai, merged)

    assert _intelligence(fake_openai).merge(ERROR_MEMORY, ERROR_MEMORY) == merged


def test_merge_that_changes_nothing_is_none(fake_openai: FakeModelServer) -> None:
    _replies(fake_openai, ERROR_MEMORY)
    assert _intelligence(fake_openai).merge(ERROR_MEMORY, ERROR_MEMORY) is None


@pytest.mark.parametrize(
    "answer",
    ['{"content": 1, "context": "", "resolution": ""}', '{"content": "", "resolution": "x"}', "merged!"],
)
def test_invalid_merge_answers_keep_the_text(fake_openai: FakeModelServer, answer: str) -> None:
    fake_openai.chat_reply = answer
    intelligence = _intelligence(fake_openai)

    assert intelligence.merge(ERROR_MEMORY, {**ERROR_MEMORY, "resolution": "new fix"}) is None
    assert intelligence.counters == {"llm_calls": 1, "llm_failures": 1, "fallbacks": 0}


def test_merge_allows_missing_optional_fields(fake_openai: FakeModelServer) -> None:
    _replies(fake_openai, {"content": "merged content", "context": None})
    merged = _intelligence(fake_openai).merge(ERROR_MEMORY, ERROR_MEMORY)
    assert merged == {"content": "merged content", "context": "", "resolution": ""}


# --- extract ------------------------------------------------------------------------------------------


def test_extract_validates_items(fake_openai: FakeModelServer) -> None:
    items = [
        {
            "content": "pip fails in docker",
            "context": "CI",
            "resolution": "proxy",
            "confidence": 1.7,
            "tags": ["Docker", "pip", "docker", 3],
        },
        {"content": "   "},
        {"content": ["not", "text"]},
        "not an object",
        {"content": "bare item"},
    ]
    _replies(fake_openai, {"memories": items})

    result = _intelligence(fake_openai).extract("some text")

    assert result == [
        {
            "content": "pip fails in docker",
            "context": "CI",
            "resolution": "proxy",
            "confidence": 1.0,
            "tags": ["docker", "pip"],
        },
        {"content": "bare item", "context": "", "resolution": "", "confidence": 0.7, "tags": []},
    ]


def test_extract_of_nothing_worth_keeping_is_empty(fake_openai: FakeModelServer) -> None:
    _replies(fake_openai, {"memories": []})
    intelligence = _intelligence(fake_openai)
    assert intelligence.extract("hello, how are you?") == []
    assert intelligence.counters["fallbacks"] == 0


@pytest.mark.parametrize("answer", ["no json", '{"memories": "none"}', '{"memories": [{"content": ""}]}'])
def test_unusable_extraction_falls_back(fake_openai: FakeModelServer, answer: str) -> None:
    fake_openai.chat_reply = answer
    text = "Docker 内 pip install 失败。\n原因：容器内无网络访问权限\n解决：配置代理"

    assert _intelligence(fake_openai).extract(text) == heuristic.extract(text)


def test_long_text_is_extracted_in_chunks(fake_openai: FakeModelServer) -> None:
    fake_openai.reply_fn = lambda messages: json.dumps({"memories": [{"content": f"item {len(messages)}"}]})
    paragraphs = [f"Paragraph {i}: " + "lesson " * 60 for i in range(6)]

    items = _intelligence(fake_openai, max_input_tokens=150).extract("\n\n".join(paragraphs))

    assert len(fake_openai.requests) == len(items) >= 3
    for prompt in _user_prompts(fake_openai):
        assert count_tokens(prompt) <= 150 + 10


# --- without an LLM, and robustness -------------------------------------------------------------------


def test_without_llm_every_method_is_the_heuristic() -> None:
    intelligence = MemoryIntelligence(None)
    incoming = {**ERROR_MEMORY, "resolution": "conda install pandas"}

    assert not intelligence.llm_available
    assert intelligence.infer_type(**ERROR_MEMORY) == heuristic.infer_type(**ERROR_MEMORY)
    assert intelligence.summarize(**ERROR_MEMORY) == heuristic.summarize(**ERROR_MEMORY)
    assert intelligence.judge_same(ERROR_MEMORY, incoming) == heuristic.same_subject(ERROR_MEMORY, incoming)
    assert intelligence.merge(ERROR_MEMORY, incoming) == heuristic.merge(ERROR_MEMORY, incoming)
    assert intelligence.extract("a b\n\nlong enough lesson here") == heuristic.extract(
        "a b\n\nlong enough lesson here"
    )
    assert intelligence.counters == {"llm_calls": 0, "llm_failures": 0, "fallbacks": 0}


class _BrokenChat:
    model_name = "broken"

    def chat(self, messages: list[dict[str, str]], *, max_tokens: int | None = None) -> str:
        raise RuntimeError("a chat model that breaks its contract")


def test_a_chat_model_raising_anything_never_escapes() -> None:
    intelligence = MemoryIntelligence(_BrokenChat())

    assert intelligence.llm_available
    assert intelligence.infer_type(**ERROR_MEMORY) == "error"
    assert intelligence.merge(ERROR_MEMORY, ERROR_MEMORY) is None
    assert intelligence.counters == {"llm_calls": 2, "llm_failures": 2, "fallbacks": 1}


def test_counters_are_exact_under_concurrency(fake_openai: FakeModelServer) -> None:
    fake_openai.chat_reply = json.dumps({"memory_type": "pattern"})
    intelligence = _intelligence(fake_openai)

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda _: intelligence.infer_type("x", "", ""), range(32)))

    assert results == ["pattern"] * 32
    assert intelligence.counters == {"llm_calls": 32, "llm_failures": 0, "fallbacks": 0}
