"""Offline intelligence: keyword rules and text overlap standing in for an LLM.

It is honest about its limits. It classifies by keywords, summarizes by truncation, judges "same
subject" by distinguishing tokens and the overlap of content words (and says "different" when unsure),
cannot abstract two memories into one (it keeps the existing text and leaves the incoming one in its
contribution), and splits free text by its layout rather than its meaning.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Set
from typing import Any

from ultron.memory import classify
from ultron.providers.tokens import count_tokens, truncate_to_tokens

# --- type inference ----------------------------------------------------------------------------------

_ERRNO_NAMES = (
    "(?:ENOENT|EACCES|EPERM|EEXIST|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EADDRINUSE|ENOSPC|EMFILE|ENOMEM"
    "|EPIPE|EAGAIN|EINVAL|EBUSY|ENOTFOUND|EISDIR|ENOTDIR|EROFS)"
)

# Personal facts and wishes, in the words people use for them: first-person family, health, home and
# habits (life); instructions about how to be answered, addressed to the assistant (preference). Measured
# on tests/data/personal_facts.tsv (docs/agents.md).
_KIN_EN = (
    r"daughter|son|kids?|children|child|wife|husband|partner|mother|mom|mum|father|dad|sister|brother"
    r"|family|parents?|grand(?:ma|pa|mother|father|son|daughter|parents?)|aunt|uncle|cousin|baby|twins"
    r"|dog|cat|pet|puppy|kitten|birthday|anniversary|wedding|hometown|girlfriend|boyfriend|fianc[ée]e?"
)
# (English: alternatives that start at a word's start, matched case-insensitively, in the life rule's one
# `\b(?:...)` with its own words; Chinese: words found anywhere, and _LIFE_PERSONAL_ZH_START at the start)
_LIFE_PERSONAL_WORDS = (
    rf"(?:my|our)\s+(?:{_KIN_EN})\b"
    r"|I(?:'m| am)\s+(?:allergic|vegetarian|vegan|pregnant|afraid|scared|married|divorced|training|diabetic"
    r"|a (?:mother|father|mom|dad|parent)|\d+ years old|left-handed|lactose)"
    r"|I (?:have|had|got) (?:a |an |type \d )?"
    r"(?:diabetes|asthma|allerg\w*|migraines?|a (?:dog|cat|baby|son|daughter))"
    r"|I (?:live|lived|grew up|moved|was born|play|go to bed|wake up|usually sleep"
    r"|don't eat|do not eat|never eat)\b"
    r"|we (?:have|adopted|got) (?:an? |two |three )?(?:\w+ )?"
    r"(?:dogs?|cats?|retriever|terrier|pupp(?:y|ies)|kittens?|parrot|baby|kids)\b"
    r"|I (?:go |went )?(?:swimming|running|cycling|hiking|climbing|jogging)\b"
    r"|(?:allerg(?:y|ic|ies)|surgery|medication|diabetes|pregnan\w*|marathon|badminton|violin|piano)\b"
)
_LIFE_PERSONAL_ZH_START = r"^(?:女儿|儿子|孩子|老婆|老公|爸爸|妈妈)"
_LIFE_PERSONAL_ZH = (
    r"我的?(?:女儿|儿子|孩子|老婆|老公|妻子|丈夫|爸|妈|父亲|母亲|姐姐|妹妹|哥哥|弟弟|爷爷|奶奶|外婆|外公|家人|家里|家养|生日|老家)"
    r"|过敏|生日|老家|怀孕|预产期|手术|糖尿病|高血压|吃素|素食|养了一?[只条]"
    r"|宠物|马拉松|羽毛球|小提琴|钢琴课|睡觉|起床|大寿|我住在|结婚|纪念日|我们家|跑步|游泳|长大|搬到|搬家"
)
_PREFERENCE_PERSONAL = (
    r"(?i:\b(?:(?:answer|reply|respond|write|talk|speak)(?: to)? (?:me |to me )?in\b|call me\b|remind me\b"
    r"|send me\b|give me\b|ask (?:me )?before\b"
    r"|I(?:'d| would) rather\b"
    r"|I want (?:answers|replies|responses|you)\b|don'?t [^.\n]{0,30}\b(?:to|for|with) me\b"
    r"|(?:short|brief|concise|detailed) (?:answers|replies|explanations)\b"
    r"|keep (?:your |the )?(?:explanations|answers|replies|responses|messages|it)"
    r" (?:short|brief|concise|under)\b"
    r"|no spoilers\b"
    r"|(?:reply|answer) in (?:bullet points|a table|a list)\b|when you (?:give|send|show|tell) me\b)"
    r"|^\s*(?:please\s+)?[A-Z]?[a-z]+\b[^.\n]{0,60}\bfor me\b"
    r"|^\s*(?:please\s+)?(?:always|never)\b"
    r"|^\s*please (?:write|use|reply|answer|respond|format|call|keep|send)\b)"
    r"|(?:回答|回复|答复)我|叫我|别给我|不要给我|给我[^。\n]{0,10}(?:用|写|的时候)|请(?:用|统一|写|先)|先问我|用(?:列表|表格|中文|英文|公制)"
    r"|以后[^。\n]{0,10}(?:用|叫|别|不要)|不要在回复|请[^。\n]{0,6}写"
)

# A leak is a security matter when what leaks is a secret or people's data ("the API key leaked", "a data
# leak", "tokens leaking into the logs"); a memory, goroutine or file-descriptor leak, state leaking between
# tests or a leaking tap are not.
_LEAKED = (
    r"(?:secrets?|(?:api |access |private |ssh )?keys?|tokens?|passwords?|credentials?|data|pii|information"
    r"|emails?)"
)
# (its alternatives all start at a word's start, after the `\b` in front of them)
_SECRET_LEAK_WORDS = (
    r"(?:data|information|info|secret|credential|token|key|password|pii|privacy|dns|ip)s?"
    r" leak(?:s|ed|ing|age)?\b"
    r"|leak(?:s|ed|ing|age)?(?: of)? (?:\w+ ){0,3}?" + _LEAKED + r"\b"
    r"|" + _LEAKED + r" (?:\w+ ){0,3}?leak(?:s|ed|ing)\b"
)

# Checked in this order; the first type with a hit wins. Alternatives that start at a word's start share one
# `\b(?:...)`: Python's `re` tries every alternative at every position of the text, and a `\b` in front of
# each of them made the rules 3-4x dearer on text where none matches (~0.3 ms an upload; stop 28). Only
# whether a rule matches is read, never where. Security outranks error (a leaked key found
# through a stack trace is a security memory); error outranks the softer kinds. Error markers are the
# unambiguous ones (exception names, "failed", 报错): plain "wrong" or 错误 also mark corrections.
_TYPE_RULES: list[tuple[str, re.Pattern[str]]] = [
    (
        "security",
        re.compile(
            r"(?i:\b(?:cve-\d{4}-\d+|(?:xss|ssrf|csrf|rce|xxe|phishing|malware|ransomware|backdoor|trojan)\b"
            r"|" + _SECRET_LEAK_WORDS + r"|vulnerab|exploit"
            # a rule about handling secrets: "never paste the production database URL into the chat"
            r"|never (?:paste|share|commit|post|log|print|send|expose|store)\b[^.\n]{0,60}?\b"
            r"(?:url|password|key|token|secret|credential|connection string)s?\b"
            r"|credentials? (?:were |was )?(?:exposed|leaked|stolen|committed))"
            r"|(?<!dependency )injection\b|privilege escalation)"
            r"|漏洞|泄露|(?<!内存)泄漏|木马|注入|钓鱼|提权|后门|越权|恶意|攻击|勒索"
        ),
    ),
    (
        "error",
        re.compile(
            r"\b(?:[A-Z]\w+(?:Error|Exception)\b|" + _ERRNO_NAMES + r"\b)"
            r"|(?i:\b(?:traceback\b|error\s*[:：]|exception\b|errno\b|fail(?:ed|s|ure)?\b|crash"
            r"|segfault|segmentation fault|core dumped|panic:|panicked at\b|oom[- ]?kill(?:ed|er)\b"
            r"|sig(?:segv|abrt|bus|fpe|ill)\b|(?<!running )(?<!run )out of memory\b"
            r"|bad gateway\b|connection (?:refused|reset)\b|timed out\b"
            r"|exit (?:code|status) [1-9]|stack ?trace|cmake error\b|permission denied\b)"
            # build tools' fatal lines without an exception name: GNU make's "*** ... Stop." and
            # "*** [target] Error 2", CMake's "CMake Error at", a shell's "Permission denied"
            r"|\*\*\*[^\n]{0,200}?(?:\bstop\.|\berror \d+))"
            r"|报错|失败|异常|崩溃|出错|闪退|宕机|段错误|内存溢出|错误信息|错误码|错误[:：]"
        ),
    ),
    (
        "correction",
        re.compile(
            r"(?i:\b(?:actually\b|instead of\b|wrong\b|correction\b|incorrect\b|mistaken"
            r"|not [^.\n]{1,40}? but\b|should be\b|misconception))"
            r"|不是[^。\n]{0,30}而是|纠正|应该是|更正|搞错|误以为|其实"
        ),
    ),
    (
        "preference",
        re.compile(
            r"(?i:\b(?:prefer(?:s|red|ence)?\b|always use\b|i (?:like|love)\b|don'?t use\b|do not use\b"
            r"|never use\b|favou?rite\b|rather than\b))"
            r"|偏好|喜欢|习惯|倾向于|更愿意|不要用|总是用|优先使用|" + _PREFERENCE_PERSONAL
        ),
    ),
    (
        "life",
        re.compile(
            r"(?i:\b(?:(?:travel\w*|trip|flights?|airport|airline|boarding|seats?|luggage|visa|hotel|restaurant"
            # not a Makefile's "recipe lines" / "recipe prefix" / "recipe commands"
            r"|food|(?<!makefile )(?<!make )recipe(?!s? (?:lines?|prefix|commands?)\b)|cooking|diet"
            r"|health(?! ?check)|exercise|workout|commute|jet lag)\b|"
            + _LIFE_PERSONAL_WORDS
            + r"))|"
            + _LIFE_PERSONAL_ZH_START
        ),
    ),
    (
        # the life rule's ~50 Chinese words, a rule of their own with nothing else: `re` skips to the
        # positions where one of their first characters stands; with any other alternative beside them (an
        # anchor, English words) it tried each of them at every position (27.6 against 0.7 us an upload)
        "life",
        re.compile(
            r"生活|旅行|旅游|乘机|航班|机场|选座|行李|签证|酒店|餐厅|饮食|美食|做饭|健康|睡眠|运动|通勤|"
            + _LIFE_PERSONAL_ZH
        ),
    ),
]
DEFAULT_TYPE = "pattern"


def infer_type(content: str, context: str = "", resolution: str = "") -> str:
    """One of MEMORY_TYPES by keyword rules over all three fields, then classify's second look at what
    they leave as 'pattern' (failures without an exception name, chat filler, personal narration)."""
    return classify.refine_type(
        _type_of("\n".join((content, context, resolution))), content, context, resolution
    )


# An upload's text is typed when it is prepared and again when the judge asks whether either side is an
# error report (`same_subject`), under the dedup lock: the second time is a lookup. A few texts only (a
# field may hold tens of kB): enough for the uploads in flight.
@functools.lru_cache(maxsize=64)
def _type_of(text: str) -> str:
    for memory_type, pattern in _TYPE_RULES:
        if pattern.search(text):
            return memory_type
    return DEFAULT_TYPE


# --- summaries ---------------------------------------------------------------------------------------

# Shares of the L1 budget; a field that is empty gives its share to content.
L1_SHARES = {"content": 0.70, "context": 0.15, "resolution": 0.15}


def _one_line(text: str) -> str:
    return " ".join(text.split())


# A line with no word character (letters, CJK ones included, digits, `_`): a traceback's `^^^^` under the
# failing expression, a rule of `=====` or `-----`, a lone bracket.
_MARKER_LINE = re.compile(r"\W*")


def _without_marker_lines(text: str) -> str:
    """The text from its first line that says something: a pasted error that starts at Python's `^^^^` marker
    line (or under a rule of dashes) gets a one-line summary that starts with the error, not with carets."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not _MARKER_LINE.fullmatch(line):
            return "\n".join(lines[i:])
    return text


