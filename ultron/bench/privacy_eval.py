"""Precision and recall of the redactor on the labelled corpus, plus throughput.

    python -m ultron.bench.privacy_eval [--corpus PATH] [--repeat N] [--redact-uuids]

Recall: a planted value counts as found when it is gone from the output (no 16-character piece of a long
value is left either) and the placeholder of its type is there. Precision: a finding counts as right
when it overlaps a planted value of its own type. Exits 1 when a target is missed, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ultron.bench.privacy_faith import NAMES_CORPUS, TECHNICAL_CORPUS, evaluate_faith, format_faith
from ultron.privacy.entities import PII_ENTITIES, SECRET_ENTITIES, placeholder
from ultron.privacy.policy import UUID_PATTERN, RedactionPolicy
from ultron.privacy.redactor import Redactor

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "tests" / "data" / "redaction_corpus.jsonl"
SECRET_RECALL_TARGET = 0.98
PII_RECALL_TARGET = 0.95
CLEAN_UNCHANGED_TARGET = 0.97
# Names and street addresses, scored per language (issue 19).
NAME_ENTITIES = ("PERSON", "STREET_ADDRESS")
NAME_RECALL_TARGET = 0.95
NAME_PRECISION_TARGET = 0.9
_LEAK_WINDOW = 16


@dataclass
class TypeScore:
    support: int = 0
    found: int = 0
    predicted: int = 0
    predicted_right: int = 0

    @property
    def recall(self) -> float:
        return self.found / self.support if self.support else 1.0

    @property
    def precision(self) -> float:
        return self.predicted_right / self.predicted if self.predicted else 1.0


@dataclass
class Report:
    scores: dict[str, TypeScore] = field(default_factory=dict)
    clean_total: int = 0
    clean_unchanged: int = 0
    clean_changed_ids: list[str] = field(default_factory=list)
    missed: list[tuple[str, str, str]] = field(default_factory=list)  # (snippet id, type, value)
    false_positives: list[tuple[str, str, str]] = field(default_factory=list)
    kb_per_s: float = 0.0  # wall clock
    kb_per_s_cpu: float = 0.0  # CPU time; the latencies below are CPU time too
    ms_per_kb: float = 0.0
    p50_ms: float = 0.0
    p95_ms: float = 0.0
    fast_path_calls: float = 0.0
    fast_path_time: float = 0.0
    memory_kb: float = 0.0
    memory_p50_ms: float = 0.0
    memory_p95_ms: float = 0.0
    memory_wall_p50_ms: float = 0.0
    by_language: dict[str, TypeScore] = field(default_factory=dict)  # NAME_ENTITIES, per language

    @property
    def clean_share(self) -> float:
        return self.clean_unchanged / self.clean_total if self.clean_total else 1.0

    def group(self, names: Sequence[str]) -> TypeScore:
        total = TypeScore()
        for name in names:
            s = self.scores.get(name, TypeScore())
            total.support += s.support
            total.found += s.found
            total.predicted += s.predicted
            total.predicted_right += s.predicted_right
        return total

    def failures(self) -> list[str]:
        out = []
        for name, s in sorted(self.scores.items()):
            target = SECRET_RECALL_TARGET if name in SECRET_ENTITIES else PII_RECALL_TARGET
            if s.support and s.recall < target:
                out.append(f"{name} recall {s.recall:.3f} < {target}")
        secrets = self.group(SECRET_ENTITIES)
        if secrets.support and secrets.recall < SECRET_RECALL_TARGET:
            out.append(f"secrets recall {secrets.recall:.3f} < {SECRET_RECALL_TARGET}")
        for lang, s in sorted(self.by_language.items()):
            if s.support and s.recall < NAME_RECALL_TARGET:
                out.append(f"names and addresses ({lang}) recall {s.recall:.3f} < {NAME_RECALL_TARGET}")
            if s.predicted and s.precision < NAME_PRECISION_TARGET:
                out.append(
                    f"names and addresses ({lang}) precision {s.precision:.3f} < {NAME_PRECISION_TARGET}"
                )
        if self.clean_share < CLEAN_UNCHANGED_TARGET:
            out.append(f"clean unchanged {self.clean_share:.3f} < {CLEAN_UNCHANGED_TARGET}")
        return out


def load_corpus(path: Path) -> list[dict[str, Any]]:
    snippets = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                text, entities = item["text"], item["entities"]
                for e in entities:
                    if e["value"] not in text:
                        raise ValueError(f"planted value {e['value']!r} is not in the text")
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{lineno}: bad snippet: {exc}") from None
            snippets.append(item)
    return snippets


def leaked(value: str, output: str) -> bool:
    """The value, or for long values any 16-character piece of it, is still in the output."""
    if value in output:
        return True
    if len(value) < 24:
        return False
    return any(value[i : i + _LEAK_WINDOW] in output for i in range(len(value) - _LEAK_WINDOW + 1))


def _occurrences(text: str, value: str) -> list[tuple[int, int]]:
    spans, start = [], text.find(value)
    while start != -1:
        spans.append((start, start + len(value)))
        start = text.find(value, start + 1)
    return spans


def score_snippet(
    report: Report, redactor: Redactor, snippet: dict[str, Any], policy: RedactionPolicy | None
) -> None:
    text, planted = snippet["text"], snippet["entities"]
    output = redactor.redact(text, policy).text
    if not planted:
        report.clean_total += 1
        if output == text:
            report.clean_unchanged += 1
        else:
            report.clean_changed_ids.append(snippet["id"])
    for e in planted:
        s = report.scores.setdefault(e["type"], TypeScore())
        s.support += 1
        if not leaked(e["value"], output) and placeholder(e["type"]) in output:
            s.found += 1
        else:
            report.missed.append((snippet["id"], e["type"], e["value"]))
    planted_spans = {(e["type"], span) for e in planted for span in _occurrences(text, e["value"])}
    for f in redactor.detect(text, policy):
        s = report.scores.setdefault(f.entity_type, TypeScore())
        s.predicted += 1
        if any(t == f.entity_type and f.start < end and start < f.end for t, (start, end) in planted_spans):
            s.predicted_right += 1
        else:
            report.false_positives.append((snippet["id"], f.entity_type, text[f.start : f.end]))


def _timed(fn, *args) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one call. CPU time is what the redactor costs; wall time adds
    whatever else the machine is running."""
    wall, cpu = time.perf_counter(), time.thread_time()
    fn(*args)
    return time.perf_counter() - wall, time.thread_time() - cpu


