"""Reusable experiences {content, context, resolution, confidence, tags} from a good segment.

With an LLM the segment's transcript goes through MemoryIntelligence.extract. Offline, one experience per
segment, built from what the session shows (ultron/trajectory/evidence.py):

- content: the task's own statement (the harness's repeated lines stripped) and the error lines met;
- context: the signatures of the errors met (ultron/clusters/signature.py: "nginx: [emerg] unknown
  directive"), the problem's class, else the task's first line;
- resolution: the fix -- the diff hunks or edit commands since the last failed check -- and that command.

Each field keeps its most telling part within budget: the errors and the fix are never cut to make room for
the task's text, and the task is cut at its end, never at its front. A segment whose last check failed
gives no experience: unresolved work is never stored as a fix that worked.
"""

from __future__ import annotations

from typing import Any

from ultron.clusters.signature import ERRORS_HEADING, signatures
from ultron.providers.tokens import count_tokens, truncate_to_tokens
from ultron.trajectory.evidence import error_lines, fix_of, strip_boilerplate, verification
from ultron.trajectory.messages import Message, own_words
from ultron.trajectory.metrics import transcript

FIELD_TOKENS = 600
# The task keeps at least this much of the content's budget however many errors were met.
MIN_TASK_TOKENS = 120
VERIFIED = "Verified with:"


def _first_user(messages: list[Message], boilerplate: frozenset[str]) -> str:
    for m in messages:
        if m.role == "user" and (said := own_words(m.content)):
            return strip_boilerplate(said, boilerplate) or said
    return ""


def _closing_answer(messages: list[Message]) -> str:
    return next(
        (m.content.strip() for m in reversed(messages) if m.role == "assistant" and m.content.strip()), ""
    )


def _fit(parts: list[str], budget: int) -> str:
    """The parts in order while they fit; the first part is always kept (cut at its end if need be)."""
    out: list[str] = []
    used = 0
    for part in parts:
        cost = count_tokens(part) + 1
        if out and used + cost > budget:
            break
        out.append(part if out else truncate_to_tokens(part, budget))
        used += cost
    return "\n".join(out)


def heuristic_experience(
    messages: list[Message], topic: str, confidence: float, boilerplate: frozenset[str] = frozenset()
) -> list[dict[str, Any]]:
    check = verification(messages)
    if check is not None and not check.passed:
        return []
    goal = _first_user(messages, boilerplate)
    answer = _closing_answer(messages)
    fix = fix_of(messages)
    if not goal or not (answer or fix.edits):
        return []
    errors = error_lines(messages)
    error_part = f"{ERRORS_HEADING}\n" + "\n".join(errors) if errors else ""
    error_part = truncate_to_tokens(error_part, FIELD_TOKENS - MIN_TASK_TOKENS)
    task_budget = FIELD_TOKENS - (count_tokens(error_part) + 1 if error_part else 0)
    content = "\n".join(p for p in (truncate_to_tokens(goal, task_budget), error_part) if p)
    verified = f"{VERIFIED} `{fix.verified_by}`" if fix.verified_by else ""
    if fix.edits:
        # the verifying command is one short line that must survive: the edits share what is left
        edits = _fit(fix.edits, FIELD_TOKENS - (count_tokens(verified) + 1 if verified else 0))
        resolution = "\n".join(p for p in (edits, verified) if p)
    else:
        resolution = _fit([p for p in (answer, verified) if p], FIELD_TOKENS)
    first_line = goal.strip().splitlines()[0] if goal.strip() else topic
    # The outcome stays in the segment's metrics: a line every memory shares pulls problems together. The
    # errors' signatures, the problem without one run's paths and names, pull the runs of one kind of error
    # together: with the task's line as context the nginx runs of tests/data/skill_sessions split into
    # three clusters, none big enough for a skill (docs/skills.md).
    shared = signatures(errors)
    context = "; ".join(shared)[:400] if shared else f"Task: {' '.join(first_line.split())[:200]}"
    return [
        {
            "content": content,
            "context": context,
            "resolution": resolution,
            "confidence": round(confidence, 4),
            # tool names are in every session of a harness: as tags they named clusters ("Bash ...")
            "tags": ["trajectory"],
        }
    ]


def extract_experiences(
    messages: list[Message],
    topic: str,
    score: float,
    intelligence: Any,
    budget: int,
    boilerplate: frozenset[str] = frozenset(),
) -> list[dict[str, Any]]:
    if intelligence is not None and getattr(intelligence, "llm_available", False):
        items = intelligence.extract(f"Task: {topic}\n\n" + transcript(messages, budget))
        for item in items:
            item["tags"] = list(dict.fromkeys(["trajectory", *item.get("tags", [])]))
        return items
    return heuristic_experience(messages, topic, score, boilerplate)