def summarize(
    content: str,
    context: str = "",
    resolution: str = "",
    l0_max_tokens: int = 64,
    l1_max_tokens: int = 256,
) -> tuple[str, str]:
    """(L0, L1): L0 is the first non-empty field on one line; L1 is the fields cut to shares of the budget."""
    fields = {"content": content.strip(), "context": context.strip(), "resolution": resolution.strip()}
    first = next((value for value in fields.values() if value), "")
    l0 = truncate_to_tokens(_one_line(_without_marker_lines(first)), l0_max_tokens)
    budgets = {name: int(l1_max_tokens * share) for name, share in L1_SHARES.items()}
    budgets["content"] += sum(budgets[name] for name in ("context", "resolution") if not fields[name])
    parts = [truncate_to_tokens(value, max(budgets[name], 1)) for name, value in fields.items() if value]
    return l0, "\n".join(parts)


# --- same subject -------------------------------------------------------------------------------------

# `same_subject(a, b)` is asked about pairs whose embeddings are already close, so its job is to find the
# differences cosine misses, and to say "the same" only on evidence. The rule, first match wins:
#
# 1. Distinguishing tokens disagree (`conflicts`): in one class (error identifier, package, version, path,
#    command of the fix, hash, quoted literal, number, weekday/month) each memory holds a token the other
#    never mentions ("No module named pandas" vs "... numpy", exit code 137 vs 1, 3pm vs 10am): different.
# 2. Opposite choices, unless either memory is an error report (whose symptoms are full of "cannot" and
#    "no module"): a term negated in one content + context ("never tabs", 不要用 Tab, "X over Y") and
#    asserted in the other; or the two pick different values of one of the CHOICE_CLASSES (tabs vs
#    spaces, English vs Chinese, concise vs detailed, ...): different.
# 3. Different fixes: both have a resolution and the two share less than FIX_MIN_CONTAINMENT of the
#    smaller one's evidence terms: different (same symptom, another cause).
# 4. Otherwise the same subject iff the *evidence* terms of all three fields overlap: shared / terms of
#    the smaller memory >= SAME_SUBJECT_CONTAINMENT, with at least SAME_SUBJECT_MIN_SHARED shared terms.
#    Evidence terms leave out what every turn of a chat or every filled-in template shares: greetings,
#    fillers, time words, numbers, speaker labels and names (`evidence_terms`).
#
# Terms are lowercase words (English stop words dropped, plural / -ed / -ing stripped; a dotted or
# hyphenated identifier counts whole and by its parts) and CJK character bigrams (punctuation splits a
# run; bigrams with a function character such as 的 or 了 and a few generic ones such as 用户 dropped).
# Containment rather than Jaccard, because a terse rule and a detailed incident of the same lesson share
# most of the terse one's terms but few of the other's.
#
# Tuned on the dev half of dedup_calibration.jsonl (`calibration.split_of`) and reported on the held-out
# half (docs/embeddings.md). A wrong merge loses a memory and a missed one only leaves a second row, so
# every constant sits on the precise side: a loose paraphrase is kept as a second memory.
SAME_SUBJECT_CONTAINMENT = 0.6
SAME_SUBJECT_MIN_SHARED = 3
FIX_MIN_CONTAINMENT = 0.25
# Characters a negation reaches: to the end of its clause, at most this far.
NEGATION_REACH = 40
# The judge reads at most this many characters of each field. A typical memory (a few hundred
# characters) takes about 0.2 ms; the cap holds a huge one to tens of milliseconds.
FIELD_MAX_CHARS = 2000

