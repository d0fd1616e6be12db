"""Offline intelligence: keyword rules and text overlap standing in for an LLM.

It is honest about its limits. It classifies by keywords, summarizes by truncation, judges "same
subject" by word overlap, cannot abstract two memories into one (it only records an alternative fix),
and splits free text by its layout rather than its meaning.
"""

from __future__ import annotations

import re
from typing import Any

from ultron.providers.tokens import CJK_CLASS, count_tokens, truncate_to_tokens

# --- type inference ----------------------------------------------------------------------------------

_ERRNO_NAMES = (
    "(?:ENOENT|EACCES|EPERM|EEXIST|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EADDRINUSE|ENOSPC|EMFILE|ENOMEM"
    "|EPIPE|EAGAIN|EINVAL|EBUSY|ENOTFOUND|EISDIR|ENOTDIR|EROFS)"
)

# Checked in this order; the first type with a hit wins. Security outranks error (a leaked key found
# through a stack trace is a security memory); error outranks the softer kinds. Error markers are the
# unambiguous ones (exception names, "failed", 报错): plain "wrong" or 错误 also mark corrections.
_TYPE_RULES: list[tuple[str, re.Pattern[str]]] = [
    (
        "security",
        re.compile(
            r"(?i:\bcve-\d{4}-\d+|\b(xss|ssrf|csrf|rce|xxe|phishing|malware|ransomware|backdoor|trojan)\b"
            r"|(?<!dependency )injection\b|(?<!memory )\bleak(s|ed|ing|age)?\b"
            r"|\bvulnerab|\bexploit|privilege escalation"
            r"|\bcredentials? (were |was )?(exposed|leaked|stolen|committed))"
            r"|漏洞|泄露|泄漏|木马|注入|钓鱼|提权|后门|越权|恶意|攻击|勒索"
        ),
    ),
    (
        "error",
        re.compile(
            r"\b[A-Z]\w+(?:Error|Exception)\b|\b" + _ERRNO_NAMES + r"\b"
            r"|(?i:\btraceback\b|\berror\s*[:：]|\bexception\b|\berrno\b|\bfail(ed|s|ure)?\b|\bcrash"
            r"|\bsegfault|\bpanic:|\bexit (code|status) [1-9]|\bstack ?trace)"
            r"|报错|失败|异常|崩溃|出错|闪退|错误信息|错误码|错误[:：]"
        ),
    ),
    (
        "correction",
        re.compile(
            r"(?i:\bactually\b|\binstead of\b|\bwrong\b|\bcorrection\b|\bincorrect\b|\bmistaken"
            r"|\bnot [^.\n]{1,40}? but\b|\bshould be\b|\bmisconception)"
            r"|不是[^。\n]{0,30}而是|纠正|应该是|更正|搞错|误以为|其实"
        ),
    ),
    (
        "preference",
        re.compile(
            r"(?i:\bprefer(s|red|ence)?\b|\balways use\b|\bi (like|love)\b|\bdon'?t use\b|\bdo not use\b"
            r"|\bnever use\b|\bfavou?rite\b|\brather than\b)"
            r"|偏好|喜欢|习惯|倾向于|更愿意|不要用|总是用|优先使用"
        ),
    ),
    (
        "life",
        re.compile(
            r"(?i:\b(travel\w*|trip|flights?|airport|airline|boarding|seats?|luggage|visa|hotel|restaurant"
            r"|food|recipe|cooking|diet|health(?! ?check)|exercise|workout|commute|jet lag)\b)"
            r"|生活|旅行|旅游|乘机|航班|机场|选座|行李|签证|酒店|餐厅|饮食|美食|做饭|健康|睡眠|运动|通勤"
        ),
    ),
]
DEFAULT_TYPE = "pattern"


def infer_type(content: str, context: str = "", resolution: str = "") -> str:
    """One of MEMORY_TYPES by keyword rules over all three fields; 'pattern' when nothing matches."""
    text = "\n".join((content, context, resolution))
    for memory_type, pattern in _TYPE_RULES:
        if pattern.search(text):
            return memory_type
    return DEFAULT_TYPE


# --- summaries ---------------------------------------------------------------------------------------

