"""Full text for a BM25-like ranker: English stems, exact identifiers, jieba for Chinese.

Documents are indexed as `to_tsvector('simple', index_text(...))`: every word in order (stop words
included, so phrases keep their positions), plain English words reduced to their Snowball stem
("researching" and "research" meet), identifiers, versions, paths and error codes kept as written
(`psycopg.errors.uniqueviolation`, `3.12`, `err_ssl_protocol_error`), Chinese segmented by jieba.

A query becomes a `LexicalQuery`: its informative terms (stop words dropped), each weighted by its IDF
from the tenant's term statistics (term_stats, refreshed by the worker), and the adjacent pairs of its
words, which credit a memory holding them side by side (a phrase). The ranking itself is SQL
(search_memories in sql/memory.sql); docs/ranking.md explains it.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from dataclasses import dataclass

import snowballstemmer

_WORD = re.compile(r"[\w.+#-]+", re.UNICODE)
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_ALPHA = re.compile(r"^[a-z]+$")
_MAX_QUERY_TERMS = 24
_MAX_PHRASE_TOKENS = 16
# Postgres' english.stop (the Snowball list) plus a few words that carry nothing in a question.
ENGLISH_STOP = frozenset(
    """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers
    herself it its itself they them their theirs themselves what which who whom this that these those am is
    are was were be been being have has had having do does did doing a an the and but if or because as
    until while of at by for with about against between into through during before after above below to
    from up down in out on off over under again further then once here there when where why how all any
    both each few more most other some such no nor not only own same so than too very s t can will just
    don should now d ll m o re ve y ain aren couldn didn doesn hadn hasn haven isn ma mightn mustn needn
    shan shouldn wasn weren won wouldn also would could may might must shall
    """.split()
)
CHINESE_STOP = frozenset(
    "的 了 是 在 和 与 及 或 也 都 就 而 把 被 让 给 对 从 向 之 其 这 那 我 你 他 她 它 们 吗 呢 吧 啊 "
    "怎么 如何 为什么 什么 哪些 一个 没有 可以".split()
)
STOPWORDS = ENGLISH_STOP | CHINESE_STOP

_jieba_lock = threading.Lock()
_jieba = None
_stem_local = threading.local()


def _get_jieba():  # type: ignore[no-untyped-def]
    global _jieba
    if _jieba is None:
        with _jieba_lock:
            if _jieba is None:
                # start-up: jieba loads its dictionary (about a second), only for CJK text
                import jieba

                jieba.setLogLevel(logging.WARNING)
                jieba.initialize()
                _jieba = jieba
    return _jieba


def warm_up() -> None:
    """Load jieba's dictionary now rather than on the first request."""
    _get_jieba()


def _stemmer():  # type: ignore[no-untyped-def]
    """One Snowball stemmer per thread (a stemmer object keeps state between calls)."""
    stemmer = getattr(_stem_local, "stemmer", None)
    if stemmer is None:
        stemmer = _stem_local.stemmer = snowballstemmer.stemmer("english")
    return stemmer


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    """Stems of recent words: a Zipfian vocabulary repeats, and Snowball is most of indexing an upload.
    `snowballstemmer.stemmer` is PyStemmer's C stemmer where it is installed (a dependency): ~1.3 us a word
    against ~20 in the Python port, with the same stems."""
    return str(_stemmer().stemWord(word))


def normalize(token: str) -> str:
    """A plain English word becomes its stem; anything else (identifiers, numbers, CJK) stays as written."""
    token = token.strip(".-")
    if len(token) > 2 and _ALPHA.match(token):
        return _stem(token)
    return token


def _raw_terms(text: str, *, for_index: bool) -> list[str]:
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
    """Space-separated terms of the fields, in order, ready for to_tsvector('simple', ...)."""
    out: list[str] = []
    for field in fields:
        if field:
            out.extend(t for t in (normalize(r) for r in _raw_terms(field, for_index=True)) if t)
    return " ".join(out)


def legacy_index_text(*fields: str) -> str:
    """The tokenizer before migration 0010 (no stems): what a downgrade rebuilds search_tsv with."""
    return " ".join(t for f in fields if f for t in _raw_terms(f, for_index=True))


def _informative(raw: str) -> bool:
    bare = raw.strip(".+#-")
    return bool(bare) and bare not in STOPWORDS and (len(bare) > 1 or bool(_CJK.match(bare)))


@functools.lru_cache(maxsize=65536)
def _quote(term: str) -> str:
    return "'" + term.replace("'", "''").replace("\\", "") + "'"


@functools.lru_cache(maxsize=65536)
def _query_token(raw: str) -> tuple[str, bool]:
    """A query word's normalized term and whether it is informative (words recur across queries)."""
    return normalize(raw), _informative(raw)


