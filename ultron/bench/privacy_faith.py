"""Faithfulness of shared-scope redaction on text nobody tuned it on (issue 31): technical snippets that must
come out unchanged apart from their real secrets, and sentences whose people must not survive.

    python -m ultron.bench.privacy_eval            # runs this after the labelled corpus, when present

Both corpora (tests/data/faith_technical.jsonl, tests/data/faith_names.jsonl, made by
tests/data/make_faith_corpus.py) carry a `split`: "dev" (what the rules were tuned on) or "heldout" (never
looked at while tuning). Every figure is reported per split; the targets apply to each.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ultron.privacy.entities import placeholder
from ultron.privacy.policy import RedactionPolicy
from ultron.privacy.redactor import Redactor

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"
TECHNICAL_CORPUS = DATA / "faith_technical.jsonl"
NAMES_CORPUS = DATA / "faith_names.jsonl"
NAME_RECALL_TARGET = 0.95
FAITHFUL_TARGET = 0.99
# What the issue found rewritten; each must come out as it went in wherever the corpus holds it.
FOUND_WORDS = (
    "Filter:",
    "PyYAML",
    "Mon-Thu",
    "Lesson:",
    "Principal '*'",
    "Format your responses",
    "## Important Boundaries",
    "Altria",
    "Yukos Oil",
    "管弦乐",
    "贝尔高姆",
    "8.8.8.8",
)
SHARED = RedactionPolicy().for_scope("shared")


@dataclass
class Tally:
    total: int = 0
    good: int = 0

    @property
    def share(self) -> float:
        return self.good / self.total if self.total else 1.0

    def add(self, ok: bool) -> None:
        self.total += 1
        self.good += ok


@dataclass
class FaithReport:
    # (split, group) -> tally; group is "all", "lang:<l>" or "kind:<k>"
    faithful: dict[tuple[str, str], Tally] = field(default_factory=lambda: defaultdict(Tally))
    secrets: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    recall: dict[tuple[str, str], Tally] = field(default_factory=lambda: defaultdict(Tally))
    # precision of PERSON findings in the name sentences: right / predicted
    precision: dict[tuple[str, str], Tally] = field(default_factory=lambda: defaultdict(Tally))
    found_words: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    changed: list[tuple[str, str, str]] = field(default_factory=list)  # (id, type, value) on dev only
    missed: list[tuple[str, str]] = field(default_factory=list)  # (id, value) on dev only

    def failures(self) -> list[str]:
        out = []
        for (split, group), t in sorted(self.faithful.items()):
            if group == "all" and t.share < FAITHFUL_TARGET:
                out.append(f"technical snippets unchanged ({split}) {t.share:.3f} < {FAITHFUL_TARGET}")
        for (split, group), t in sorted(self.recall.items()):
            if group == "all" and t.share < NAME_RECALL_TARGET:
                out.append(f"person recall on name sentences ({split}) {t.share:.3f} < {NAME_RECALL_TARGET}")
        for split, t in sorted(self.secrets.items()):
            if t.share < 1.0:
                out.append(f"secrets in technical snippets ({split}) recall {t.share:.3f} < 1.0")
        for word, t in sorted(self.found_words.items()):
            if t.good < t.total:
                out.append(f"found word {word!r} rewritten in {t.total - t.good} of {t.total} snippets")
        return out


def _overlaps(start: int, end: int, spans: list[tuple[int, int]]) -> bool:
    return any(start < e and s < end for s, e in spans)


def _spans(text: str, value: str) -> list[tuple[int, int]]:
    out, i = [], text.find(value)
    while i != -1:
        out.append((i, i + len(value)))
        i = text.find(value, i + 1)
    return out


def score_technical(report: FaithReport, redactor: Redactor, snippet: dict[str, Any]) -> None:
    text, split = snippet["text"], snippet["split"]
    planted = [(e["type"], s) for e in snippet["entities"] for s in _spans(text, e["value"])]
    findings = redactor.detect(text, SHARED)
    stray = [
        f
        for f in findings
        if not any(t == f.entity_type and f.start < e and s < f.end for t, (s, e) in planted)
    ]
    ok = not stray
    for group in ("all", f"lang:{snippet['lang']}", f"kind:{snippet['kind']}"):
        report.faithful[(split, group)].add(ok)
    if split == "dev":
        report.changed += [(snippet["id"], f.entity_type, text[f.start : f.end]) for f in stray]
    output = redactor.redact(text, SHARED).text
    for e in snippet["entities"]:
        report.secrets[split].add(e["value"] not in output and placeholder(e["type"]) in output)
    for word in FOUND_WORDS:
        spans = _spans(text, word)
        if spans:
            report.found_words[word].add(not any(_overlaps(f.start, f.end, spans) for f in findings))


def score_names(report: FaithReport, redactor: Redactor, snippet: dict[str, Any]) -> None:
    text, split = snippet["text"], snippet["split"]
    origin, position = snippet["kind"].split("/", 1)
    groups = ("all", f"lang:{snippet['lang']}", f"origin:{origin}", f"position:{position}")
    planted = [s for e in snippet["entities"] for s in _spans(text, e["value"])]
    output = redactor.redact(text, SHARED).text
    for e in snippet["entities"]:
        found = e["value"] not in output and placeholder("PERSON") in output
        for group in groups:
            report.recall[(split, group)].add(found)
        if not found and split == "dev":
            report.missed.append((snippet["id"], e["value"]))
    for f in redactor.detect(text, SHARED):
        if f.entity_type == "PERSON":
            for group in groups:
                report.precision[(split, group)].add(_overlaps(f.start, f.end, planted))


def evaluate_faith(
    technical: list[dict[str, Any]], names: list[dict[str, Any]], redactor: Redactor
) -> FaithReport:
    report = FaithReport()
    for snippet in technical:
        score_technical(report, redactor, snippet)
    for snippet in names:
        score_names(report, redactor, snippet)
    return report


def format_faith(report: FaithReport) -> str:
    lines = ["", "faithfulness (shared scope; issue 31): dev / heldout"]

    def row(title: str, table: dict[tuple[str, str], Tally], group: str) -> str:
        cells = []
        for split in ("dev", "heldout"):
            t = table.get((split, group), Tally())
            cells.append(f"{t.good:4d}/{t.total:<4d} {t.share:.3f}")
        return f"  {title:34s} " + "   ".join(cells)

    groups = sorted({g for _, g in report.faithful})
    lines.append("technical snippets unchanged apart from real secrets:")
    lines += [row(g, report.faithful, g) for g in groups]
    lines.append(
        "  secrets in technical snippets redacted: "
        + "   ".join(f"{s} {t.good}/{t.total}" for s, t in sorted(report.secrets.items()))
    )
    lines.append("person recall on name sentences:")
    lines += [row(g, report.recall, g) for g in sorted({g for _, g in report.recall})]
    lines.append("person precision on name sentences (right findings / findings):")
    lines += [
        row(g, report.precision, g)
        for g in sorted({g for _, g in report.precision})
        if g[:5] in ("all", "lang:")
    ]
    lines.append(
        "found words kept: "
        + ", ".join(f"{w!r} {t.good}/{t.total}" for w, t in sorted(report.found_words.items()))
    )
    for sid, kind, value in report.changed[:20]:
        lines.append(f"  dev snippet changed: {sid} {kind} {value[:50]!r}")
    for sid, value in report.missed[:20]:
        lines.append(f"  dev name missed: {sid} {value!r}")
    return "\n".join(lines)