# Shares of the L1 budget; a field that is empty gives its share to content.
L1_SHARES = {"content": 0.70, "context": 0.15, "resolution": 0.15}


def _one_line(text: str) -> str:
    return " ".join(text.split())


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
    l0 = truncate_to_tokens(_one_line(first), l0_max_tokens)
    budgets = {name: int(l1_max_tokens * share) for name, share in L1_SHARES.items()}
    budgets["content"] += sum(budgets[name] for name in ("context", "resolution") if not fields[name])
    parts = [truncate_to_tokens(value, max(budgets[name], 1)) for name, value in fields.items() if value]
    return l0, "\n".join(parts)


# --- same subject -------------------------------------------------------------------------------------

# Jaccard overlap of word / CJK-bigram sets over content + context at or above which two memories are
# taken to be about the same subject. It only runs in the soft band, where the embeddings already say
# "close", so it needs to confirm a shared vocabulary, not find one: 0.3 keeps paraphrases of one
# problem together and splits neighbours that share only a topic.
SAME_SUBJECT_JACCARD = 0.3

_WORD_OR_CJK = re.compile(f"[{CJK_CLASS}]+|[^\\W{CJK_CLASS}]+")
_CJK_RUN = re.compile(f"[{CJK_CLASS}]+")
_ERROR_ID = re.compile(
    r"\b[A-Z]\w+(?:Error|Exception)\b"  # exception names: KeyError, NullPointerException
    r"|\berrno\s*[:=]?\s*\d+|\b" + _ERRNO_NAMES + r"\b"  # errno values and names: errno 13, EACCES
    r"|\b[A-Z]{1,4}\d{3,5}\b|\bORA-\d{5}\b"  # compiler / linter / database codes: E1101, TS2345
    r"|\b(?:HTTP|status)\s*[45]\d\d\b|\bexit (?:code|status) \d+|\bCVE-\d{4}-\d+",
)


def _shingles(text: str) -> set[str]:
    """Lowercase words (two characters or more) and CJK character bigrams."""
    out: set[str] = set()
    for run in _WORD_OR_CJK.findall(text.lower()):
        if not _CJK_RUN.fullmatch(run):
            if len(run) > 1:
                out.add(run)
        elif len(run) == 1:
            out.add(run)
        else:
            out.update(run[i : i + 2] for i in range(len(run) - 1))
    return out


def _subject_text(memory: dict[str, Any]) -> str:
    return f"{memory.get('content') or ''}\n{memory.get('context') or ''}"


def error_identifiers(text: str) -> set[str]:
    """Exception names, errno values and error codes mentioned in `text`."""
    return {match.group().lower() for match in _ERROR_ID.finditer(text)}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def same_subject(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two memories cover the same subject: distinct error identifiers say no, else word overlap."""
    ids_a, ids_b = error_identifiers(_subject_text(a)), error_identifiers(_subject_text(b))
    if ids_a and ids_b and not ids_a & ids_b:
        return False
    return jaccard(_shingles(_subject_text(a)), _shingles(_subject_text(b))) >= SAME_SUBJECT_JACCARD


# --- merge --------------------------------------------------------------------------------------------

ALTERNATIVE_PREFIX = "Alternative: "
# A resolution collects at most this many alternatives, each at most this long; past that the record
# would grow with every duplicate upload and drown its first, usually best, fix.
MAX_ALTERNATIVES = 3
ALTERNATIVE_MAX_TOKENS = 256


def _normalized(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def merge(existing: dict[str, Any], incoming: dict[str, Any]) -> dict[str, str] | None:
    """Keep the existing text, adding the incoming resolution as an alternative if it is new; else None."""
    old = str(existing.get("resolution") or "").strip()
    new = str(incoming.get("resolution") or "").strip()
    if not new or _normalized(new) in _normalized(old):
        return None
    if old and old.count(ALTERNATIVE_PREFIX) >= MAX_ALTERNATIVES:
        return None
    addition = truncate_to_tokens(new, ALTERNATIVE_MAX_TOKENS)
    resolution = f"{old}\n{ALTERNATIVE_PREFIX}{addition}" if old else addition
    return {
        "content": str(existing.get("content") or ""),
        "context": str(existing.get("context") or ""),
        "resolution": resolution,
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
