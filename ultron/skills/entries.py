"""What an offline skill entry is made of, and what makes one worth keeping.

A trajectory memory (ultron/trajectory/extraction.py) holds the task, then "Errors met:" and the error
lines; its resolution is the fix as diff hunks or edit commands, then "Verified with: `command`". An
entry's symptom is its first error line and its fix the compact diff and the verifying command; other
memories give their content and resolution as they are.

The offline verifier holds entries to two rules: a fix that worked is concrete (a diff, a command, a
file, a setting -- not "fixed it"), and a skill's members share a problem (some word in at least half of
them), so a cluster joined by what every session of a harness says is rejected.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from ultron.clusters.service import stem
from ultron.clusters.signature import ERRORS_HEADING
from ultron.providers.hashing import STOPWORDS

VERIFIED = "Verified with:"
SHARED_SHARE = 0.5
_CODE = re.compile(
    r"`[^`]+`|^[+-](?![+-])|@@|(?:^|\s)--?[a-z][\w-]*|[\w.-]+/[\w./-]+|\b[\w-]+\.(?:[a-z]{1,5})\b|\w=|=\s*\S"
    r"|^\s*(?:sudo |pip|npm|yarn|docker|git|make|cargo|go|kubectl|helm|sed|apt|brew|psql|alembic|python|"
    r"export|set|add|copy|run)\b",
    re.IGNORECASE | re.MULTILINE,
)
# Names a fix acts on: an instruction or variable (ARG, BUILD_DATE), an identifier (lock_timeout), a call.
_NAMED = re.compile(r"\b[A-Z][A-Z0-9_]{2,}\b|\b[a-z]+_[a-z0-9_]+\b|\w\(\)")
_HUNK_FILE = re.compile(r"^@@ (\S+) @@$")
_HUNK = re.compile(r"^@@", re.MULTILINE)
_WORDS = re.compile(r"[a-z][a-z0-9_]{2,}")


def symptom_of(content: str) -> str:
    """The first error line of a trajectory memory, else the content."""
    head, sep, errors = content.partition(ERRORS_HEADING)
    if sep:
        first = next((line.strip() for line in errors.splitlines() if line.strip()), "")
        if first:
            return first
    return content.strip() or head.strip()


def _short_path(path: str) -> str:
    parts = [p for p in path.split("/") if p]
    return "/".join(parts[-2:])


def compact_fix(resolution: str) -> str:
    """A diff as "in `file`: `- old` -> `+ new`" lines and the verifying command; anything else unchanged."""
    if not _HUNK.search(resolution):
        return resolution.strip()
    out: list[str] = []
    for line in resolution.splitlines():
        header = _HUNK_FILE.match(line)
        if line.startswith("+++ ") or header:
            path = header.group(1) if header else line[4:].removeprefix("b/")
            out.append(f"in `{_short_path(path)}`:")
        elif line.startswith(("--- ", "@@")):
            continue
        elif line.startswith(("-", "+")) and line[1:].strip():
            out.append(f"`{line[0]} {line[1:].strip()}`")
        elif line.startswith(VERIFIED):
            out.append(line.replace(VERIFIED, "(verified with:") + ")")
        elif line.strip():
            out.append(line.strip())
    return " ".join(out)


def is_concrete(fix: str) -> bool:
    """A diff, a command, a file or a setting: something another agent can apply."""
    return bool(_CODE.search(fix) or _NAMED.search(fix))


def shared_problem(members: list[dict[str, Any]]) -> bool:
    """Some content word is in at least half of the members' problem texts (content and context)."""
    if len(members) < 2:
        return True
    df: Counter[str] = Counter()
    for m in members:
        text = f"{m.get('content') or ''} {m.get('context') or ''}".lower()
        df.update({stem(w) for w in _WORDS.findall(text) if w not in STOPWORDS})
    need = SHARED_SHARE * len(members)
    return any(n >= need for n in df.values())
