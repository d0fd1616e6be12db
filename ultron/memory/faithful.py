"""Whether two close texts state the same fact: the content checks a cosine cannot make.

multilingual-e5 puts "Barcelona beat Madrid" and "Madrid beat Barcelona" at 0.99, and so does any embedder
that reads a bag of words. Cosine finds candidates; this module says whether a candidate may be merged.
`disagreements(a, b)` lists what differs, first found first; empty means no evidence of a different fact:

- placeholder: either text holds a redaction placeholder (`<PERSON>`). Two names redacted to one
  placeholder look equal afterwards, and a stored memory's original names cannot be recovered, so a
  placeholder is an unknown that never counts as agreement.
- anchors: names (capitalised words and runs of them, code identifiers, CJK proper nouns), numbers and
  dates. Each text holds one the other never mentions: a different fact ("Obama" vs "Romney", 51% vs 48%).
  `strict` (the automatic merge): also when only one side holds an extra anchor.
- order / roles: the anchors both hold come in another order, and not because whole clauses moved, or a
  clause's anchors moved to another clause (who did what to whom, from where to where: "moved to London
  ... returned to South Africa" vs the reverse); or the content words two matching clauses share come in
  another order ("the dog bit the man" vs "the man bit the dog").
- negation: one text negates more often than the other.
- direction: one text holds a direction word more often and the other its opposite (went up / down, before /
  after the deploy, turn on / off, log in / out, copy to / from): function words to every check above.
- question: either is a question and their content words differ (the question's object: "is eating a
  centipede poisonous" vs "is a centipede bite poisonous").

The rule is the precise side of every call: a missed merge leaves a second row, a wrong one answers a
search with another fact. Texts of unrelated subjects fail on anchors or content; that is fine, the
caller only asks about pairs that cosine put close.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections import Counter
from typing import Any

from ultron.memory import fulltext
from ultron.memory.heuristic import FIELD_MAX_CHARS, conflicts

PLACEHOLDER = re.compile(r"<[A-Z][A-Z_]{2,}>")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_CLAUSE = re.compile(r"[,;:!?()\[\]，；：。！？（）、\n]+|(?<!\d)\.(?!\d)|\s[-–—]\s")
# Words, identifiers, numbers (1,000 and 3.5 and 51% whole), CJK runs.
_TOKEN = re.compile(
    r"\d+(?:[.,:]\d+)*%?|[A-Za-z][\w'’]*(?:[./:-][\w'’]+)*(?:\(\))?|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+"
)
_POSSESSIVE = re.compile(r"['’]s$")
_CODE = re.compile(r"[._/:]|\(\)|[a-z][A-Z]|\d")
_FUNCTION_WORDS = frozenset(
    """a an the and or nor but of to in on at by for with from as is are was were be been being it its this
    that these those i you he she we they me my your our their his her them us do does did have has had so
    if then than there here when while what which who whom whose how why where can could should would will
    shall may might must just also only very too more most into onto about after before again all any each
    some such own same both up down out off please yes ok hey hi hello thanks thank dear after before
    yesterday today tomorrow tonight now then still already there's it's i'm i've what's who's let's
    that's don't doesn't didn't isn't aren't wasn't weren't can't won't not no never none nobody nothing
    neither nor without cannot""".split()
)
# Capitalised words that are no name: sentence starters, pronouns, question words.
_NOT_NAMES = frozenset(w.capitalize() for w in _FUNCTION_WORDS) | frozenset(
    "I Yes No Not Never Mr Mrs Ms Dr Also Last Next Every One Once".split()
)
_NEGATION_EN = re.compile(
    r"\b(?:not|no|never|none|nobody|nothing|neither|nor|without|cannot)\b|n['’]t\b", re.IGNORECASE
)
# 不 and 没 inside a few common words are no negation of the fact (不错 "good", 差不多 "about").
_NEGATION_ZH = re.compile(
    r"(?<!差)不(?!错|过|久|少|断|仅|同|但|管)|没|未(?!来)|别(?!人|的)|无(?!论)|非(?!常)"
)
_QUESTION = re.compile(
    r"[?？]\s*$|[吗呢]\s*[。.]?\s*$|^\s*(?:who|what|which|where|when|why|how|is|are|does|do|can|should)\b"
    r"|^\s*(?:谁|什么|哪|怎么|为什么|如何|是否)",
    re.IGNORECASE,
)
# Function words whose opposite states another fact; both sides must move for a difference, so a paraphrase
# that only drops or adds one ("scale the workers up" / "add workers") still agrees.
_OPPOSITES = (
    ("up", "down"),
    ("before", "after"),
    ("on", "off"),
    ("in", "out"),
    ("into", "out"),
    ("to", "from"),
)
_DIRECTION_WORD = re.compile(
    r"\b(?:" + "|".join(sorted({w for pair in _OPPOSITES for w in pair})) + r")\b", re.IGNORECASE
)
_MONTHS = "january february march april june july august september october november december".split()
_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_ZH_NUMBER = re.compile(
    r"[零一二两三四五六七八九十百千万亿]+[个次年月日号岁元块分点天人本场名位倍周层里米斤%]"
)
_PARTICLES = "了过着的地得"
_CJK_PUNCT = re.compile(r"[\s，。！？；：、,.!?;:（）()「」“”\"'‘’]+")
_ZH_STOP = frozenset(
    "的 了 过 着 是 在 和 也 都 就 把 被 吗 呢 吧 啊 呀 这 那 这个 那个 一个 我 你 他 她 它 我们 你们 他们 "
    "之 其 与 及 或 又 再 还 很 会 要 想 让 给 对 从 到 向 于 里 上 下 中".split()
)
_PROPER_TAGS = ("nr", "ns", "nt", "nz")
# Time adverbials move freely in a sentence ("this morning ...", "... this morning"): no word order.
_TIME_WORDS = frozenset(
    "morning afternoon evening night week month year sprint season later".split()
    + "早上 上午 下午 晚上 去年 今年 昨天 今天".split()
)


def _text(memory: dict[str, Any]) -> str:
    return "\n".join(str(memory.get(n) or "")[:FIELD_MAX_CHARS] for n in ("content", "context", "resolution"))


@functools.lru_cache(maxsize=256)
def _zh_words(text: str) -> tuple[tuple[str, str], ...]:
    """(word, part-of-speech tag) of a CJK text, by jieba's tagger."""
    fulltext._get_jieba()
    import jieba.posseg  # start-up: loaded with jieba's dictionary, only for CJK text

    return tuple((w.word, w.flag) for w in jieba.posseg.cut(text))


