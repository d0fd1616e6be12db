"""Offline typing and importance: what a memory is (error, preference, life, ...), how much it matters,
and whether it is chit-chat that holds nothing worth recalling.

`heuristic.infer_type` delegates here. The first pass is heuristic's keyword rules (`_TYPE_RULES`); what
they leave as 'pattern' gets a second look: failure phrasings without an exception name ("pip install
times out", "fatal: refusing to merge", `error[E0502]`), chat filler and personal narration (a chat turn
with no technical word is a person's life, not a coding pattern). Measured on
tests/data/typing_sentences.jsonl (200 labelled sentences, a dev part the rules were tuned on and a
held-out part they were not; docs/memory-types.md).
"""

from __future__ import annotations

import re

# A "Name: " prefix of a chat turn; the rules read the words after it.
# A speaker label: a name, or the placeholder redaction put in its place ("<PERSON>: ..."), which is no
# less a label and, left in, is one token every redacted speaker's turns share.
_SPEAKER = re.compile(
    r"^\s*(?:[A-Z][a-z'-]{0,19}(?: [A-Z][a-z'-]{0,19})?|[\u4e00-\u9fff]{1,4}|<[A-Z][A-Z_]{1,30}>)\s*[:：]\s+"
)
_NOT_A_SPEAKER = frozenset(
    "Error Fatal Warning Note Fix Cause Plan Context Correction Update Root Solution Workaround Todo"
    " Question Answer Reason Result Summary Step".split()
)

# Failure phrasings that name no exception: compiler codes, git's fatal:, hangs, refusals, timeouts,
# status codes, a service down.
# The patterns here are only asked whether they match. Alternatives that start at a word's start share one
# `\b(?:...)` (heuristic.py, _TYPE_RULES: 3-4x cheaper on text where none matches).
_FAILURE = re.compile(
    r"\b(?:error\[E\d{3,4}\]|ERR!|E\d{4}\b)|^\s*(?:fatal|error|npm ERR!)"
    r"|(?i:\b(?:time[sd]? out\b|timing out\b|hang(?:s|ing)?\b(?! out)|hung\b|freez(?:es|ing)\b"
    r"|refus(?:es|ed|ing)\b|rejected\b|unreachable\b|cannot (?:connect|find|read|download|borrow"
    r"|open|resolve|load|access)|can'?t (?:connect|find|reach|open|load|resolve)|unable to\b"
    r"|not found\b|no space left\b|disk (?:is )?full\b|deadlock|aborted\b"
    r"|br(?:oke|eaks?) (?:on|with|when|after|the (?:build|deploy|tests?|site|app)|prod|production|ci)\b"
    r"|broken (?:build|pipe|link|image|deploy)"
    r"|exits? with code\b|code 137\b|dies\b|died\b"
    r"|stopped (?:going|working|picking"
    r"|responding)|stop(?:s)? picking\b|stale lock\b|too many (?:clients|connections|open files)"
    r"|is down\b|went down\b|outage\b|blank (?:page|screen)\b|not run\b|never (?:returns|finishes"
    r"|starts)|flaky\b|does ?n[o']t (?:work|start|build|compile)|[45]\d\d\b"
    r"(?= (?:[A-Z]|error|errors|status|response|for))|the [45]\d\ds\b)"
    r"|[A-Z]_(?:FAILED|ERROR|TIMEOUT|DENIED)\b)"
    r"|超时|卡住|卡死|连不上|拒绝|装不上|找不到|启动不了|打不开|挂了|不可用|跑不起来"
)
_SECURITY_EXTRA = re.compile(
    r"(?i:\b(?:access|api|secret|private) keys?\b[^.\n]{0,40}\b(?:committed|pushed|public|exposed|rotated)"
    r"|\bsql injection\b)"
)
_PREFERENCE_EXTRA = re.compile(
    r"(?i:^\s*keep (?:your|the|my) (?:answers|replies|messages|explanations)\b"
    r"|\b(?:I'?d love it if you|(?:remind|show|send|give) me)\b)"
    r"|统一用|一律用|给我推荐"
)


