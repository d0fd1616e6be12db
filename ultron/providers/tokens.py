"""Offline token estimates and token-budget truncation.

tiktoken fetches its BPE tables at run time, which fails offline, so we estimate instead:

* every CJK character (ideographs, kana, hangul, CJK and full-width punctuation) is one token, which is
  what cl100k-style tokenizers give for common Chinese characters, and rarely less;
* every other run of non-space characters costs len // 4 tokens and at least one, so common words are
  one token each and long identifiers, paths and URLs one per four characters;
* whitespace is free.

The rule is hand-tuned on examples ("hello world" is 2, "ModuleNotFoundError:" is 5, one per Chinese
character, as cl100k has them), not measured against a tokenizer: treat every budget as approximate.
"""

from __future__ import annotations

import re

CJK_CLASS = (
    "\u3000-\u303f"  # CJK symbols and punctuation
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff00-\uffef"  # full-width forms
    "\U00020000-\U0002ffff"  # CJK extensions B and later
)
CHARS_PER_TOKEN = 4
ELLIPSIS = "…"
SENTENCE_ENDS = "。！？；.!?;\n"
# A cut snaps back to the last sentence end only if that costs at most this share of the kept text.
SNAP_WINDOW = 0.2

_PIECE = re.compile(f"[{CJK_CLASS}]|[^\\s{CJK_CLASS}]+")


def _piece_cost(piece: str) -> int:
    return max(1, len(piece) // CHARS_PER_TOKEN)


def count_tokens(text: str) -> int:
    """Estimated token count of `text` (see the module docstring for the rule)."""
    return sum(_piece_cost(m.group()) for m in _PIECE.finditer(text))


def _cut_index(text: str, budget: int) -> int:
    """Length of the longest prefix of `text` that costs at most `budget` tokens."""
    used = 0
    end = 0
    for match in _PIECE.finditer(text):
        cost = _piece_cost(match.group())
        if used + cost > budget:
            # A long run (URL, identifier) may be cut inside; a CJK char cannot be split.
            room = budget - used
            if room > 0 and cost > 1:
                end = match.start() + room * CHARS_PER_TOKEN
            return end
        used += cost
        end = match.end()
    return end


def _snap_to_sentence(prefix: str) -> str:
    """Cut back to the last sentence end if it lies within the last SNAP_WINDOW of `prefix`."""
    floor = int(len(prefix) * (1 - SNAP_WINDOW))
    for i in range(len(prefix) - 1, max(floor, 0) - 1, -1):
        if prefix[i] in SENTENCE_ENDS:
            return prefix[:i] if prefix[i] == "\n" else prefix[: i + 1]
    return prefix


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """Cut `text` to at most `max_tokens` estimated tokens, ending at a sentence if one is near, plus '…'."""
    if max_tokens <= 0:
        return ""
    if count_tokens(text) <= max_tokens:
        return text
    # One token is kept for the ellipsis; appending it to a cut run never costs more than one.
    prefix = _snap_to_sentence(text[: _cut_index(text, max_tokens - 1)]).rstrip()
    return prefix + ELLIPSIS