# Mutually exclusive values a preference picks from; each value is a regex over the asserted text.
CHOICE_CLASSES: tuple[dict[str, str], ...] = (
    {
        "en": r"\benglish\b|英文|英语",
        "zh": r"\bchinese\b|中文|汉语|简体|繁体",
        "ja": r"\bjapanese\b|日文|日语",
    },
    {"tabs": r"\btabs?\b|制表符", "spaces": r"\bspaces?\b|空格"},
    {
        "concise": r"\b(?:concise|brief|short|terse)\b|简短|精简|简洁|简要",
        "detailed": r"\b(?:detailed|verbose|thorough|in detail)\b|详细|详尽",
    },
    {"dark": r"\bdark\b|深色|暗色", "light": r"\blight\b|浅色|亮色"},
    {"single": r"\bsingle[- ]quotes?\b|单引号", "double": r"\bdouble[- ]quotes?\b|双引号"},
)

_IDEOGRAPHS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002ffff"
_TERM_RUN = re.compile(f"[{_IDEOGRAPHS}]+|[a-z0-9]+(?:[._+-][a-z0-9]+)*")
_IDEOGRAPH_RUN = re.compile(f"[{_IDEOGRAPHS}]+")
_COMPOUND_SEP = re.compile(r"[._+-]")
_STOP_WORDS = frozenset(
    """a an the and or nor but of to in on at by for with from as is are was were be been being it its this
    that these those i you he she we they me my your our their his her them us do does did doing have has
    had so if then than there here when while what which who whom how why can could should would will shall
    may might must just also only very too more most into onto about after before again all any each few
    other some such own same both up down out off no not use used using user users get gets got make makes
    made one via per every""".split()
)
_STOP_CHARS = frozenset("的了是在和也都就把被着个这那我你他她它们之其")
_STOP_BIGRAMS = frozenset(
    """用户 问题 时候 之后 一直 可以 需要 使用 没有 这个
    就是 如果 因为 所以 然后 已经 还是 出现 进行 一下""".split()
)
# Words too generic to make two memories opposite when one negates them ("not on client errors").
_NOT_A_CHOICE = frozenset({"error", "failure", "fail", "issue", "problem", "错误", "问题"})