def _stem(word: str) -> str:
    return fulltext.normalize(word) if word.isascii() else word


class _Clause:
    """One clause: its anchors in order (names apart from numbers and dates) and its content words."""

    def __init__(self) -> None:
        self.anchors: list[str] = []
        self.names: list[str] = []
        self.words: list[str] = []

    def add_anchor(self, token: str) -> None:
        self.anchors.append(token)
        if not (token[:1].isdigit() or token[:2] in ("m:", "d:", "n:")):
            self.names.append(token)
        self.words.append(token)


def _date(word: str) -> str | None:
    w = word.lower()
    if w in _MONTHS:
        return f"m:{w}"
    if w in _WEEKDAYS:
        return f"d:{w}"
    return None


def _en_clause(piece: str, clause: _Clause) -> None:
    tokens = [_POSSESSIVE.sub("", t) for t in _TOKEN.findall(piece)]
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok[0].isdigit():
            clause.add_anchor(tok.replace(",", "").rstrip("."))
        elif (date := _date(tok)) is not None:
            clause.add_anchor(date)
        elif (
            tok[0].isupper()
            and tok not in _NOT_NAMES
            and not tok.isupper()
            or (tok.isupper() and len(tok) > 1 and tok not in _NOT_NAMES)
        ):
            name = [tok]  # a run of capitalised words is one name: South Africa, Real Madrid
            while i + 1 < len(tokens) and tokens[i + 1][:1].isupper() and tokens[i + 1] not in _NOT_NAMES:
                i += 1
                name.append(tokens[i])
            clause.add_anchor(" ".join(name).lower())
        elif _CJK.match(tok):
            _zh_clause(tok, clause)
        elif _CODE.search(tok) and not tok.replace("'", "").replace("’", "").isalpha():
            clause.add_anchor(tok.lower())
        elif tok.lower() not in _FUNCTION_WORDS:
            clause.words.append(_stem(tok.lower().replace("’", "'")))
        i += 1


