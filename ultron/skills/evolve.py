"""Crystallization: synthesize a skill from a cluster's members, hold it to a quality bar, verify it.

Offline the synthesizer is deterministic and says what it is: a list of the symptoms agents met and the
fix that worked for each -- alternatives, not a sequence of steps -- each entry citing its members
(`[m:xxxxxxxx]`, the id's first 8 hex digits), with the members' contexts as "when to use", and a line
saying it was distilled without a language model. A resolution that a merge extended with
"Alternative: ..." lines gives one entry per alternative. The verifier is an LLM auditor when a chat
model is configured -- a failed or unparsable call is a failure -- and offline a grounding check that
every step or entry cites a member.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ultron.clusters.service import word_variants
from ultron.skills.entries import compact_fix, is_concrete, shared_problem, symptom_of
from ultron.skills.format import SkillDoc

CITE = re.compile(r"\[m:([0-9a-f]{8})\]")
STEP = re.compile(r"^\s*\d+\.\s+(.*)$", re.MULTILINE)
MIN_STEPS = 3
MIN_BODY_CHARS = 300
FIELD_CHARS = 240
FIX_CHARS = 360  # a compact diff and the command that verified it
# The offline format.
OFFLINE_NOTE = "Distilled without a language model"
FIXES_HEADING = "## Symptoms and fixes"
SYMPTOM, FIX, SEEN = "**Symptom:**", "**Fix that worked:**", "**Seen:**"
MAX_FIXES = 12
MIN_FIXES = 1
CITES_PER_ENTRY = 3
_ALTERNATIVE = re.compile(r"(?:^|\n)\s*Alternative:\s*", re.IGNORECASE)
_NAME_SPLIT = re.compile(r"[\s,;:/|]+")
_NAME_DROP = frozenset(
    "a an the and or but if of to in on at by for with from as is are was were be it its this that after "
    "before because when while then than into via how why what not no".split()
)


def cite(memory_id: Any) -> str:
    return f"[m:{str(memory_id).replace('-', '')[:8]}]"


def _clip(text: str, limit: int = FIELD_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _norm(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def skill_name(topic: str) -> str:
    """A readable title from a topic: each word once (case-insensitive, compounds by their parts), no stop
    word, title case. A topic that names an error ("nginx [emerg]: unknown directive", a colon after its
    head; "Cannot find module; Test suite failed to run", messages a semicolon apart) is already a title:
    kept as it is, its case and words included."""
    if ":" in topic or ";" in topic:
        return " ".join(topic.split())
    words: list[str] = []
    seen: set[str] = set()
    for word in _NAME_SPLIT.split(topic.strip()):
        key = word.lower().strip(".-'\"")
        parts = word_variants(key) if key else set()
        if not key or parts & seen or key in _NAME_DROP:
            continue  # "build-cache" after "build" repeats it
        seen |= parts
        words.append(word if any(c.isupper() for c in word[1:]) else word[:1].upper() + word[1:])
    return " ".join(words) or "Cluster Skill"


def _fixes_of_member(member: dict[str, Any]) -> list[str]:
    """The member's fix, and each "Alternative:" a merge appended to it, as separate fixes."""
    parts = _ALTERNATIVE.split(str(member.get("resolution") or ""))
    return [compact_fix(p) for p in parts if p.strip()]


