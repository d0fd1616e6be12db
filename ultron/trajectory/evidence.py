"""What a session shows happened, read from its tool calls and results rather than from what the agent says.

- `error_lines`: the whole lines of the errors the agent met (tool results that failed or have an error
  shape: `nginx: [emerg]`, `make: *** ... Error 2`, `error[E0502]`, `FAILED`, a traceback's last line).
- `verification`: the outcome of the last test/build/check command: its exit code and output decide,
  and so does a tool error after the last edit.
- `fix_of`: the fix, as the edits (diff hunks, edit commands) made since the last failed check, and the
  command that verified it.
- boilerplate: lines a harness repeats in every session (system prompts, tool instructions, templates),
  learned per agent and format from the sessions themselves, so the task's own statement stands alone.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ultron.trajectory.messages import Message

MAX_ERRORS = 4
ERROR_LINE_CHARS = 300
# A line seen in at least this many sessions of one agent and format is the harness's, not the task's.
BOILERPLATE_SESSIONS = 3
BOILERPLATE_SAMPLE = 60  # sessions read to learn it
MAX_EDITS = 4
EDIT_CHARS = 600

# Error lines by the shapes tools print them; the first group are the specific ones, kept first.
_SPECIFIC = re.compile(
    r"^.*(?:\[emerg\]|\[crit\]|\*\*\* .*(?:Error \d+|Stop\.)|error\[E\d+\]|^FAILED\b|^E\s{2,}\S"
    r"|^FAIL[ \t]+\S|^[ \t]*● \S"  # jest / vitest: the failing file, the failing test's title
    r"|^--- FAIL: \S|^[ \t]+\w+_test\.go:\d+: \S|\berror TS\d+:"  # go test; tsc
    r"|undefined reference|\b[A-Z]\w*(?:Error|Exception)\b:|\bfatal error\b|\berror:|\bpanicked at\b"
    r"|command not found|Cannot find module|No such file or directory|Permission denied"
    r"|assert(?:ion)? ?(?:error|failed)).*$",
    re.MULTILINE,
)
_GENERIC = re.compile(r"^.*\b(?:error|failed|fatal)\b.*$", re.MULTILINE | re.IGNORECASE)
_NOT_ERROR = re.compile(r"\b0 (?:failed|errors?)\b|\bno errors?\b|syntax is ok|test is successful", re.I)

# Commands that check the work: a test run, a build, a config test.
_CHECK = re.compile(
    r"(?:^|[;&|(]\s*|\s)(?:python3? -m pytest|pytest|tox|nox|make\b|cmake --build|ctest"
    r"|cargo (?:build|test|check|run|clippy)|go (?:build|test|vet)|npm (?:test|run \w+)|yarn (?:test|build)"
    r"|pnpm (?:test|build)|mvn|gradle|nginx -t|nginx -T|apachectl configtest|terraform (?:validate|plan)"
    r"|docker build|gcc|cc |clang|tsc|mypy|ruff|python3? [\w/.-]+\.py|node [\w/.-]+\.js|curl )",
)
# Shell commands that change files.
_EDIT_COMMAND = re.compile(
    r"\bsed -i|\bperl -p?i|\bcat\s*>|\bcat <<|>\s*[\w./-]+\s*<<|\btee\b|\bpatch\b|\bgit apply\b"
    r"|\becho .*>\s*\S|\bprintf .*>\s*\S|\bapply_patch\b"
    # what a project or machine is given to make it work: a package, a dependency
    r"|\b(?:pip3?|uv pip|uv|poetry|pnpm|yarn|npm|cargo|go|gem|bundle|composer|apt-get|apt|brew|dnf|yum|apk"
    r"|conda) (?:-\S+ )*(?:install|add|get|i)\b"
)
_CD = re.compile(r"^cd\s+(?:\"[^\"]*\"|'[^']*'|\S+)\s*&&\s*(?=\S)")
_SHELL = re.compile(r"(?:/usr)?(?:/bin/)?(?:ba|z|da|k)?sh")
_SHELL_FLAGS = ("-c", "-lc", "-ic", "-cl", "-ilc")
_EXIT = re.compile(
    r"(?:exit(?:ed)?(?: with)?(?: code| status)?|return ?code|exit_?code)\"?[ \t]*[:=]?[ \t]*(\d+)", re.I
)


@dataclass
class Check:
    """The last check command and what it showed."""

    command: str
    passed: bool
    detail: str


@dataclass
class Fix:
    edits: list[str] = field(default_factory=list)
    verified_by: str = ""


def _args(call: dict[str, Any]) -> dict[str, Any]:
    raw = call.get("arguments")
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError:
            return {"command": raw}
        return value if isinstance(value, dict) else {"command": str(value)}
    return {}


def command_of(call: dict[str, Any]) -> str:
    args = _args(call)
    value = args.get("command") or args.get("cmd") or args.get("script") or ""
    if isinstance(value, list):
        # Codex CLI sends ["bash", "-lc", "<command>"]: the command is the script, not the shell
        if len(value) == 3 and _SHELL.fullmatch(str(value[0])) and str(value[1]) in _SHELL_FLAGS:
            value = [value[2]]
        value = " ".join(str(v) for v in value)
    if not value and isinstance(args.get("args"), str):  # a tool named after its program: pytest(args=...)
        value = f"{call.get('name') or ''} {args['args']}"
    # "cd /workspace/repo && pytest -q": the directory is one run's, the command is what was run
    return _CD.sub("", str(value).strip())


def edit_of(call: dict[str, Any]) -> str:
    """The change a tool call makes to a file, as a diff hunk or the edit command; "" when it makes none."""
    args = _args(call)
    path = str(args.get("path") or args.get("file_path") or args.get("file") or "")
    old = args.get("old_str", args.get("old_string"))
    new = args.get("new_str", args.get("new_string"))
    if isinstance(new, str) and (isinstance(old, str) or old is None):
        # a hunk headed by the file's last two parts: the `--- a/` `+++ b/` pair every hunk shares made
        # memories of different problems look alike to the embedder
        short = "/".join([p for p in path.split("/") if p][-2:])
        lines = [f"@@ {short} @@"]
        lines += [f"-{x}" for x in (old or "").splitlines()] + [f"+{x}" for x in new.splitlines()]
        return "\n".join(lines)
    for key in ("patch", "diff", "input"):
        value = args.get(key)
        if isinstance(value, str) and ("@@" in value or "*** Begin Patch" in value):
            return value.strip()
    command = command_of(call)
    if command and _EDIT_COMMAND.search(command) and not _CHECK.search(command.split("&&")[0]):
        # "apt-get install -y libssl-dev && cargo test": the change, without the check run after it (that
        # one is the resolution's "Verified with:")
        steps = command.split("&&")
        end = next((i for i, step in enumerate(steps) if _CHECK.search(step)), len(steps))
        return "&&".join(steps[:end]).strip()
    content = args.get("content") or args.get("file_text")
    if path and isinstance(content, str):
        return f"write {path}:\n{content.strip()}"
    return ""


def _results(messages: list[Message]) -> dict[str, Message]:
    return {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}


def _calls(messages: list[Message]) -> list[tuple[int, dict[str, Any]]]:
    return [(i, c) for i, m in enumerate(messages) for c in m.tool_calls or [] if m.role == "assistant"]


def failed(result: Message) -> bool:
    """A tool result that shows a failure: flagged, a non-zero exit, or an error shape."""
    if result.is_error is not None:
        return result.is_error
    text = result.content[:8000]
    code = _EXIT.search(text)
    if code is not None:
        return code.group(1) != "0"
    if _NOT_ERROR.search(text) and not _SPECIFIC.search(text):
        return False
    return bool(_SPECIFIC.search(text))


def verification(messages: list[Message]) -> Check | None:
    """The last check command's outcome; a failed tool call after the last edit also fails the work."""
    results = _results(messages)
    last_check: Check | None = None
    last_edit = checked_at = -1
    for i, call in _calls(messages):
        result = results.get(str(call.get("id") or ""))
        if edit_of(call):
            last_edit = i
        command = command_of(call)
        if result is not None and command and _CHECK.search(command):
            ok = not failed(result)
            last_check = Check(command, ok, f"`{_short(command)}` {'passed' if ok else 'failed'}")
            checked_at = i
    if last_check is None:
        return None
    for i, call in _calls(messages):
        result = results.get(str(call.get("id") or ""))
        # an error the passing check came after is one it overcame
        if i > max(last_edit, checked_at) and result is not None and failed(result) and last_check.passed:
            line = (error_lines([result]) or ["a tool error"])[0]
            return Check(last_check.command, False, f"tool error after the last edit: {line}")
    return last_check