def word_tree(words: str) -> str:
    """`a|b|...` literal words (case as matched) as one prefix tree, `a(?:irflow|pi(?:s)?)|b(?:...)`: Python's
    `re` tries a flat alternation's words one by one at every word start, a tree's first letters once (_TECH's
    list: 38 -> 12 us a synthetic upload). Matches where the flat alternation does (a trailing `\\b` decides
    between `api` and `apis` alike)."""
    tree: dict[str, dict] = {}
    for word in words.split("|"):
        node = tree
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict[str, dict]) -> str:
        branches = [re.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return emit(tree)


# Words that mark a technical text: a chat turn without any of them that talks about its speaker is a
# life memory. Code-shaped tokens (paths, dotted names, snake_case, flags, backticks) count too.
_TECH_WORDS = (
    "api|apis|server|servers|database|db|sql|query|queries|release|build|ci|cd|pipeline"
    "|cluster|pod|pods|container|docker|kubernetes|k8s|git|branch|commit|merge|repo|code|bug|test|tests"
    "|script|config|cache|index|schema|migration|migrate|warehouse|etl|dag|dags|service|services|endpoint"
    "|endpoints|backend|frontend|python|java|rust|golang|node|npm|pip|sprint|roadmap|staging|prod|production"
    "|latency|model|dashboard|data|metrics|log|logs|jenkins|airflow|sso|spark|kafka|redis|postgres"
    "|webhook|ranking|load-test|traffic|users"
)
_TECH = re.compile(
    r"(?i:\b(?:" + word_tree(_TECH_WORDS) + r"|deploy\w*|v\d)\b)"
    # a file name or host (`x.yml`), an identifier with an underscore inside (`max_connections`): written as
    # `[\w-]+\.[a-z]{2,4}\b` and `\b\w+_\w+\b`, which match where these do, and backtracked through every word
    r"|[\w-]\.[a-z]{2,4}\b|\w_\w|`|--\w|/\w+/"
    r"|数据库|服务器|部署|发布|接口|代码|集群|迁移|日志|上线|版本|运维|测试|预发"
)
_PERSONAL = re.compile(
    r"(?i:\b(?:I|I'm|I'll|I've|I'd|me|my|we|we're|we'll|our|us|you|your|you're|kids'?|children|mom|dad"
    r"|wife|husband)\b)|我|我们|你|咱"
)
# Chat filler: greetings, reactions, thanks and goodbyes, and the question back that keeps a chat going.
_FILLER_WORDS = frozenset(
    """hey hi hello morning evening night good great nice cool wow oh ah aw awesome amazing lovely sweet
    fantastic wonderful congrats congratulations thanks thank you cheers bye goodbye later soon see talk
    haha lol ha hah yes yeah yep yup no nope ok okay sure right true fair enough totally agree agreed indeed
    same here honestly really seriously what how who which when where why did do does was were is are am
    that that's it's so such sounds sound like fun much more tell me know mean hear sorry to let go ahead
    i'm listening glad happy can't wait goes went how's what's must have been be exhausting classic idea had
    i it the a an of all at in on for with well anyway run have pick picked dates next happened then long time
    sleep slept friday weekend these days doing up new news worries worry problem again too just hope
    hopefully bet guess totally definitely absolutely course not no""".split()
)
_FILLER_ZH = re.compile(
    r"^(?:哈+|嗯+|哇|好的|好呀|好啊|太好了|真好|真棒|真羡慕|晚安|早安|早上好|辛苦了|谢谢|谢啦|回头聊|好久不见|"
    r"最近怎么样|听起来|恭喜|加油|没事|没关系|是啊|对啊|真的吗|拜拜|再见|你|啊|吧|呢|了|很|不错|，|。|！|？|\s)+$"
)
_WORD = re.compile(r"[A-Za-z][A-Za-z']*")
FILLER_MAX_WORDS = 12

# What matters more than most: a failure that reached production or customers, a leaked secret, and the
# milestones of a person's life. Chit-chat matters least.
_SEVERE = re.compile(
    r"(?i:\bproduction\b|\bin prod\b|\bprod(?:uction)? (?:is )?down\b|\boutage\b|\bcustomers?\b|\blost\b"
    r"|\bfor every (?:customer|user)\b|\bpayments?\b|\bdisk died\b|\bnobody noticed\b)"
    r"|线上|生产环境|宕机|全部不可用|丢失"
)
_MILESTONE = re.compile(
    r"(?i:\b(?:got married\b|getting married\b|our wedding\b|was born\b|were born\b|passed away\b"
    r"|died\b|defended my (?:phd|thesis)|graduated\b|new job\b|promot(?:ed|ion)\b|first house\b"
    r"|bought (?:a|our) (?:house|flat|home)\b|engaged\b|expecting (?:a baby|twins)\b|pregnant\b"
    r"|retired\b|divorced?\b))"
    r"|结婚|出生|去世|过世|升职|毕业|买房|怀孕|订婚|退休|离婚"
)
IMPORTANCE_HIGH = 8
IMPORTANCE_DEFAULT = 5
IMPORTANCE_CHIT_CHAT = 2


def words_of(text: str) -> str:
    """The text without a chat turn's speaker prefix ("Maya: ..."); other texts unchanged."""
    m = _SPEAKER.match(text)
    if m is None or m.group().split()[0].rstrip(":：") in _NOT_A_SPEAKER:
        return text
    rest = text[m.end() :]
    return rest if rest.strip() else text


def is_chit_chat(content: str, context: str = "", resolution: str = "") -> bool:
    """A short turn of greetings, reactions and questions back ("That's great! Which dates did you
    pick?"): nothing in it is worth recalling by itself."""
    if context.strip() or resolution.strip():
        return False
    text = words_of(content).strip()
    if not text or _TECH.search(text):
        return False
    if re.search(r"[\u4e00-\u9fff]", text):
        return len(text) <= 16 and bool(_FILLER_ZH.match(text))
    words = [w.lower() for w in _WORD.findall(text)]
    if not words or len(words) > FILLER_MAX_WORDS or re.search(r"\d", text):
        return False
    return all(w in _FILLER_WORDS for w in words)


def refine_type(first: str, content: str, context: str = "", resolution: str = "") -> str:
    """The type after heuristic's keyword rules gave `first`: a second look at what they call 'pattern'."""
    text = "\n".join(part for part in (words_of(content), context, resolution) if part)
    if first not in ("pattern", "correction", "preference", "life"):
        return first
    if _SECURITY_EXTRA.search(text):
        return "security"
    if first == "pattern" and _FAILURE.search(text):
        return "error"
    if first != "pattern":
        return first
    if is_chit_chat(content, context, resolution):
        return "life"
    if _PREFERENCE_EXTRA.search(text):
        return "preference"
    if not _TECH.search(text) and (_PERSONAL.search(text) or _MILESTONE.search(text)):
        return "life"
    return first


def infer_importance(memory_type: str, content: str, context: str = "", resolution: str = "") -> int:
    """1 (trivial) to 10 (vital): high for a failure that hit production, a leaked secret, a milestone of
    a person's life; low for chit-chat; the neutral 5 otherwise."""
    text = "\n".join(part for part in (words_of(content), context, resolution) if part)
    if memory_type == "security" and _SECURITY_EXTRA.search(text):
        return IMPORTANCE_HIGH
    if memory_type == "error" and _SEVERE.search(text):
        return IMPORTANCE_HIGH
    if memory_type == "life" and _MILESTONE.search(text):
        return IMPORTANCE_HIGH
    if is_chit_chat(content, context, resolution):
        return IMPORTANCE_CHIT_CHAT
    return IMPORTANCE_DEFAULT


# --- diary split ----------------------------------------------------------------------------------------

# A sentence that opens with a time or a step in a story starts a new event ("After lunch ...", "In the
# evening ...", "Then ...", 下午 ..., 后来 ...).
_EVENT_START = re.compile(
    r"(?i:^(?:then|later|afterwards|after (?:that|lunch|dinner|work|breakfast|school)|in the (?:morning"
    r"|afternoon|evening)|this (?:morning|afternoon|evening)|at (?:noon|night|lunch|\d{1,2}(?::\d\d)?"
    r"\s*(?:am|pm)?)|tonight|yesterday|today|on (?:monday|tuesday|wednesday|thursday|friday|saturday"
    r"|sunday)|finally|before (?:bed|dinner|lunch)|around \d)\b)"
    r"|^(?:然后|后来|接着|之后|最后|早上|上午|中午|下午|傍晚|晚上|今天|昨天|午饭后|晚饭后|睡前)"
)
_SENTENCE = re.compile(r"[^.!?。！？]+(?:[.!?。！？]+[\"'”’)]*|$)")
# A paragraph of at least this many sentences, this many of them opening an event, is a diary of events.
DIARY_MIN_SENTENCES = 3
DIARY_MIN_STARTS = 2
DIARY_HEADER_WORDS = 4
# A troubleshooting story is one memory however many steps it tells.
_STORY = re.compile(r"(?i:\bfail|\berror|\bexception|\bfix(?:ed)?\b|\bworkaround)|报错|失败|异常|修复")


def events(paragraph: str) -> list[str]:
    """A diary paragraph cut into its events (a new event at each sentence that opens with a time or a
    story step); any other paragraph whole, as one item. Offline only: it reads the layout of time words,
    not the meaning."""
    sentences = [s.strip() for s in _SENTENCE.findall(" ".join(paragraph.split())) if s.strip()]
    starts = [i for i, s in enumerate(sentences) if i and _EVENT_START.match(s)]
    if (
        len(sentences) < DIARY_MIN_SENTENCES
        or len(starts) < DIARY_MIN_STARTS
        or _FAILURE.search(paragraph)
        or _STORY.search(paragraph)
    ):
        return [paragraph]
    # a short opening line ("Busy Saturday.") heads the first event rather than standing alone
    header = sentences[0]
    short = len(header.split()) <= DIARY_HEADER_WORDS and len(header) <= 6 * DIARY_HEADER_WORDS
    first = starts[1] if short and starts[0] == 1 and not _EVENT_START.match(header) else starts[0]
    cuts = [0, first, *(i for i in starts if i > first), len(sentences)]
    spacer = "" if re.search(r"[\u4e00-\u9fff]", paragraph) else " "
    return [spacer.join(sentences[a:b]) for a, b in zip(cuts, cuts[1:], strict=False) if a < b]