# A negation cue negates the rest of its clause; "prefer X over Y" negates only Y. Every n't contraction is
# one ("didn't finish" says what "did not finish" says: the two must not read as opposite stances); a
# clause of reason ("because ...") is the cause, not what is negated, with or without a comma before it.
_NEGATION = re.compile(
    r"\b(?:no|not|never|don'?t|doesn'?t|\w+n['’]t|avoid|without|cannot|can'?t|hates?|dislikes?|instead of"
    r"|rather than)\b|\bprefer(?:s|red)?\b[^,;:.!?\n]{1,40}?\b(?P<over>over)\b"
    r"|不要|不用|别用|别|避免|禁止|讨厌|不能|不许|而不是|不是|不喜欢|无需|不需要"
)
_CLAUSE_END = re.compile(
    r"[,;:.!?()\[\]，；：。！？（）、\n—]|\b(?:but|except|unless|other than|because)\b|但|除了|除非|因为"
)
_CHOICE_PATTERNS = tuple({value: re.compile(rx) for value, rx in cls.items()} for cls in CHOICE_CLASSES)

_ERROR_ID = re.compile(
    r"\b[A-Z]\w+(?:Error|Exception)\b"  # exception names: KeyError, NullPointerException
    r"|\berrno\s*[:=]?\s*\d+|\b" + _ERRNO_NAMES + r"\b"  # errno values and names: errno 13, EACCES
    r"|\b[A-Z]{1,4}\d{3,5}\b|\bORA-\d{5}\b"  # compiler / linter / database codes: E1101, TS2345
    r"|\bexit (?:code|status) (?P<exit>\d+)|\bCVE-\d{4}-\d+"
    r"|(?:\b(?:HTTP|status)|返回|状态码)\s*(?P<status>[45]\d\d)\b"  # HTTP 404, status 502, 返回 429
    r"|\b(?P<named_status>[45]\d\d) (?i:bad request|unauthorized|forbidden|not found|method not allowed"
    r"|conflict|payload too large|request entity too large|unprocessable entity|too many requests"
    r"|internal server error|bad gateway"
    r"|service unavailable|gateway timeout)\b",  # 404 Not Found, 502 Bad Gateway
)
# Code-shaped names that are not errors: hashes, standards, encodings, versions, GPUs.
_NOT_AN_ERROR_ID = re.compile(r"(?:sha|aes|iso|rfc|pep|gb|cp|es|ecma|utf|ieee|rtx|gtx|x|[abhv])\d+")


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and word[-2] not in "siu":
        word = word[:-1]
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed"):
        return word[:-2]
    return word


def terms(text: str) -> set[str]:
    """The words and CJK bigrams that two texts on one subject are expected to share (see above)."""
    out: set[str] = set()
    for run in _TERM_RUN.findall(text.lower()):
        if _IDEOGRAPH_RUN.fullmatch(run):
            for i in range(len(run) - 1):
                bigram = run[i : i + 2]
                if bigram not in _STOP_BIGRAMS and not _STOP_CHARS.intersection(bigram):
                    out.add(bigram)
            continue
        parts = _COMPOUND_SEP.split(run)
        if len(parts) > 1:
            out.add(run)
        out.update(_stem(part) for part in parts if len(part) > 1 and part not in _STOP_WORDS)
    return out


def containment(a: Set[str], b: Set[str]) -> float:
    """Share of the smaller set found in the other; 0.0 if either is empty."""
    return len(a & b) / min(len(a), len(b)) if a and b else 0.0