def measure_speed(
    report: Report, redactor: Redactor, texts: list[str], policy: RedactionPolicy | None, repeat: int
) -> None:
    """Single-threaded throughput over the corpus after one warm-up pass."""
    for t in texts:
        redactor.redact(t, policy)
    walls, cpus, fast_calls, fast_cpu = [], [], 0, 0.0
    for _ in range(repeat):
        for t in texts:
            before = redactor.stats().get("fast_path", 0)
            wall, cpu = _timed(redactor.redact, t, policy)
            walls.append(wall)
            cpus.append(cpu)
            if redactor.stats().get("fast_path", 0) > before:
                fast_calls += 1
                fast_cpu += cpu
    total_kb = repeat * sum(len(t.encode()) for t in texts) / 1024
    report.kb_per_s = total_kb / sum(walls)
    report.kb_per_s_cpu = total_kb / sum(cpus)
    report.ms_per_kb = 1000 * sum(cpus) / total_kb
    report.p50_ms = 1000 * statistics.median(cpus)
    report.p95_ms = 1000 * statistics.quantiles(cpus, n=20)[-1]
    report.fast_path_calls = fast_calls / len(cpus)
    report.fast_path_time = fast_cpu / sum(cpus)


def measure_memories(
    report: Report, redactor: Redactor, texts: list[str], policy: RedactionPolicy | None, repeat: int
) -> None:
    """Latency of an upload's redaction: three fields (content 600, context 200, resolution 300 characters,
    about 1 KB in all) cut in turn from the corpus text."""
    stream = "\n".join(texts)
    memories = [
        {
            "content": stream[i : i + 600],
            "context": stream[i + 600 : i + 800],
            "resolution": stream[i + 800 : i + 1100],
        }
        for i in range(0, len(stream) - 1100, 1100)
    ]
    walls, cpus = [], []
    for _ in range(repeat):
        for fields in memories:
            wall, cpu = _timed(redactor.redact_fields, fields, policy)
            walls.append(wall)
            cpus.append(cpu)
    report.memory_kb = statistics.mean(sum(len(v.encode()) for v in m.values()) for m in memories) / 1024
    report.memory_p50_ms = 1000 * statistics.median(cpus)
    report.memory_p95_ms = 1000 * statistics.quantiles(cpus, n=20)[-1]
    report.memory_wall_p50_ms = 1000 * statistics.median(walls)


def evaluate(
    snippets: list[dict[str, Any]], redactor: Redactor, policy: RedactionPolicy | None = None, repeat: int = 3
) -> Report:
    report = Report()
    for snippet in snippets:
        before = report.group(NAME_ENTITIES)
        score_snippet(report, redactor, snippet, policy)
        after = report.group(NAME_ENTITIES)
        total = report.by_language.setdefault(snippet["lang"], TypeScore())
        total.support += after.support - before.support
        total.found += after.found - before.found
        total.predicted += after.predicted - before.predicted
        total.predicted_right += after.predicted_right - before.predicted_right
    if repeat:
        texts = [s["text"] for s in snippets]
        measure_speed(report, redactor, texts, policy, repeat)
        measure_memories(report, redactor, texts, policy, repeat)
    return report