@dataclass(frozen=True)
class LexicalQuery:
    """What the SQL ranker needs from a query string (search_memories in sql/memory.sql).

    lookup: the distinct normalized tokens whose document frequency is read from term_stats.
    unit_q / unit_kind / unit_a / unit_b: one row per scoring unit, a 'term' (one informative token,
    weight its IDF) or a 'pair' (two adjacent query tokens side by side in the memory: a phrase, weight
    the mean IDF of the two); a and b are 1-based positions in lookup.
    terms: the informative terms; phrase_q: the query's words from its first to its last informative
    one, adjacent and in order ('' with fewer than two informative words).
    unit_name: per unit, whether it is a name the query mentions (`query_names`): a 'term' unit that is
    a name counts towards the ranking but not towards the query's content coverage (relevance.py).
    phrase_in_all: the phrase holds every term (it was not cut at _MAX_PHRASE_TOKENS), so a memory holding
    the phrase holds them all: the statement then skips the phrase pool when the all-terms pool is whole.
    """

    lookup: list[str]
    unit_q: list[str]
    unit_kind: list[str]
    unit_a: list[int]
    unit_b: list[int]
    terms: list[str]
    phrase_q: str
    unit_name: list[bool] | None = None
    phrase_in_all: bool = False

    @property
    def any_q(self) -> str:
        return " | ".join(_quote(t) for t in self.terms)

    @property
    def all_q(self) -> str:
        return " & ".join(_quote(t) for t in self.terms)

    def params(self) -> dict[str, object]:
        # The phrase rides along as one more unit (weight 0): the statement tests every unit in one pass
        # over each candidate row, and a 'phrase' unit that matches sets phrase_match.
        extra = [self.phrase_q] if self.phrase_q else []
        names = self.unit_name if self.unit_name is not None else [False] * len(self.unit_q)
        return {
            "lookup": self.lookup,
            "unit_q": self.unit_q + extra,
            "unit_kind": self.unit_kind + ["phrase"] * len(extra),
            "unit_a": self.unit_a + [1] * len(extra),
            "unit_b": self.unit_b + [1] * len(extra),
            "unit_name": names + [False] * len(extra),
            "all_q": self.all_q,
            "phrase_q": self.phrase_q,
            "phrase_in_all": self.phrase_in_all,
        }


def lexical_query(query: str) -> LexicalQuery:
    tokens = [token for token in map(_query_token, _raw_terms(query, for_index=False)) if token[0]]
    lookup: dict[str, int] = {}  # term -> its 1-based position in lookup
    unit_q: list[str] = []
    kinds: list[str] = []
    a_idx: list[int] = []
    b_idx: list[int] = []
    terms = list(dict.fromkeys(t for t, informative in tokens if informative))[:_MAX_QUERY_TERMS]
    for term in terms:
        unit_q.append(_quote(term))
        kinds.append("term")
        slot = lookup.setdefault(term, len(lookup) + 1)
        a_idx.append(slot)
        b_idx.append(slot)
    pairs: dict[tuple[str, str], None] = {}
    for (a, a_informative), (b, b_informative) in zip(tokens, tokens[1:], strict=False):
        if (a_informative or b_informative) and a != b:
            pairs[a, b] = None
    for a, b in list(pairs)[:_MAX_QUERY_TERMS]:
        unit_q.append(f"{_quote(a)} <-> {_quote(b)}")
        kinds.append("pair")
        a_idx.append(lookup.setdefault(a, len(lookup) + 1))
        b_idx.append(lookup.setdefault(b, len(lookup) + 1))
    informative_at = [i for i, (_, informative) in enumerate(tokens) if informative]
    phrase_q = ""
    phrase_in_all = False
    if len(informative_at) >= 2:
        whole = tokens[informative_at[0] : informative_at[-1] + 1]
        span = whole[:_MAX_PHRASE_TOKENS]
        phrase_q = " <-> ".join(_quote(t) for t, _ in span)
        # every informative token (so every term) lies in the uncut span
        phrase_in_all = len(span) == len(whole)
    names = query_names(query)
    return LexicalQuery(
        lookup=list(lookup),
        unit_q=unit_q,
        unit_kind=kinds,
        unit_a=a_idx,
        unit_b=b_idx,
        terms=terms,
        phrase_q=phrase_q,
        unit_name=[kind == "term" and q[1:-1] in names for q, kind in zip(unit_q, kinds, strict=True)],
        phrase_in_all=phrase_in_all,
    )


# A capitalised word (Latin script) with an optional possessive, not the first of its sentence (there
# a capital says nothing): a proper noun.
_PROPER = re.compile(r"(?<![\w.'’-])([A-Z][a-z]+)(?:['’]s)?(?![\w.-])")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s)\W*$")
# jieba's part-of-speech tags for a person's name
_ZH_PERSON = frozenset({"nr", "nrfg", "nrt"})
_posseg_lock = threading.Lock()


def query_names(query: str) -> set[str]:
    """The names a query mentions, as normalized terms: capitalised words that are not stop words and
    do not open a sentence ("What is Maya's favourite team?" -> maya), and the person names jieba tags
    in Chinese text.

    A name selects the memories about someone; it is no evidence that the question about them is
    answered: a memory that matches only the name of "What colour is Jonas's car?" says nothing of the
    car. Identifiers (ModuleNotFoundError, CORS, node-18) are not names. A query written all in lower
    case has no names here, and its coverage is measured on every term as before."""
    names = {
        normalize(m.group(1).lower())
        for m in _PROPER.finditer(query)
        if m.group(1).lower() not in STOPWORDS and not _SENTENCE_START.search(query[: m.start()])
    }
    if _CJK.search(query):
        _get_jieba()
        import jieba.posseg  # start-up: the tagger loads its model only for a CJK query

        with _posseg_lock:
            people = [w.word for w in jieba.posseg.cut(query) if w.flag in _ZH_PERSON]
        for person in people:
            for token in _raw_terms(person, for_index=False):
                if len(token) > 1:
                    names.add(normalize(token))
            # jieba's tagger and its segmenter can cut differently ("陈浩用" vs "陈浩" + "用")
            names.update(t for t in _raw_terms(query, for_index=False) if len(t) > 1 and t in person)
    return {n for n in names if n}


def query_text(query: str) -> str:
    """A to_tsquery('simple', ...) expression: the OR of the query's informative terms; '' if none."""
    return lexical_query(query).any_q