def _field(memory: dict[str, Any], *names: str) -> str:
    return "\n".join(str(memory.get(name) or "")[:FIELD_MAX_CHARS] for name in names)


def _subject_text(memory: dict[str, Any]) -> str:
    return _field(memory, "content", "context")


def error_identifiers(text: str) -> set[str]:
    """Exception names, errno values, error codes and HTTP statuses in `text`, normalized ("http 404")."""
    ids: set[str] = set()
    for match in _ERROR_ID.finditer(text):
        found = match.group().lower()
        if status := match.group("status") or match.group("named_status"):
            ids.add(f"http {status}")
        elif match.group("exit"):
            ids.add(f"exit {match.group('exit')}")
        elif not _NOT_AN_ERROR_ID.fullmatch(found):
            ids.add(" ".join(found.replace(":", " ").replace("=", " ").split()))
    return ids


def _negated_spans(text: str) -> list[tuple[int, int, int]]:
    """(cue start, cue end, clause end) of each negation: the cue negates text[cue end:clause end]."""
    spans: list[tuple[int, int, int]] = []
    for cue in _NEGATION.finditer(text):
        start = cue.start("over") if cue.group("over") else cue.start()
        if spans and start < spans[-1][2]:
            continue
        end = _CLAUSE_END.search(text, cue.end())
        stop = end.start() if end else len(text)
        spans.append((start, cue.end(), min(stop, cue.end() + NEGATION_REACH)))
    return spans


def _stances(memory: dict[str, Any]) -> tuple[str, set[str], set[str]]:
    """(asserted text, asserted terms, negated terms) of content + context."""
    text = _subject_text(memory).lower()
    asserted, negated, pos = [], set(), 0
    for start, cue_end, stop in _negated_spans(text):
        asserted.append(text[pos:start])
        negated |= terms(text[cue_end:stop])
        pos = stop
    asserted.append(text[pos:])
    asserted_text = "\n".join(asserted)
    return asserted_text, terms(asserted_text), negated