def format_report(report: Report, snippets: list[dict[str, Any]]) -> str:
    langs = Counter(s["lang"] for s in snippets)
    lines = [
        f"corpus: {len(snippets)} snippets ({', '.join(f'{k} {v}' for k, v in sorted(langs.items()))}), "
        f"{report.clean_total} clean",
        "",
        f"{'entity':22s} {'support':>7s} {'found':>6s} {'pred':>6s} {'precision':>9s} {'recall':>7s}",
    ]
    for title, names in (("secrets", SECRET_ENTITIES), ("pii", PII_ENTITIES)):
        for name in names:
            s = report.scores.get(name)
            if s and (s.support or s.predicted):
                lines.append(_row(name, s))
        g = report.group(names)
        lines.append(_row(f"= {title}", g))
        lines.append("")
    for name, s in sorted(report.scores.items()):
        if name not in SECRET_ENTITIES and name not in PII_ENTITIES:
            lines.append(
                f"{name:22s} {s.support:7d} {s.found:6d} {s.predicted:6d} {s.precision:9.3f} {s.recall:7.3f}"
            )
    for lang, s in sorted(report.by_language.items()):
        lines.append(_row(f"names+addresses {lang}", s))
    lines.append(
        f"clean snippets unchanged: {report.clean_unchanged}/{report.clean_total} = {report.clean_share:.3f}"
    )
    if report.kb_per_s:
        lines.append(
            f"throughput: {report.kb_per_s_cpu:.0f} KB/s of CPU time ({report.ms_per_kb:.2f} ms/KB; "
            f"{report.kb_per_s:.0f} KB/s wall clock on this machine now); "
            f"per snippet p50 {report.p50_ms:.2f} ms, p95 {report.p95_ms:.2f} ms; "
            f"fast path {report.fast_path_calls:.0%} of calls, {report.fast_path_time:.0%} of time"
        )
        lines.append(
            f"per memory (3 fields, {report.memory_kb:.2f} KB on average): "
            f"p50 {report.memory_p50_ms:.2f} ms, p95 {report.memory_p95_ms:.2f} ms of CPU time "
            f"(wall clock p50 {report.memory_wall_p50_ms:.2f} ms)"
        )
    for sid, kind, value in report.missed[:20]:
        lines.append(f"  missed {kind:20s} {sid}: {value[:60]!r}")
    for sid, kind, value in report.false_positives[:20]:
        lines.append(f"  false positive {kind:12s} {sid}: {value[:60]!r}")
    for sid in report.clean_changed_ids[:20]:
        lines.append(f"  clean snippet changed: {sid}")
    return "\n".join(lines)


def _row(name: str, s: TypeScore) -> str:
    return f"{name:22s} {s.support:7d} {s.found:6d} {s.predicted:6d} {s.precision:9.3f} {s.recall:7.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ultron.bench.privacy_eval", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--corpus", type=Path, default=None, help=f"JSONL corpus (default: {DEFAULT_CORPUS})")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes over the corpus (0 skips timing)")
    parser.add_argument(
        "--redact-uuids", action="store_true", help="also redact UUIDs, to measure what that costs"
    )
    parser.add_argument(
        "--faith",
        choices=("auto", "only", "no"),
        default="auto",
        help="the issue-31 corpora (technical snippets, name sentences): after the default corpus when "
        "present (auto), alone (only), or not at all (no)",
    )
    args = parser.parse_args(argv)
    if args.faith == "only":
        return _faith(Redactor())
    path = args.corpus or DEFAULT_CORPUS
    if not path.is_file():
        hint = "" if args.corpus else " (it ships in the source tree, not in the wheel: pass --corpus PATH)"
        print(f"error: corpus not found: {path}{hint}", file=sys.stderr)
        return 2
    try:
        snippets = load_corpus(path)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    policy = RedactionPolicy(extra_patterns=(("UUID", UUID_PATTERN),)) if args.redact_uuids else None
    report = evaluate(snippets, Redactor(), policy, repeat=max(0, args.repeat))
    print(format_report(report, snippets))
    failures = report.failures()
    # A corpus of one's own is scored alone; the default run adds the issue-31 corpora.
    if args.faith == "auto" and args.corpus is None and TECHNICAL_CORPUS.is_file() and NAMES_CORPUS.is_file():
        failures += _faith_failures(Redactor())
    for failure in failures:
        print(f"TARGET MISSED: {failure}")
    if not failures:
        print("all targets met")
    return 1 if failures else 0


def _faith_failures(redactor: Redactor) -> list[str]:
    technical, names = load_corpus(TECHNICAL_CORPUS), load_corpus(NAMES_CORPUS)
    report = evaluate_faith(technical, names, redactor)
    print(format_faith(report))
    return report.failures()


def _faith(redactor: Redactor) -> int:
    try:
        failures = _faith_failures(redactor)
    except (OSError, ValueError) as exc:
        print(f"error: {exc} (the corpora ship in the source tree, not in the wheel)", file=sys.stderr)
        return 2
    for failure in failures:
        print(f"TARGET MISSED: {failure}")
    if not failures:
        print("all targets met")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