def synthesize(topic: str, members: list[dict[str, Any]]) -> SkillDoc:
    """The offline synthesizer: symptoms and the fix that worked for each, every entry cited."""
    entries: list[tuple[str, str, list[Any]]] = []  # (symptom, fix or "", member ids)
    index: dict[str, int] = {}
    for m in members:
        symptom = symptom_of(str(m.get("content") or ""))
        for fix in _fixes_of_member(m) or [""]:
            key = _norm(fix or symptom)
            if not key:
                continue
            if key in index:  # the texts that sort first: the same whatever order members come in
                old_symptom, old_fix, ids = entries[index[key]]
                entries[index[key]] = (min(old_symptom, symptom), min(old_fix, fix), [*ids, m["id"]])
            else:
                index[key] = len(entries)
                entries.append((symptom, fix, [m["id"]]))
    # The fixes most members report first; ties by their text, so the same members give the same skill
    # whatever order they arrived in (the sample's order, by closeness to a mean the arrival order rounds
    # differently, swapped near-equal entries between two runs of tests/skills/test_skills_from_sessions.py).
    order = sorted(range(len(entries)), key=lambda i: (-len(entries[i][2]), entries[i][0], entries[i][1]))[
        :MAX_FIXES
    ]
    title = topic.strip() or "cluster skill"
    name = skill_name(title)
    lines = [
        f"# {name}",
        "",
        f'{OFFLINE_NOTE} from {len(members)} memories that agents shared about "{title}": each entry is '
        "a symptom one of them met and the fix that worked for it. The fixes are alternatives, not a "
        "sequence: use the one whose symptom matches yours.",
        "",
        "## When to use",
        "",
    ]
    # The three contexts most members share (ties by text, for the same reason), each citing its first.
    contexts: dict[str, list[Any]] = {}
    for m in members:
        context = str(m.get("context") or "").strip()
        if context:
            contexts.setdefault(_norm(context), [context, m["id"], 0])[2] += 1
    shown = sorted(contexts.values(), key=lambda c: (-c[2], c[0]))[:3]
    lines += [f"- {_clip(c, 160)} {cite(i)}" for c, i, _ in shown]
    if not contexts:
        lines.append(f"- A problem about {title}, like one of the symptoms below.")
    lines += ["", FIXES_HEADING, ""]
    for i in order:
        symptom, fix, ids = entries[i]
        cites = " ".join(cite(x) for x in ids[:CITES_PER_ENTRY])
        more = f" (reported by {len(ids)} memories)" if len(ids) > 1 else ""
        if fix:
            lines.append(f"- {SYMPTOM} {_clip(symptom, 200)} {FIX} {_clip(fix, FIX_CHARS)}{more} {cites}")
        else:
            lines.append(f"- {SEEN} {_clip(symptom)}{more} {cites}")
    description = (
        f"{name}: {len(order)} symptoms and the fix that worked for each, from {len(members)} agent "
        f"memories ({OFFLINE_NOTE.lower()})."
    )
    metadata = {"topic": title, "memories": [str(m["id"]) for m in members], "synthesis": "offline"}
    return SkillDoc(name=name, description=description, body="\n".join(lines), metadata=metadata)


def steps_of(body: str) -> list[str]:
    return STEP.findall(body)


def entries_of(body: str) -> list[str]:
    """The entries of an offline skill's "Symptoms and fixes" section."""
    start = body.find(FIXES_HEADING)
    if start < 0:
        return []
    section = body[start + len(FIXES_HEADING) :]
    end = section.find("\n## ")
    section = section if end < 0 else section[:end]
    return [line[2:] for line in section.splitlines() if line.startswith("- ")]


def items_of(body: str) -> list[str]:
    """What must each cite a member: the numbered steps, or an offline skill's entries."""
    return entries_of(body) or steps_of(body)


def is_offline(body: str) -> bool:
    return OFFLINE_NOTE in body and FIXES_HEADING in body


def fixes_of(body: str) -> set[str]:
    """The distinct fixes an offline skill presents (normalized, without citations): what an offline
    revision must add to be published."""
    out = set()
    for entry in entries_of(body):
        text = CITE.sub("", entry)
        text = re.sub(r"\(reported by \d+ memories\)", "", text)
        for marker in (FIX, SEEN):
            if marker in text:
                out.add(_norm(text.split(marker, 1)[1]))
                break
    return out - {""}


def _fix_text(entry: str) -> str:
    text = CITE.sub("", entry.split(FIX, 1)[1])
    return re.sub(r"\(reported by \d+ memories\)", "", text).strip()


def quality_problems(doc: SkillDoc) -> list[str]:
    """The structural bar: a trigger section and either a workflow (at least 3 steps and an edge-case
    section) or the offline list of symptoms and fixes; enough substance."""
    problems = []
    low = doc.body.lower()
    if "## when to use" not in low:
        problems.append("no 'When to use' section")
    if FIXES_HEADING.lower() in low:
        entries = entries_of(doc.body)
        if len(entries) < MIN_FIXES:
            problems.append("no symptom with its fix")
        vague = [n for n, e in enumerate(entries, 1) if FIX in e and not is_concrete(_fix_text(e))]
        if vague:
            problems.append(f"entries {vague} have no concrete fix (a diff, a command, a file or a setting)")
    else:
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
    """Offline check: every step (or entry) cites at least one member, and every citation is a member."""
    known = {str(m["id"]).replace("-", "")[:8] for m in members}
    steps = items_of(doc.body)
    cited = [set(CITE.findall(s)) for s in steps]
    uncited = [n for n, c in enumerate(cited, 1) if not c]
    strangers = sorted(set().union(*cited, set(CITE.findall(doc.body))) - known) if cited else []
    used = set().union(*cited) & known if cited else set()
    coverage = len(used) / max(1, len(known))
    # Structure score: how much of the evidence the steps use, and how complete the workflow is.
    score = round(0.5 * coverage + 0.5 * min(1.0, len(steps) / 5), 4)
    if not shared_problem(members):
        return Verdict(False, score, "its memories share no problem", {"coverage": coverage})
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