def _zh_clause(piece: str, clause: _Clause) -> None:
    numbers = {m.start(): m.group() for m in _ZH_NUMBER.finditer(piece)}
    pos = 0
    for word, flag in _zh_words(piece):
        if pos in numbers:
            clause.add_anchor(f"n:{numbers[pos]}")
        elif flag.startswith(_PROPER_TAGS) and len(word) > 1:
            clause.add_anchor(word)
        elif word not in _ZH_STOP and not _NEGATION_ZH.fullmatch(word) and word.strip(_PARTICLES).strip():
            clause.words.append(word.strip(_PARTICLES))
        pos += len(word)


@functools.lru_cache(maxsize=256)
def _clauses(text: str) -> tuple[_Clause, ...]:
    out = []
    for piece in _CLAUSE.split(text):
        if not piece.strip():
            continue
        clause = _Clause()
        _en_clause(PLACEHOLDER.sub(" ", piece), clause)
        if clause.words:
            out.append(clause)
    return tuple(out)


def _lcs(a: list[str], b: list[str]) -> int:
    row = [0] * (len(b) + 1)
    for x in a:
        prev = 0
        for j, y in enumerate(b, 1):
            cur = row[j]
            row[j] = prev + 1 if x == y else max(row[j], row[j - 1])
            prev = cur
    return row[-1]


def _in_order(a: list[str], b: list[str]) -> bool:
    """Whether the words both lists hold come in the same order in each (first mentions)."""
    shared = set(a) & set(b)
    seq_a = list(dict.fromkeys(w for w in a if w in shared))
    seq_b = list(dict.fromkeys(w for w in b if w in shared))
    return _lcs(seq_a, seq_b) == len(seq_a)


def _best_match(clause: _Clause, others: tuple[_Clause, ...]) -> _Clause | None:
    """The clause of the other text that shares most content words (anchors aside) with this one."""
    mine = set(clause.words) - set(clause.anchors)
    best, score = None, 0
    for other in others:
        shared = len(mine & (set(other.words) - set(other.anchors)))
        if shared > score:
            best, score = other, shared
    return best


def _numbers(clauses: tuple[_Clause, ...]) -> list[str]:
    return [x for c in clauses for x in c.anchors if x not in c.names]


def _plain(clause: _Clause) -> list[str]:
    """The clause's content words that are no anchor and no movable time word."""
    return [w for w in clause.words if w not in clause.anchors and w not in _TIME_WORDS]


def _order_differs(ca: tuple[_Clause, ...], cb: tuple[_Clause, ...]) -> bool:
    names_a = [x for c in ca for x in c.names]
    names_b = [x for c in cb for x in c.names]
    if not (_in_order(_numbers(ca), _numbers(cb)) and _in_order(names_a, names_b)):
        # Whole clauses may move ("When X, Y" / "Y when X"); an anchor may not leave its clause's words
        # (51% and 48% trading places, London and South Africa trading verbs).
        if sorted(tuple(c.anchors) for c in ca if c.anchors) != sorted(
            tuple(c.anchors) for c in cb if c.anchors
        ):
            return True
        for c in ca:
            match = _best_match(c, cb)
            if match is not None and c.anchors and set(c.anchors) != set(match.anchors):
                return True
    for c in ca:
        match = _best_match(c, cb)
        if match is not None and not _in_order(_plain(c), _plain(match)):
            return True
    return False


def _substituted(ca: tuple[_Clause, ...], cb: tuple[_Clause, ...]) -> bool:
    """Whether a content word of one text stands where the other has another (milk / eggs): the words
    around it agree, the word itself does not."""
    words_a = [w for c in ca for w in c.words]
    words_b = [w for c in cb for w in c.words]
    ops = difflib.SequenceMatcher(a=words_a, b=words_b, autojunk=False).get_opcodes()
    return any(tag == "replace" for tag, *_ in ops)


