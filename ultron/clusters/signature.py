"""Error signatures: an error line with what is particular to one run taken out (paths, numbers, quoted
identifiers, source locations), so that two runs that met the same kind of error share one line:

    nginx: [emerg] unknown directive "proxy_set_headr" in /etc/nginx/conf.d/site.conf:9
    -> nginx: [emerg] unknown directive
    mean.c:(.text+0x8d): undefined reference to `sqrt'      -> undefined reference
    make: *** [Makefile:12: stats] Error 1                 -> make: *** Error

Cluster names and skill titles are built from the signatures their members share (`title_of`)."""

from __future__ import annotations

import re

# A source location a tool puts before its message: "src/main.c:3:10:", "mean.c:(.text+0x8d):",
# "Makefile:14:", "/usr/bin/ld: build/mean.o:".
_LOCATION = re.compile(r"^(?:\S*/)?[\w.-]+(?::\d+)+:\s+|^[\w./-]+:\([^)]*\):\s+|^/\S+:\s+(?=\S+:)")
_QUOTED = re.compile(r"`[^`']*[`']|\"[^\"]*\"|'[^']*'")
# A bracketed location ("[Makefile:12: stats]"); a one-word tag ("[emerg]", "[E0502]") stays.
_BRACKET = re.compile(r"\[[^\]]*[\s:/][^\]]*\]")
_PAREN = re.compile(r"\([^()]*\)")
_IN_PATH = re.compile(r"\s+(?:in|at)\s+\S*[/\\]\S*")
_PATH = re.compile(r"\S*[/\\]\S*")
_FILE = re.compile(r"\b[\w-]+\.(?:[a-z]{1,4})\b")
_IDENT = re.compile(r"\b\w*_\w*\b|\b\w+\(\)")
_DURATION = re.compile(r"\b(?:\d+(?:\.\d+)?(?:h|ms|us|µs|ns|m|s))+\b")  # 0.012s, 1h30m0s, 250ms
_NUMBER = re.compile(r"\b0x[0-9a-f]+\b|\b\d+(?:[.:]\d+)*\b", re.I)
_DANGLING = re.compile(r"\s+(?:by|for|in|of|to|at|from|with|on|as)(?=\s*(?:[,.;:]|$))")
_EMPTY = re.compile(r"(?:\s*:){2,}")
_SPACE = re.compile(r"\s+")
# A test runner's bullet before a failure ("● cart total › formats prices", "✕ renders the list")
_BULLET = re.compile(r"^[●•·▸►✕✖×]\s*")


def signature(line: str) -> str:
    """The error line's signature: its tool prefix, kind and message, with paths, numbers, quoted
    identifiers and locations stripped ("" when nothing is left)."""
    text = _BULLET.sub("", " ".join(line.split()))
    for _ in range(2):  # "/usr/bin/ld: build/parse.o:(.bss+0x0): ..." has two
        text = _LOCATION.sub("", text)
    text = _QUOTED.sub("", text)
    text = _BRACKET.sub("", text)
    text = _PAREN.sub("", text)
    text = _IN_PATH.sub("", text)
    text = _PATH.sub("", text)
    text = _FILE.sub("", text)
    text = _IDENT.sub("", text)
    text = _NUMBER.sub("", _DURATION.sub("", text))
    text = _EMPTY.sub(":", _SPACE.sub(" ", text))
    text = _SPACE.sub(" ", re.sub(r"\s+([,.;:])", r"\1", text))
    for _ in range(3):
        text = _DANGLING.sub("", text)
    text = re.sub(r"([,;:])(?=\s*(?:[.,;:]|$))", "", text)
    return text.strip(" ,;:-")


def signatures(lines: list[str]) -> list[str]:
    """The lines' signatures, each once, in order (empty ones and ones of only generic words, like jest's
    `FAIL <file>` -> "FAIL", dropped: every run of the tool shares them)."""
    return list(dict.fromkeys(s for s in map(signature, lines) if s and not _only_generic(s)))


def _only_generic(sig: str) -> bool:
    return set(re.findall(r"\w+", sig.lower())) <= _GENERIC


ERRORS_HEADING = "Errors met:"  # how a memory extracted from a session lists its error lines
TITLE_CHARS = 90
MAX_MESSAGES = 2
# A head: the tool ("nginx:", "make:", "collect2:") and the kind ("[emerg]", "***", "error[E0502]",
# "fatal error", "error") a tool prints before its message.
_HEAD = re.compile(
    r"^(?P<tool>[A-Za-z][\w.+-]*:\s)?"
    r"(?P<kind>\[\w+\]|\*\*\*|error\[(?P<code>[A-Z]+\d+)\]|fatal error|error|warning)?:?\s*"
)
# Words that say nothing about which error it is: a message of only these is no title.
_GENERIC = frozenset("error errors stop fail failed failure fatal exit status returned terminated".split())


