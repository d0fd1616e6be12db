"""Offline token estimates and budget truncation."""

from __future__ import annotations

import random

import pytest

from ultron.providers.tokens import ELLIPSIS, count_tokens, truncate_to_tokens


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("   \n\t", 0),
        ("hello world", 2),
        ("internationalization", 5),  # one long run: a token per four characters
        ("a b c", 3),  # at least one per word
        ("数据库连接失败", 7),  # one per CJK character
        ("pip 安装失败。", 6),  # "pip" + four characters + full-width full stop
    ],
)
def test_count_tokens(text: str, expected: int) -> None:
    assert count_tokens(text) == expected


def test_text_within_budget_is_returned_unchanged() -> None:
    text = "Short enough. 很短。"
    assert truncate_to_tokens(text, 100) == text


def test_non_positive_budget_gives_empty_text() -> None:
    assert truncate_to_tokens("anything at all", 0) == ""


def test_truncation_never_exceeds_the_budget() -> None:
    rng = random.Random(7)
    alphabet = ["word", "longidentifier_name", "数", "据", "。", ".", "\n", " ", "https://example.com/a/b/c"]
    for _ in range(300):
        text = "".join(rng.choice(alphabet) + rng.choice([" ", ""]) for _ in range(rng.randint(1, 120)))
        budget = rng.randint(1, 40)
        cut = truncate_to_tokens(text, budget)
        assert count_tokens(cut) <= budget
        if count_tokens(text) > budget:
            assert cut.endswith(ELLIPSIS)


def test_truncation_snaps_back_to_a_nearby_sentence_end() -> None:
    first = "The index must be rebuilt after a bulk load, or queries fall back to a sequential scan."
    text = first + " Then run ANALYZE so that the planner sees the new statistics for every table."

    cut = truncate_to_tokens(text, count_tokens(first) + 2)

    assert cut == first + ELLIPSIS


def test_truncation_snaps_to_chinese_sentence_end() -> None:
    text = "容器内没有网络访问权限。" + "需要配置代理服务器或者使用主机网络模式来解决这个问题"

    cut = truncate_to_tokens(text, 14)

    assert cut == "容器内没有网络访问权限。" + ELLIPSIS


def test_truncation_keeps_the_cut_when_no_sentence_end_is_near() -> None:
    text = "Done. " + " ".join(f"word{i}" for i in range(100))

    cut = truncate_to_tokens(text, 30)

    assert cut.startswith("Done. word0 word1") and cut.endswith(ELLIPSIS)
    assert count_tokens(cut) <= 30


def test_a_single_long_run_is_cut_inside() -> None:
    url = "https://example.com/" + "x" * 400

    cut = truncate_to_tokens(url, 10)

    assert cut.startswith("https://example.com/") and cut.endswith(ELLIPSIS)
    assert count_tokens(cut) <= 10