def _cjk_order_differs(text_a: str, text_b: str) -> bool:
    """The same CJK characters in another order, and not because whole clauses moved: a swap that the
    word segmenter may hide by cutting the two texts differently (法国总理访问了德国 / 德国总理访问了法国)."""

    def clauses(text: str) -> list[str]:
        out = []
        for piece in _CLAUSE.split(text):
            chars = "".join(_CJK.findall(piece)).translate(str.maketrans("", "", _PARTICLES))
            if chars:
                out.append(chars)
        return out

    ca, cb = clauses(text_a), clauses(text_b)
    if sorted("".join(ca)) != sorted("".join(cb)) or "".join(ca) == "".join(cb):
        return False
    return sorted(ca) != sorted(cb)


def _mentioned(token: str, text: str) -> bool:
    if token.startswith(("m:", "d:")):
        return token[2:] in text
    if token.startswith("n:"):
        return token[2:] in text
    return token in text


def negations(text: str) -> int:
    return len(_NEGATION_EN.findall(text)) + len(_NEGATION_ZH.findall(text))


def _negations_differ(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """One negates more often: in content and context, and in the fixes when both hold one (a fix that
    only one side has is an addition, not a contradiction)."""
    head_a = _text({"content": a.get("content"), "context": a.get("context")})
    head_b = _text({"content": b.get("content"), "context": b.get("context")})
    if negations(head_a) != negations(head_b):
        return True
    fix_a, fix_b = str(a.get("resolution") or ""), str(b.get("resolution") or "")
    return bool(fix_a.strip() and fix_b.strip()) and negations(fix_a) != negations(fix_b)


def _directions_differ(text_a: str, text_b: str) -> bool:
    """One text holds a direction word more often than the other, and the other its opposite more often."""
    count_a = Counter(w.lower() for w in _DIRECTION_WORD.findall(text_a))
    count_b = Counter(w.lower() for w in _DIRECTION_WORD.findall(text_b))
    return any(
        (count_a[x] > count_b[x] and count_b[y] > count_a[y])
        or (count_a[y] > count_b[y] and count_b[x] > count_a[x])
        for x, y in _OPPOSITES
    )


def is_question(text: str) -> bool:
    return any(_QUESTION.search(line) for line in text.splitlines() if line.strip())


def disagreements(a: dict[str, Any], b: dict[str, Any], *, strict: bool = True) -> list[str]:
    """What shows that two memories state different facts (see the module docstring); [] if nothing."""
    text_a, text_b = _text(a), _text(b)
    if " ".join(text_a.split()) == " ".join(text_b.split()) and not PLACEHOLDER.search(text_a):
        return []
    if PLACEHOLDER.search(text_a) or PLACEHOLDER.search(text_b):
        return ["placeholder"]
    ca, cb = _clauses(text_a), _clauses(text_b)
    anchors_a = {x for c in ca for x in c.anchors}
    anchors_b = {x for c in cb for x in c.anchors}
    low_a, low_b = text_a.lower(), text_b.lower()
    only_a = {x for x in anchors_a - anchors_b if not _mentioned(x, low_b)}
    only_b = {x for x in anchors_b - anchors_a if not _mentioned(x, low_a)}
    found = []
    if (only_a and only_b) or (strict and (only_a or only_b)):
        found.append("anchors")
    if _order_differs(ca, cb) or _cjk_order_differs(text_a, text_b):
        found.append("order")
    words_a = {w for c in ca for w in c.words}
    words_b = {w for c in cb for w in c.words}
    if (strict and words_a != words_b) or _substituted(ca, cb):
        found.append("words")
    if _negations_differ(a, b):
        found.append("negation")
    if _directions_differ(text_a, text_b):
        found.append("direction")
    if (is_question(text_a) or is_question(text_b)) and words_a != words_b:
        found.append("question")
    return found


def same_fact(a: dict[str, Any], b: dict[str, Any], *, strict: bool = True) -> bool:
    return not disagreements(a, b, strict=strict)


def may_merge_automatically(existing: dict[str, Any], incoming: dict[str, Any]) -> bool:
    """The gate of a merge without the judge: agreeing distinguishing tokens and the same fact, strictly."""
    return not conflicts(existing, incoming) and same_fact(existing, incoming)


def may_merge_judged(existing: dict[str, Any], incoming: dict[str, Any]) -> bool:
    """The veto over any judge, the chat model's too: a judge may merge only what this does not refuse."""
    return not conflicts(existing, incoming) and same_fact(existing, incoming, strict=False)