def error_lines_of(content: str) -> list[str]:
    """The error lines a memory lists under ERRORS_HEADING (none when it has no such section)."""
    _, sep, rest = content.partition(ERRORS_HEADING)
    return [line.strip() for line in rest.splitlines() if line.strip()] if sep else []


def _split(sig: str) -> tuple[str, str, str]:
    """(head, the head with its code generalized, message) of a signature."""
    m = _HEAD.match(sig)
    tool = (m.group("tool") or "").strip().rstrip(":") if m else ""
    kind = (m.group("kind") or "") if m else ""
    head = " ".join(p for p in (tool, kind) if p)
    family = head.replace(m.group("code"), "…") if m and m.group("code") else head
    message = sig[m.end() :].strip(" :") if m else sig
    return head, family, message


def _generic(message: str) -> bool:
    words = re.findall(r"[a-z]+", message.lower())
    return all(w in _GENERIC for w in words)


def _shown(family: str, codes: dict[str, int] | None) -> str:
    """A head as a title shows it; a family of codes with its commonest two: "error[E0499, E0502…]"."""
    if not codes:
        return family
    top = [h.split("[")[-1].rstrip("]") for h, _ in sorted(codes.items(), key=lambda hn: (-hn[1], hn[0]))]
    return family.replace("…", ", ".join(top[:2]) + ("…" if len(top) > 2 else ""))


def title_of(members_errors: list[list[str]]) -> str | None:
    """A title naming the problem the members share, from their error lines' signatures: the heads
    (tool and kind) most of them met, then the commonest messages, e.g. "nginx [emerg]: unknown directive;
    host not found in upstream" or "make ***, collect2 error: undefined reference; missing separator".
    None when fewer than half of the members have an error line, or no head is met by half of them."""
    sigs = [signatures(lines) for lines in members_errors]
    with_errors = [s for s in sigs if s]
    if not with_errors or 2 * len(with_errors) < len(sigs):
        return None
    need = (len(with_errors) + 1) // 2
    family_df: dict[str, int] = {}
    codes: dict[str, dict[str, int]] = {}
    message_df: dict[tuple[str, str], int] = {}
    for member in with_errors:
        seen_families: set[str] = set()
        seen_messages: set[tuple[str, str]] = set()
        for sig in member:
            head, family, message = _split(sig)
            if family and family not in seen_families:
                seen_families.add(family)
                family_df[family] = family_df.get(family, 0) + 1
                if head != family:
                    codes.setdefault(family, {})
                    codes[family][head] = codes[family].get(head, 0) + 1
            if message and (family, message) not in seen_messages:
                seen_messages.add((family, message))
                message_df[(family, message)] = message_df.get((family, message), 0) + 1
    # ties by text: the same members give the same title whatever order they come in
    label = [f for f, n in sorted(family_df.items(), key=lambda fn: (-fn[1], fn[0])) if n >= need]
    # a bare kind ("error") next to a tool's or a code's ("error[E…]") repeats it
    repeats = {f for f in label if " " not in f and any(o != f and o.startswith(f) for o in label)}
    label = [f for f in label if f not in repeats]
    if not label:
        # no tool or kind in common ("Cannot find module 'msw' from 'src/x.ts'"): the messages most of them
        # met, as they are
        by_count = sorted(message_df.items(), key=lambda fm: (-fm[1], fm[0]))
        shared = [m for (f, m), n in by_count if n >= need and not f and not _generic(m)][:MAX_MESSAGES]
        return "; ".join(shared)[:TITLE_CHARS].strip(" ;") or None
    shown = [_shown(family, codes.get(family)) for family in label[:2]]
    messages: list[str] = []
    for (family, message), n in sorted(message_df.items(), key=lambda fm: (-fm[1], fm[0])):
        if (
            _generic(message)
            or family in repeats
            or (family in label and n == family_df[family] and family not in codes and len(label) > 1)
        ):
            continue  # the one message of a head in the label ("collect2 error: ld returned exit status")
        message = re.sub(r"[.\s]*\bStop\.?$", "", message).strip(" .")
        if message and message not in messages:
            messages.append(message)
        if len(messages) == MAX_MESSAGES:
            break
    title = ", ".join(shown)
    for i, message in enumerate(messages):
        piece = (": " if i == 0 else "; ") + message
        if len(title) + len(piece) > TITLE_CHARS and i > 0:
            break
        title += piece
    return title