def fix_of(messages: list[Message]) -> Fix:
    """The edits since the last failed check (the ones that made it pass) and the passing check."""
    results = _results(messages)
    calls = _calls(messages)
    start = 0
    verified = ""
    for n, (_, call) in enumerate(calls):
        result = results.get(str(call.get("id") or ""))
        command = command_of(call)
        if result is not None and command and _CHECK.search(command):
            if failed(result):
                start, verified = n + 1, ""
            else:
                verified = command
    edits = [e for _, call in calls[start:] if (e := edit_of(call))] or [
        e for _, call in calls if (e := edit_of(call))
    ]
    return Fix(list(dict.fromkeys(edits))[-MAX_EDITS:], verified)


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _runner_line(line: str) -> int:
    return 2 if line.startswith("FAIL") else 1 if line.lstrip().startswith(("●", "--- FAIL")) else 0


def _error_lines_of(text: str) -> list[str]:
    # the errors first, then a test runner's failing test ("● Test suite failed to run") and file ("FAIL
    # <file>"): they say which and where, the error says what
    lines = sorted((m.group(0) for m in _SPECIFIC.finditer(text)), key=_runner_line)
    if not lines:
        lines = [m.group(0) for m in _GENERIC.finditer(text) if not _NOT_ERROR.search(m.group(0))]
    if not lines:  # the last line that is not the harness's exit report
        lines = [x for x in text.strip().splitlines() if x.strip() and not _EXIT.search(x)][-1:]
    return [
        _short(x, ERROR_LINE_CHARS) for x in lines if x.strip() and not x.lstrip().startswith("Traceback")
    ]


def error_lines(messages: Iterable[Message]) -> list[str]:
    """Whole error lines from the tool results that failed, each once, the first MAX_ERRORS."""
    found: list[str] = []
    for m in messages:
        if m.role == "tool" and failed(m):
            found.extend(_error_lines_of(m.content))
    return list(dict.fromkeys(found))[:MAX_ERRORS]


def _line_key(line: str) -> str:
    return " ".join(line.lower().split())


def boilerplate(samples: Iterable[str], min_sessions: int = BOILERPLATE_SESSIONS) -> frozenset[str]:
    """Lines seen in at least `min_sessions` of the samples (one text per session)."""
    counts: Counter[str] = Counter()
    for text in samples:
        counts.update({k for line in text.splitlines() if (k := _line_key(line))})
    return frozenset(k for k, n in counts.items() if n >= min_sessions)


def strip_boilerplate(text: str, lines: frozenset[str]) -> str:
    """`text` without the harness's lines; blank runs collapsed."""
    kept = [line for line in text.splitlines() if _line_key(line) not in lines]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
