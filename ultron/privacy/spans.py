"""The base every Ultron recognizer builds on: a Presidio pattern recognizer that can report part of a match.

Where only part of a match is sensitive the pattern names it with a `value` group and only that span is
reported: `password=<REDACTED_CREDENTIAL>` keeps its key, `/home/<USER>/proj` keeps its path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import regex as re
from presidio_analyzer import EntityRecognizer, Pattern, PatternRecognizer, RecognizerResult

# ASCII: `\b` and `\w` must not treat Chinese characters as word characters, or `手机号13800138000` and
# `邮箱alice@example.com` would have no word boundary before the number or the address.
FLAGS = re.ASCII | re.MULTILINE
# Chinese characters and full-width punctuation end an unquoted value: `密码是abc123，请保密`.
CJK = "\u3000-\u303f\u4e00-\u9fff\uff00-\uffef"
SCORE = 0.9
# What an unquoted value may hold: it ends at whitespace, quotes, separators, brackets and Chinese text.
UNQUOTED = rf"[^\s\"'`,;&|<>(){{}}\[\]{CJK}]"


class SpanRecognizer(PatternRecognizer):
    """A pattern recognizer that reports the `value` group when the regex has one, after `accept`."""

    def __init__(
        self,
        entity: str,
        patterns: Sequence[str],
        language: str,
        accept: Callable[[str], bool] | None = None,
        flags: int = FLAGS,
    ):
        super().__init__(
            supported_entity=entity,
            name=f"{entity.title().replace('_', '')}Recognizer",
            supported_language=language,
            patterns=[Pattern(f"{entity}_{i}", p, SCORE) for i, p in enumerate(patterns)],
            global_regex_flags=flags,
        )
        self._compiled = [re.compile(p, flags) for p in patterns]
        self._accept = accept

    def analyze(self, text, entities, nlp_artifacts=None, regex_flags=None):  # noqa: D102
        return [self.result(s, e) for s, e in self.spans(text)]

    def spans(self, text: str) -> Iterable[tuple[int, int]]:
        for compiled in self._compiled:
            for match in compiled.finditer(text):
                group = "value" if "value" in compiled.groupindex else 0
                start, end = match.span(group)
                if end > start and (self._accept is None or self._accept(text[start:end])):
                    yield start, end

    def result(self, start: int, end: int) -> RecognizerResult:
        return result(self, self.supported_entities[0], start, end)


def result(recognizer: EntityRecognizer, entity: str, start: int, end: int) -> RecognizerResult:
    """A result tagged with the recognizer that produced it, as Presidio's own recognizers tag theirs."""
    return RecognizerResult(
        entity_type=entity,
        start=start,
        end=end,
        score=SCORE,
        recognition_metadata={
            # Presidio sets `name` in both branches of an if without annotating it: mypy cannot type it.
            RecognizerResult.RECOGNIZER_NAME_KEY: recognizer.name,  # type: ignore[has-type]
            RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: recognizer.id,
        },
    )
