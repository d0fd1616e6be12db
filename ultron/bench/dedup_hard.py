"""The hard-negative dedup set: does the upload path's decision merge a different fact?

`ultron/bench/data/dedup_hard_pairs.jsonl` (built by rule: `python -m ultron.bench.data.make_hard_pairs`)
holds true paraphrases and near misses that cosine cannot tell apart (two names swapped, a number
changed, a negation, another question object), in English and Chinese, split by sentence template into
dev and held-out. The decision scored is the upload path's: cos >= HARD and the automatic gate passes
(`faithful.may_merge_automatically`): merged; otherwise cos >= SOFT and the offline judge agrees under the
content veto (`faithful.may_merge_judged` and `heuristic.same_subject`): merged by the judge.

The report gives precision of automatic and judge merges, recall of the paraphrases and cosine AUC, per
language and per kind of pair (a kind's precision counts the merges of that language's paraphrases and
of that kind's pairs: how often a merge is wrong when the near misses are of that kind). A threshold pair
is refused when, on the held-out split, an automatic-merge precision falls below SHIP_AUTO_PRECISION or a
judge-merge precision below SHIP_JUDGE_PRECISION in any language or kind.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ultron.bench import dedup_calibration as calibration
from ultron.memory import faithful, heuristic

DATA_FILE = "dedup_hard_pairs.jsonl"
SHIP_AUTO_PRECISION = 0.99
SHIP_JUDGE_PRECISION = 0.98
DUPLICATE_KINDS = ("paraphrase", "surface")


def default_path() -> Path:
    return Path(str(resources.files("ultron.bench").joinpath("data", DATA_FILE)))


def load(path: Path | None = None) -> list[dict[str, Any]]:
    path = default_path() if path is None else Path(path)
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def judge(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """The offline judge as the upload path asks it: the content veto, then same_subject."""
    return faithful.may_merge_judged(a, b) and heuristic.same_subject(a, b)


@dataclass
class Row:
    name: str
    n: int
    auto: tuple[int, int]  # (right, wrong) automatic merges
    judged: tuple[int, int]  # (right, wrong) judge merges
    recall: float | None  # share of paraphrases merged; None without paraphrases
    auc: float | None

    @staticmethod
    def precision(right_wrong: tuple[int, int]) -> float:
        right, wrong = right_wrong
        return right / (right + wrong) if right + wrong else 1.0


@dataclass
class HardReport:
    hard: float
    soft: float
    split: str
    rows: list[Row]
    suggested: tuple[float, float] | None = None
    suggested_rows: list[Row] = field(default_factory=list)

    def failures(self, rows: Sequence[Row] | None = None) -> list[str]:
        """The rows (languages, kinds) whose merges are less precise than shipping allows."""
        out = []
        for row in self.rows if rows is None else rows:
            if Row.precision(row.auto) < SHIP_AUTO_PRECISION:
                out.append(f"{row.name}: automatic-merge precision {Row.precision(row.auto):.3f}")
            if Row.precision(row.judged) < SHIP_JUDGE_PRECISION:
                out.append(f"{row.name}: judge-merge precision {Row.precision(row.judged):.3f}")
        return out

    def format(self) -> str:
        lines = [
            f"Hard-negative set ({self.split}): thresholds HARD {self.hard:.4f}  SOFT {self.soft:.4f}",
            f"{'subset':<26}{'pairs':>6}{'auto':>6}{'wrong':>6}{'prec':>7}{'judge':>6}{'wrong':>6}{'prec':>7}"
            f"{'recall':>8}{'AUC':>7}",
        ]
        for r in self.rows:
            recall = "-" if r.recall is None else f"{r.recall:.3f}"
            auc = "-" if r.auc is None else f"{r.auc:.3f}"
            lines.append(
                f"{r.name:<26}{r.n:>6}{sum(r.auto):>6}{r.auto[1]:>6}{Row.precision(r.auto):>7.3f}"
                f"{sum(r.judged):>6}{r.judged[1]:>6}{Row.precision(r.judged):>7.3f}{recall:>8}{auc:>7}"
            )
        failed = self.failures()
        lines.append(
            "verdict: "
            + (
                "REFUSED, " + "; ".join(failed)
                if failed
                else f"ok (automatic >= {SHIP_AUTO_PRECISION}, judge >= {SHIP_JUDGE_PRECISION} everywhere)"
            )
        )
        if self.suggested is not None:
            hard, soft = self.suggested
            bad = self.failures(self.suggested_rows)
            lines.append(
                f"suggested from dev: HARD {hard:.5f}  SOFT {soft:.5f}; on {self.split}: "
                + ("REFUSED, " + "; ".join(bad) if bad else "precise enough to ship")
            )
        return "\n".join(lines)


def _rows(
    pairs: Sequence[dict[str, Any]], cosines: Sequence[float], scores: Sequence[calibration.PairScore]
) -> list[Row]:
    def row(name: str, idx: list[int]) -> Row:
        def count(auto: bool) -> tuple[int, int]:
            chosen = [i for i in idx if scores[i].merged and scores[i].auto == auto]
            right = sum(1 for i in chosen if pairs[i]["label"] == "duplicate")
            return right, len(chosen) - right

        dups = [i for i in idx if pairs[i]["label"] == "duplicate"]
        recall = sum(1 for i in dups if scores[i].merged) / len(dups) if dups else None
        auc = calibration.roc_auc([cosines[i] for i in idx], [pairs[i]["label"] for i in idx])
        return Row(name, len(idx), count(True), count(False), recall, auc)

    out = [row("all", list(range(len(pairs))))]
    for lang in sorted({p["lang"] for p in pairs}):
        in_lang = [i for i, p in enumerate(pairs) if p["lang"] == lang]
        out.append(row(f"lang={lang}", in_lang))
        paraphrases = [i for i in in_lang if pairs[i]["kind"] in DUPLICATE_KINDS]
        for kind in sorted({pairs[i]["kind"] for i in in_lang}):
            mine = [i for i in in_lang if pairs[i]["kind"] == kind]
            # a near-miss kind is judged beside the language's paraphrases: precision of the merges
            idx = mine if kind in DUPLICATE_KINDS else sorted(paraphrases + mine)
            out.append(row(f"{lang} {kind}", idx))
    return out


def evaluate(
    pairs: Sequence[dict[str, Any]], cosines: Sequence[float], hard: float, soft: float, split: str = "all"
) -> HardReport:
    report = calibration.evaluate(
        pairs,
        cosines,
        hard=hard,
        soft=soft,
        judge=judge,
        gate=faithful.may_merge_automatically,
        suggest=False,
    )
    return HardReport(hard, soft, split, _rows(pairs, cosines, report.scores))


def run(
    embedder: Any, hard: float, soft: float, *, split: str = "heldout", path: Path | None = None
) -> HardReport:
    """Score the hard set with `embedder`; report `split` at (hard, soft) and at the thresholds the dev
    split suggests."""
    pairs = load(path)
    cosines = calibration.score_pairs(lambda texts: embedder.embed(texts, kind="document"), pairs)
    chosen = [i for i, p in enumerate(pairs) if split == "all" or p["split"] == split]
    sub_pairs, sub_cos = [pairs[i] for i in chosen], [cosines[i] for i in chosen]
    report = evaluate(sub_pairs, sub_cos, hard, soft, split)
    dev = [i for i, p in enumerate(pairs) if p["split"] == "dev"]
    suggested = calibration.suggest_thresholds(
        [pairs[i] for i in dev], [cosines[i] for i in dev], judge=judge, gate=faithful.may_merge_automatically
    )
    report.suggested = suggested
    report.suggested_rows = evaluate(sub_pairs, sub_cos, *suggested, split).rows
    return report