def opposite_choices(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether one memory rejects what the other asks for, or the two pick different values of a choice."""
    text_a, said_a, denied_a = _stances(a)
    text_b, said_b, denied_b = _stances(b)
    only_denied_a, only_denied_b = denied_a - said_a, denied_b - said_b
    if ((only_denied_a & said_b) | (only_denied_b & said_a)) - _NOT_A_CHOICE:
        return True
    for choice in _CHOICE_PATTERNS:
        picked_a = {value for value, rx in choice.items() if rx.search(text_a)}
        picked_b = {value for value, rx in choice.items() if rx.search(text_b)}
        if picked_a and picked_b and picked_a != picked_b:
            return True
    return False


def _is_error_report(memory: dict[str, Any]) -> bool:
    return infer_type(*(_field(memory, name) for name in ("content", "context", "resolution"))) == "error"


# --- distinguishing tokens -----------------------------------------------------------------------------

# Two texts can share a template ("No module named X / pip install X", "Alice's birthday is on May 3",
# "Hey Mel! Good to see you!") and still say different things: the tokens that tell them apart are the
# package, version, path, command, hash, quoted literal, number or named entity. `conflicts(a, b)` lists
# the classes in which EACH side holds a token the other never mentions; any such class is evidence that
# the two are different memories, however close their embeddings are.
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])(\d+(?:[.:]\d+)*)(?:[a-z]{1,2})?(?![A-Za-z0-9_])", re.IGNORECASE)
_PACKAGE = re.compile(
    r"(?i:no module named|cannot find module|could not find (?:a version|module)|unable to locate package"
    r"|(?:pip3?|uv pip|pipx|conda|mamba|npm|pnpm|yarn|gem|brew|apt|apt-get|apk|dnf|yum|cargo|go|composer)"
    r" +(?:install|add|get|i|require)(?: +-{1,2}[\w-]+(?:[ =][\w.:/-]+)?)*"
    r"|\bimport|\bfrom)"
    r"\s+['\"`]?(?P<name>[A-Za-z@][\w.@/+-]*)"
)
_PATH = re.compile(
    r"(?<![\w/])(?:~|\.{1,2})?/(?:[\w.@+-]+/)*[\w.@+-]+|\b[\w-]+(?:/[\w.@+-]+){2,}"
    r"|\b[\w./-]+\.(?:py|js|ts|tsx|jsx|json|ya?ml|toml|conf|cfg|ini|log|key|pem|crt|txt|md|sh|sql|rs|go"
    r"|java|rb|php|lock|env|xml|html|css|cpp)\b",
    re.ASCII,
)
# A command is a tool and one of its subcommands (flags and arguments vary between two tellings of a fix).
_SUBCOMMANDS = {
    "git": "add am apply bisect branch checkout cherry-pick clean clone commit config fetch gc init lfs log"
    " merge mv pull push rebase reflog remote reset restore revert rm show stash status submodule switch tag"
    " worktree",
    "docker": "build builder buildx commit compose cp exec image images info inspect load login logs network"
    " ps pull push restart rm rmi run save system tag volume",
    "kubectl": "apply annotate autoscale cordon create delete describe drain edit exec expose get label"
    " logs patch port-forward rollout scale set top",
    "npm": "audit cache ci config dedupe install link ls outdated prune publish rebuild run test uninstall"
    " update",
    "pip": "cache config download freeze install list show uninstall wheel",
    "cargo": "add build check clean clippy fmt install run test update",
    "systemctl": "daemon-reload disable enable reload restart start status stop",
    "terraform": "apply destroy force-unlock import init plan refresh state taint untaint",
    "helm": "install rollback template uninstall upgrade",
}
_COMMAND = re.compile(r"\b(?P<tool>" + "|".join(_SUBCOMMANDS) + r")3?\s+(?:-[\w-]+\s+)*(?P<sub>[a-z][\w-]*)")
_HASH = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}\b")
_QUOTED = re.compile(r"['\"‘“`「](?P<q>[^'\"‘’“”`「」\n]{2,40})['\"’”`」]")
# Capitalised words in mid-sentence: names of people, places, products. ALL-CAPS words are acronyms or
# keywords (COPY, API) and sentence-initial words are just capitalised.
_ENTITY = re.compile(
    r"(?<![.!?:：。！？\n]\s)(?<![.!?:：。！？\n])(?<=[\w,;)'\"]\s)[A-Z][a-z]{1,}(?:[A-Z][a-z]+)*\b"
)
_NOT_AN_ENTITY = frozenset(
    """I The A An It This That These Those We You He She They My Our Your His Her Their Monday Tuesday
    Wednesday Thursday Friday Saturday Sunday January February March April May June July August September
    October November December Mr Mrs Ms Dr Hey Hi Hello Yes No Ok Okay Thanks Also""".split()
)
DISTINGUISHING_CLASSES = (
    "error",
    "package",
    "version",
    "path",
    "command",
    "hash",
    "literal",
    "number",
    "date",
)
_WEEKDAYS = (
    "monday 周一 星期一",
    "tuesday 周二 星期二",
    "wednesday 周三 星期三",
    "thursday 周四 星期四",
    "friday 周五 星期五",
    "saturday 周六 星期六",
    "sunday 周日 周天 星期日 星期天",
)
_MONTHS = "january february march april may june july august september october november december".split()
_DATE_WORDS = {
    **{name: f"d{i}" for i, names in enumerate(_WEEKDAYS) for name in names.split()},
    **{name: f"m{i}" for i, name in enumerate(_MONTHS, 1) if name != "may"},
}
_DATE = re.compile(
    r"\b(?:"
    + "|".join(n for n in _DATE_WORDS if n.isascii())
    + r")\b|周[一二三四五六日天]|星期[一二三四五六日天]"
)


def _mentions(token: str, text: str, words: Set[str]) -> bool:
    """Whether `text` mentions `token`: as a word, or (for longer tokens) as a substring."""
    return token in words or (len(token) > 3 and token in text)


def distinguishing_tokens(memory: dict[str, Any]) -> dict[str, set[str]]:
    """Tokens of each distinguishing class in the memory's three fields, lowercased."""
    found = _tokens_of(_field(memory, "content", "context", "resolution"), _field(memory, "resolution"))
    return {name: set(tokens) for name, tokens in found.items()}


# Cached by text: an upload's merge and supersede checks compare it with its nearest memories (conflicts),
# whose texts recur from upload to upload; each text's tokens were read again for every pair (~0.8 ms a
# pair, most of a batch item's supersede check).
@functools.lru_cache(maxsize=4096)
def _tokens_of(text: str, resolution: str) -> dict[str, set[str]]:
    """distinguishing_tokens of the fields' joined text and the resolution's (shared: never mutated)."""
    out: dict[str, set[str]] = {name: set() for name in DISTINGUISHING_CLASSES}
    out["error"] = error_identifiers(text)
    for m in _PACKAGE.finditer(text):
        name = m.group("name").lower().rstrip(".")
        if name not in _STOP_WORDS and name not in ("the", "a", "module", "package"):
            out["package"].add(name)
    numbers = {m.group(1) for m in _NUMBER.finditer(text)}
    out["version"] = {n for n in numbers if "." in n}
    out["number"] = numbers - out["version"]
    out["path"] = {m.group().lower().strip("./~") for m in _PATH.finditer(text) if len(m.group()) > 3}
    out["command"] = {
        f"{m.group('tool')} {m.group('sub')}"
        for m in _COMMAND.finditer(resolution.lower())
        if m.group("sub") in _SUBCOMMANDS[m.group("tool")].split()
    }
    out["hash"] = {m.group() for m in _HASH.finditer(text.lower())}
    out["literal"] = {q for m in _QUOTED.finditer(text) if (q := m.group("q").strip(" .…").lower())}
    out["date"] = {_DATE_WORDS[w] for w in _DATE.findall(text.lower())}
    return out


@functools.lru_cache(maxsize=4096)
def _words_of(text: str) -> frozenset[str]:
    return frozenset(re.findall(r"[\w.:/@+-]+", text)) | {m.group(1) for m in _NUMBER.finditer(text)}


def conflicts(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Classes in which each memory holds a distinguishing token that the other never mentions."""
    raw_a, raw_b = (
        _field(a, "content", "context", "resolution"),
        _field(b, "content", "context", "resolution"),
    )
    keys_a, keys_b = _tokens_of(raw_a, _field(a, "resolution")), _tokens_of(raw_b, _field(b, "resolution"))
    text_a, text_b = raw_a.lower(), raw_b.lower()
    words_a, words_b = _words_of(text_a), _words_of(text_b)
    found = []
    for name in DISTINGUISHING_CLASSES:
        if name in ("number", "error", "date"):
            only_a = keys_a[name] - keys_b[name] - keys_b["version"]
            only_b = keys_b[name] - keys_a[name] - keys_a["version"]
        elif name == "package":  # torch is not torchvision: whole words only
            only_a, only_b = keys_a[name] - words_b, keys_b[name] - words_a
        else:
            only_a = {k for k in keys_a[name] if not _mentions(k, text_b, words_b)}
            only_b = {k for k in keys_b[name] if not _mentions(k, text_a, words_a)}
        if only_a and only_b:
            found.append(name)
    return found


# Words that every turn of a conversation or every filled-in template shares: greetings, fillers,
# feelings, time words. They say nothing about WHAT a memory is about, so they are no evidence of a
# duplicate (numbers, names and dates are left out of the evidence the same way).
CHAT_WORDS = _CHAT_WORDS = frozenset(
    """hey hi hello oh wow yeah yes yep ok okay sure good great nice cool awesome amazing wonderful glad happy
    fun thank thanks love like lol haha really so well just too see seen look feel felt think thought know
    knew want wanted sound been doing going go went come came today tomorrow yesterday tonight week weekend
    month year morning afternoon evening night day days time times am pm soon later now ago last next new
    always never lot lots much many thing things something anything everything maybe totally definitely
    what's that's it's i'm i've i'd you're we're let let's how's there's tell told say said ask asked
    said talk talked mention mentioned share shared
    monday tuesday wednesday thursday friday saturday sunday january february march april may june july
    august september october november december
    error fail failure issue problem fix work run try""".split()
)
_CHAT_BIGRAMS = frozenset(
    """你好 好久 久不 最近 怎么 么样 感觉 真好 好羡 羡慕 哈哈 谢谢 上周 周末 今天 明天 昨天 下午 上午
    晚上 早上 时间 一起 知道 觉得 非常 特别 真的 今年 去年 明年 夏天 冬天 分享 聊到 起来""".split()
)
_SPEAKER = re.compile(r"^\s*([^\s:：]{1,20})\s*[:：]", re.MULTILINE)


def agree(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """The gate of an automatic merge: no class of distinguishing tokens disagrees."""
    return not conflicts(a, b)


def evidence_terms(memory: dict[str, Any], *names: str) -> set[str]:
    """Terms of the named fields that say what the memory is about: `terms` less chit-chat, template
    words, numbers, speaker labels and names."""
    text = _field(memory, *(names or ("content", "context", "resolution")))
    noise = {w.lower() for w in _ENTITY.findall(text)} | {m.group(1).lower() for m in _SPEAKER.finditer(text)}
    return {
        t
        for t in terms(text)
        if t not in _CHAT_WORDS
        and t not in _CHAT_BIGRAMS
        and t not in noise
        and not any(c.isdigit() for c in t)
    }


def _normalized_fields(memory: dict[str, Any]) -> tuple[str, ...]:
    return tuple(
        " ".join(str(memory.get(n) or "").lower().split()) for n in ("content", "context", "resolution")
    )


def same_subject(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two close memories are one lesson: no veto (distinguishing tokens, opposite choices,
    another fix) and enough shared evidence terms. Unsure means no: a missed merge costs a row, a wrong
    one a memory."""
    if _normalized_fields(a) == _normalized_fields(b):
        return True
    if conflicts(a, b):
        return False
    if not (_is_error_report(a) or _is_error_report(b)) and opposite_choices(a, b):
        return False
    fix_a, fix_b = evidence_terms(a, "resolution"), evidence_terms(b, "resolution")
    if fix_a and fix_b and containment(fix_a, fix_b) < FIX_MIN_CONTAINMENT:
        return False
    all_a, all_b = evidence_terms(a), evidence_terms(b)
    shared = len(all_a & all_b)
    return shared >= SAME_SUBJECT_MIN_SHARED and containment(all_a, all_b) >= SAME_SUBJECT_CONTAINMENT


# --- merge --------------------------------------------------------------------------------------------


def merge(existing: dict[str, Any], incoming: dict[str, Any]) -> dict[str, str] | None:
    """Offline, the existing text stays as it is (None), with one exception: an empty resolution takes the
    incoming one. A keyword heuristic cannot write a faithful combined text (appending "Alternative: ..."
    fragments misquoted both uploads and dropped whatever did not fit); the incoming upload keeps its own
    text in its contribution, which the memory's full-text document covers (ultron/memory/document.py)."""
    old = str(existing.get("resolution") or "").strip()
    new = str(incoming.get("resolution") or "").strip()
    if old or not new:
        return None
    return {
        "content": str(existing.get("content") or ""),
        "context": str(existing.get("context") or ""),
        "resolution": new,
    }


# --- extraction ---------------------------------------------------------------------------------------

MAX_ITEMS = 20
MIN_ITEM_TOKENS = 4
ITEM_FIELD_MAX_TOKENS = 1024
BASE_CONFIDENCE = 0.5
WITH_RESOLUTION_CONFIDENCE = 0.6
MAX_TAGS = 10

_HEADING = re.compile(r"^#{1,6}\s+(.*)$")
_LIST_ITEM = re.compile(r"^(?:\d{1,3}[.)、]|[-*•+]|[（(]\d{1,3}[)）])\s*")
_LABEL_SEP = r"\s*[:：]\s*"
_RESOLUTION_LABEL = re.compile(
    r"^(?:root cause|cause|reason|fix(?:ed)?|solution|resolution|workaround|solved by|resolved by"
    r"|原因|根因|解决方案|解决办法|解决方法|解决|修复|处理方法|办法)" + _LABEL_SEP,
    re.IGNORECASE,
)
_CONTEXT_LABEL = re.compile(
    r"^(?:context|environment|env|scenario|background|when|场景|环境|背景|上下文)" + _LABEL_SEP,
    re.IGNORECASE,
)
# A label in mid-line ("pip failed. Fix: use a mirror") starts a new part too.
_INLINE_LABEL = re.compile(
    r"(?<=[。.!！?？;；])\s*(?=(?:root cause|cause|fix|solution|workaround|原因|解决方案|解决办法|解决)"
    + _LABEL_SEP
    + ")",
    re.IGNORECASE,
)
_TAG_WORDS = """
python pip conda docker kubernetes k8s git github linux macos windows bash postgres postgresql mysql redis
nginx node npm javascript typescript react java maven gradle go rust cargo cuda pytorch tensorflow aws gcp
azure ssh http https dns ssl tls pandas numpy jupyter vscode
"""
_TAG_VOCABULARY = _TAG_WORDS.split()


def _dedent(block: list[str]) -> list[str]:
    """Remove the block's common indent, so "top-level" means top level within the block."""
    indent = min(len(line) - len(line.lstrip()) for line in block)
    return [line[indent:] for line in block]


def _blocks(text: str) -> list[list[str]]:
    """Lines grouped into blocks, split at blank lines and at Markdown headings (a block's first line)."""
    blocks: list[list[str]] = [[]]
    for raw in text.replace("\r\n", "\n").split("\n"):
        line = raw.rstrip()
        if not line.strip() or _HEADING.match(line.strip()):
            blocks.append([])
        if line.strip():
            blocks[-1].append(line.expandtabs(4))
    return [_dedent(block) for block in blocks if block]


def _list_items(block: list[str]) -> tuple[list[str], list[str]]:
    """(lines before the first top-level list item, the list items with their continuation lines)."""
    intro: list[str] = []
    items: list[str] = []
    for line in block:
        if not line[:1].isspace() and _LIST_ITEM.match(line):
            items.append(_LIST_ITEM.sub("", line, count=1))
        elif items:
            items[-1] += "\n" + line.strip()
        else:
            intro.append(line.strip())
    return intro, items


def _is_story(items: list[str]) -> bool:
    """A list with a cause or fix step is one troubleshooting story, not independent items."""
    return any(_RESOLUTION_LABEL.match(item.strip()) for item in items)


def _units(block: list[str]) -> list[tuple[str, str]]:
    """(text, shared context) units: the whole block, or each item of a list of independent items."""
    heading = _HEADING.match(block[0].strip())
    title = heading.group(1).strip() if heading else ""
    lines = block[1:] if heading else block
    intro, items = _list_items(lines)
    if len(items) < 2 or _is_story(items):
        body = "\n".join(intro + items) if items else "\n".join(line.strip() for line in lines)
        if not items and not any(_RESOLUTION_LABEL.match(line.strip()) for line in lines):
            # one paragraph of prose: a diary of several events is several memories
            return [(event, title) for event in classify.events(body)] if body else [(title, "")]
        return [(body or title, title if body else "")]
    context = ": ".join(part for part in (title, " ".join(intro).rstrip(":：")) if part)
    return [(item, context) for item in items]


def _split_parts(text: str) -> dict[str, list[str]]:
    """Sort lines (and labelled mid-line parts) into content, context and resolution."""
    parts: dict[str, list[str]] = {"content": [], "context": [], "resolution": []}
    for line in text.split("\n"):
        for piece in _INLINE_LABEL.split(_LIST_ITEM.sub("", line.strip(), count=1)):
            piece = piece.strip()
            if not piece:
                continue
            if _RESOLUTION_LABEL.match(piece):
                parts["resolution"].append(piece)
            elif _CONTEXT_LABEL.match(piece):
                parts["context"].append(_CONTEXT_LABEL.sub("", piece, count=1))
            else:
                parts["content"].append(piece)
    return parts


def _tags(text: str) -> list[str]:
    words = set(re.findall(r"[a-z0-9+#]+", text.lower()))
    return [tag for tag in _TAG_VOCABULARY if tag in words][:MAX_TAGS]


def _item(text: str, shared_context: str) -> dict[str, Any] | None:
    parts = _split_parts(text)
    content = "\n".join(parts["content"]) or "\n".join(parts["resolution"][:1])
    if count_tokens(content) < MIN_ITEM_TOKENS:
        return None
    context = "\n".join(p for p in [shared_context, *parts["context"]] if p)
    resolution = "\n".join(parts["resolution"]) if parts["content"] else "\n".join(parts["resolution"][1:])
    return {
        "content": truncate_to_tokens(content, ITEM_FIELD_MAX_TOKENS),
        "context": truncate_to_tokens(context, ITEM_FIELD_MAX_TOKENS),
        "resolution": truncate_to_tokens(resolution, ITEM_FIELD_MAX_TOKENS),
        "confidence": WITH_RESOLUTION_CONFIDENCE if resolution else BASE_CONFIDENCE,
        "tags": _tags(text),
    }


def extract(text: str) -> list[dict[str, Any]]:
    """Split free text into self-contained memory items by its layout; at most MAX_ITEMS."""
    items: list[dict[str, Any]] = []
    for block in _blocks(text):
        for unit_text, shared_context in _units(block):
            item = _item(unit_text, shared_context)
            if item is not None:
                items.append(item)
            if len(items) >= MAX_ITEMS:
                return items
    return items
