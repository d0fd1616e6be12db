"""Full-text search that works for Chinese: Postgres' parser does not split Chinese, so jieba does.

Documents are indexed as `to_tsvector('simple', segmented text)`; queries become an OR of their terms
(ranked by ts_rank_cd), so a keyword query finds memories that share any informative term.
"""

from __future__ import annotations

import logging
import re
import threading
import time

from sqlalchemy.orm import Session

from ultron.db.queries import q

_WORD = re.compile(r"[\w.+#-]+", re.UNICODE)
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_MAX_QUERY_TERMS = 24
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "the",
        "this",
        "to",
        "was",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
        "的",
        "了",
        "是",
        "在",
        "和",
        "与",
        "及",
        "或",
        "也",
        "都",
        "就",
        "而",
        "把",
        "被",
        "让",
        "给",
        "对",
        "从",
        "向",
        "之",
        "其",
        "这",
        "那",
        "我",
        "你",
        "他",
        "她",
        "它",
        "们",
        "吗",
        "呢",
        "吧",
        "啊",
        "怎么",
        "如何",
        "为什么",
        "什么",
        "哪些",
        "一个",
        "没有",
        "可以",
    ]
)

_jieba_lock = threading.Lock()
_jieba = None


def _get_jieba():  # type: ignore[no-untyped-def]
    global _jieba
    if _jieba is None:
        with _jieba_lock:
            if _jieba is None:
                import jieba

                jieba.setLogLevel(logging.WARNING)
                jieba.initialize()
                _jieba = jieba
    return _jieba


def warm_up() -> None:
    """Load jieba's dictionary now rather than on the first request."""
    _get_jieba()


def _terms(text: str, *, for_index: bool) -> list[str]:
    text = text.lower()
    if not _CJK.search(text):
        return _WORD.findall(text)
    jieba = _get_jieba()
    pieces = jieba.cut_for_search(text) if for_index else jieba.cut(text)
    out: list[str] = []
    for piece in pieces:
        out.extend(_WORD.findall(piece))
    return out


def index_text(*fields: str) -> str:
    """Space-separated terms of the fields, ready for to_tsvector('simple', ...)."""
    return " ".join(t for f in fields if f for t in _terms(f, for_index=True))


def query_text(query: str, skip: frozenset[str] = frozenset()) -> str:
    """A to_tsquery('simple', ...) expression: the OR of the query's informative terms; '' if none."""
    seen: dict[str, None] = {}
    for term in _terms(query, for_index=False):
        term = term.strip(".+#-")
        if term and term not in _STOPWORDS and term not in skip and (len(term) > 1 or _CJK.match(term)):
            seen.setdefault(term, None)
    terms = list(seen)[:_MAX_QUERY_TERMS]
    return " | ".join("'" + t.replace("'", "''").replace("\\", "") + "'" for t in terms)


class CommonTerms:
    """Terms too common to rank: each matches more memories than the full-text leg can afford to score.

    The figures come from Postgres' own lexeme statistics for the tsvector column (collected by ANALYZE,
    so autovacuum keeps them fresh); a common term carries little information anyway (its IDF is ~0).
    """

    def __init__(self, max_rows: int, ttl_seconds: float = 300.0):
        self.max_rows = max_rows
        self.ttl_seconds = ttl_seconds
        self._lock = threading.Lock()
        self._terms: frozenset[str] = frozenset()
        self._loaded_at = float("-inf")

    def get(self, session: Session) -> frozenset[str]:
        if time.monotonic() - self._loaded_at < self.ttl_seconds:
            return self._terms
        row = session.execute(q("term_frequencies")).one()
        rows = float(row.rows or 0)
        terms = frozenset(t for t, f in zip(row.terms, row.freqs, strict=False) if f * rows > self.max_rows)
        with self._lock:
            self._terms, self._loaded_at = terms, time.monotonic()
        return terms

    def invalidate(self) -> None:
        self._loaded_at = float("-inf")
