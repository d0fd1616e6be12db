"""Crystallization: synthesize a skill from a cluster's members, hold it to a quality bar, verify it.

Offline the synthesizer is deterministic: each distinct member resolution becomes a step that cites the
member (`[m:xxxxxxxx]`, the id's first 8 hex digits); contexts give "when to use"; the rest give edge
cases and fallbacks. The verifier is an LLM auditor when a chat model is configured -- a failed or
unparsable call is a failure -- and offline a grounding check that every step cites a member.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ultron.skills.format import SkillDoc

CITE = re.compile(r"\[m:([0-9a-f]{8})\]")
STEP = re.compile(r"^\s*\d+\.\s+(.*)$", re.MULTILINE)
MAX_STEPS = 8
MIN_STEPS = 3
MIN_BODY_CHARS = 300
FIELD_CHARS = 240


def cite(memory_id: Any) -> str:
    return f"[m:{str(memory_id).replace('-', '')[:8]}]"


def _clip(text: str, limit: int = FIELD_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _norm(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def synthesize(topic: str, members: list[dict[str, Any]]) -> SkillDoc:
    """The offline synthesizer: steps from resolutions, triggers from contexts, every line cited."""
    steps: list[tuple[str, list[Any]]] = []
    seen: dict[str, int] = {}
    for m in members:
        action = m["resolution"] or m["content"]
        key = _norm(action)
        if not key:
            continue
        if key in seen:
            steps[seen[key]][1].append(m["id"])
        elif len(steps) < MAX_STEPS:
            seen[key] = len(steps)
            steps.append((_clip(action), [m["id"]]))
    title = topic.strip() or "cluster skill"
    name = title.title()
    contexts = [(m["context"] or m["content"], m["id"]) for m in members if (m["context"] or m["content"])]
    when = [f"- {_clip(c, 160)} {cite(i)}" for c, i in contexts[:3]]
    problems = [(m["content"], m["id"]) for m in members if m["content"]]
    lines = [f"# {name}", "", "## When to use", "", f"Use this skill for problems about: {title}.", *when, ""]
    lines += ["## Steps", ""]
    lines += [f"{n}. {text} {' '.join(cite(i) for i in ids[:3])}" for n, (text, ids) in enumerate(steps, 1)]
    lines += ["", "## Edge cases and fallbacks", ""]
    for text, ids in steps[1:4]:
        lines.append(
            f"- If the previous step does not fix it, fall back to: {_clip(text, 160)} {cite(ids[0])}"
        )
    for content, memory_id in problems[:3]:
        lines.append(f"- Symptom seen: {_clip(content, 160)} {cite(memory_id)}")
    description = f"How to handle {title}: {len(steps)} steps distilled from {len(members)} memories."
    metadata = {"topic": title, "memories": [str(m["id"]) for m in members]}
    return SkillDoc(name=name, description=description, body="\n".join(lines), metadata=metadata)


def steps_of(body: str) -> list[str]:
    return STEP.findall(body)


def quality_problems(doc: SkillDoc) -> list[str]:
    """The structural bar: trigger and edge-case sections, at least 3 steps, enough substance."""
    problems = []
    low = doc.body.lower()
    if "## when to use" not in low:
        problems.append("no 'When to use' section")
    if "## edge cases" not in low:
        problems.append("no 'Edge cases and fallbacks' section")
    if len(steps_of(doc.body)) < MIN_STEPS:
        problems.append(f"fewer than {MIN_STEPS} steps")
    if len(doc.body) < MIN_BODY_CHARS:
        problems.append(f"body shorter than {MIN_BODY_CHARS} characters")
    return problems


@dataclass
class Verdict:
    passed: bool
    score: float
    detail: str = ""
    scores: dict[str, float] = field(default_factory=dict)


def grounding(doc: SkillDoc, members: list[dict[str, Any]]) -> Verdict:
    """Offline check: every step cites at least one member, and every citation is a member."""
    known = {str(m["id"]).replace("-", "")[:8] for m in members}
    steps = steps_of(doc.body)
    cited = [set(CITE.findall(s)) for s in steps]
    uncited = [n for n, c in enumerate(cited, 1) if not c]
    strangers = sorted(set().union(*cited, set(CITE.findall(doc.body))) - known) if cited else []
    used = set().union(*cited) & known if cited else set()
    coverage = len(used) / max(1, len(known))
    # Structure score: how much of the evidence the steps use, and how complete the workflow is.
    score = round(0.5 * coverage + 0.5 * min(1.0, len(steps) / 5), 4)
    if not steps or uncited or strangers:
        detail = (
            f"uncited steps {uncited}" if uncited else f"unknown citations {strangers}" if strangers else ""
        )
        return Verdict(False, score, detail or "no steps", {"coverage": coverage})
    return Verdict(True, score, "", {"coverage": coverage})


VERIFY_SYSTEM = (
    "You are an independent auditor. Given a skill and the evidence memories it was built from, judge "
    'whether every step is supported by the evidence. Answer only JSON: {"grounded_in_evidence": 0-1, '
    '"contradicted": true|false, "workflow_clarity": 0-1, "specificity_and_reusability": 0-1}.'
)


def llm_verifier(
    ask: Callable[[str, str, str, int], Any],
) -> Callable[[SkillDoc, list[dict[str, Any]]], Verdict]:
    """A verifier on a chat model (`ask(task, system, user, max_tokens)` -> parsed JSON or None)."""

    def verify(doc: SkillDoc, members: list[dict[str, Any]]) -> Verdict:
        offline = grounding(doc, members)
        if not offline.passed:
            return offline
        evidence = "\n".join(
            f"{cite(m['id'])} {_clip(m['content'], 200)} | {_clip(m['context'], 150)} | "
            f"{_clip(m['resolution'], 200)}"
            for m in members
        )
        answer = ask("verify_skill", VERIFY_SYSTEM, f"SKILL:\n{doc.body}\n\nEVIDENCE:\n{evidence}", 400)
        if not isinstance(answer, dict):
            return Verdict(False, 0.0, "verifier call failed or was not JSON")
        try:
            grounded = float(answer["grounded_in_evidence"])
            clarity = float(answer.get("workflow_clarity", 0))
            specific = float(answer.get("specificity_and_reusability", 0))
        except (KeyError, TypeError, ValueError):
            return Verdict(False, 0.0, "verifier answer lacks scores")
        contradicted = answer.get("contradicted") is True
        score = round(0.5 * clarity + 0.5 * specific, 4)
        scores = {"grounded": grounded, "clarity": clarity, "specificity": specific}
        if grounded < 0.8 or contradicted:
            return Verdict(False, score, f"grounded {grounded:.2f}, contradicted {contradicted}", scores)
        return Verdict(True, score, "", scores)

    return verify
