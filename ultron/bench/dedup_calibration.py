"""Dedup threshold calibration: score labelled memory pairs with an embedder and measure the merge decision.

The hub merges an upload into an existing memory when their cosine is at or above HARD, asks a judge when
it lies in [SOFT, HARD), and stores a new memory below SOFT. Cosine scales differ between embedding
models (multilingual-e5 puts unrelated texts near 0.8, DashScope v4 much lower), so the thresholds must
be calibrated per model. This module does that against a labelled set of duplicate / distinct pairs
shipped with the package (`ultron/bench/data/dedup_calibration.jsonl`, see docs/embeddings.md).

Cosine alone cannot tell "No module named pandas / pip install pandas" from the same sentence about numpy
(multilingual-e5 puts them at 0.97), so an automatic merge also needs a *gate*: the two texts' distinguishing
tokens (package, version, path, command, error code, number, date...) must agree
(`heuristic.conflicts`). The decision is: cos >= HARD and the gate passes: merge automatically; SOFT <= cos
(and not merged automatically): ask the judge; below SOFT: a new memory.

Threshold rule (`suggest_thresholds`), applied to the *dev* split only (`split_of`); the *held-out* split
is for reporting:

* HARD is the lowest cosine t such that the gated pairs with cosine >= t are duplicates at least
  `HARD_TARGET_PRECISION` (0.99) of the time. A wrong merge loses a memory, so the automatic band is
  tuned for precision and recall is left to the judge.
* SOFT is then the cosine s <= HARD that maximises F1 of the whole decision while the judge's own merges
  stay at least `JUDGE_TARGET_PRECISION` (0.97) precise. Ties go to the highest s (fewest judge calls).
  Without a judge the band merges nothing, so SOFT = HARD.

Candidate thresholds are the observed cosines themselves, so the returned values reproduce the reported
counts exactly; round them down with care (rounding can pull extra pairs into a band).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from ultron.memory.text import embedding_text
from ultron.providers.base import EmbedKind

LABELS = ("duplicate", "distinct")
FIELDS = ("content", "context", "resolution")
BANDS = ("merge", "judge", "new")
HARD_TARGET_PRECISION = 0.99
JUDGE_TARGET_PRECISION = 0.97
SPLITS = ("dev", "heldout")
DATA_FILE = "dedup_calibration.jsonl"
EMBED_BATCH = 64

Judge = Callable[[dict[str, Any], dict[str, Any]], bool]
# Whether two memories may be merged without asking the judge (their distinguishing tokens agree).
Gate = Callable[[dict[str, Any], dict[str, Any]], bool]
EmbedFn = Callable[[list[str]], Sequence[Sequence[float]]]


class _Embedder(Protocol):
    @property
    def model_name(self) -> str: ...

    def embed(self, texts: Sequence[str], *, kind: EmbedKind = "document") -> list[list[float]]: ...


# --- data ---------------------------------------------------------------------------------------------


def default_path() -> Path:
    """The calibration set shipped inside the package."""
    return Path(str(resources.files("ultron.bench").joinpath("data", DATA_FILE)))


def split_of(pair: dict[str, Any]) -> str:
    """'dev' or 'heldout', fixed by the pair id (first byte of its sha256 even: dev)."""
    return "dev" if hashlib.sha256(str(pair["id"]).encode()).digest()[0] % 2 == 0 else "heldout"


def load_pairs(path: Path | None = None, *, split: str | None = None) -> list[dict[str, Any]]:
    """Labelled pairs, one JSON object a line: id, lang, label, a, b (content/context/resolution), note.

    `split` ('dev' or 'heldout') keeps only that half; None keeps all."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}")
    path = default_path() if path is None else Path(path)
    pairs: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            pair = json.loads(line)
            if pair.get("label") not in LABELS:
                raise ValueError(f"{path}:{number}: label must be one of {LABELS}")
            for side in ("a", "b"):
                if not str(pair.get(side, {}).get("content", "")).strip():
                    raise ValueError(f"{path}:{number}: pair side {side!r} has no content")
            if split is None or split_of(pair) == split:
                pairs.append(pair)
    return pairs


def pair_text(memory: dict[str, Any]) -> str:
    """The text the hub embeds for a memory."""
    return embedding_text(*(str(memory.get(name) or "") for name in FIELDS))


# --- scoring ------------------------------------------------------------------------------------------


def _cosine(u: Sequence[float], v: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(u, v, strict=True))
    nu = math.sqrt(sum(x * x for x in u))
    nv = math.sqrt(sum(y * y for y in v))
    return dot / (nu * nv) if nu and nv else 0.0


def score_pairs(
    embed: EmbedFn, pairs: Sequence[dict[str, Any]], *, batch_size: int = EMBED_BATCH
) -> list[float]:
    """Cosine of each pair's two embedding texts; each distinct text is embedded once, in batches."""
    texts: list[str] = []
    index: dict[str, int] = {}
    for pair in pairs:
        for side in ("a", "b"):
            text = pair_text(pair[side])
            if text not in index:
                index[text] = len(texts)
                texts.append(text)
    vectors: list[Sequence[float]] = []
    for start in range(0, len(texts), batch_size):
        batch = texts[start : start + batch_size]
        rows = list(embed(batch))
        if len(rows) != len(batch):
            raise ValueError(f"embedder returned {len(rows)} vectors for {len(batch)} texts")
        vectors.extend(rows)
    return [
        _cosine(vectors[index[pair_text(pair["a"])]], vectors[index[pair_text(pair["b"])]]) for pair in pairs
    ]


# --- metrics ------------------------------------------------------------------------------------------


@dataclass
class PairScore:
    id: str
    lang: str
    label: str
    cosine: float
    judged_same: bool | None  # the judge's verdict, None when it was not asked
    band: str = "new"  # merge | judge | new
    merged: bool = False
    auto: bool = False  # merged without the judge (merge band, gate passed)


@dataclass
class Metrics:
    """The merge decision against the labels: a merged duplicate is a true positive."""

    n: int
    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def precision(self) -> float:
        """Share of merges that were duplicates; 1.0 when nothing was merged (no wrong merge happened)."""
        merged = self.tp + self.fp
        return self.tp / merged if merged else 1.0

    @property
    def recall(self) -> float:
        """Share of duplicates that were merged; 1.0 when there were none."""
        positives = self.tp + self.fn
        return self.tp / positives if positives else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    @classmethod
    def of(cls, scores: Iterable[PairScore]) -> Metrics:
        tp = fp = fn = tn = 0
        for s in scores:
            dup = s.label == "duplicate"
            if s.merged:
                tp, fp = tp + dup, fp + (not dup)
            else:
                fn, tn = fn + dup, tn + (not dup)
        return cls(n=tp + fp + fn + tn, tp=tp, fp=fp, fn=fn, tn=tn)


def roc_auc(cosines: Sequence[float], labels: Sequence[str]) -> float | None:
    """Probability that a random duplicate scores above a random distinct pair (ties count half)."""
    pos = sorted(c for c, label in zip(cosines, labels, strict=True) if label == "duplicate")
    neg = sorted(c for c, label in zip(cosines, labels, strict=True) if label != "duplicate")
    if not pos or not neg:
        return None
    # Mann-Whitney U via merged ranks, O(n log n).
    ranked = sorted([(c, 1) for c in pos] + [(c, 0) for c in neg])
    rank_sum = 0.0
    i = 0
    while i < len(ranked):
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        average_rank = (i + 1 + j) / 2
        rank_sum += average_rank * sum(flag for _, flag in ranked[i:j])
        i = j
    u = rank_sum - len(pos) * (len(pos) + 1) / 2
    return u / (len(pos) * len(neg))


@dataclass
class CalibrationReport:
    hard: float
    soft: float
    overall: Metrics
    by_lang: dict[str, Metrics]
    bands: dict[str, dict[str, int]]  # band -> label -> count
    scores: list[PairScore]
    auc: float | None
    auc_by_lang: dict[str, float | None]
    suggested: tuple[float, float] | None = None
    suggested_by_lang: dict[str, tuple[float, float]] = field(default_factory=dict)
    model_name: str = ""
    judge_name: str | None = None
    split: str = "all"
    gated: bool = False

    @property
    def judge_calls(self) -> int:
        return sum(1 for s in self.scores if s.judged_same is not None)

    def merges(self, kind: str) -> tuple[int, int]:
        """(duplicates, distinct pairs) merged automatically ('auto') or by the judge ('judge')."""
        chosen = [s for s in self.scores if s.merged and s.auto == (kind == "auto")]
        dup = sum(1 for s in chosen if s.label == "duplicate")
        return dup, len(chosen) - dup

    def merge_precision(self, kind: str) -> float:
        """Share of the automatic (or judge) merges that were duplicates; 1.0 when there were none."""
        dup, distinct = self.merges(kind)
        return dup / (dup + distinct) if dup + distinct else 1.0

    def to_dict(self) -> dict[str, Any]:
        def m(x: Metrics) -> dict[str, Any]:
            return {
                "n": x.n,
                "tp": x.tp,
                "fp": x.fp,
                "fn": x.fn,
                "tn": x.tn,
                "precision": x.precision,
                "recall": x.recall,
                "f1": x.f1,
            }

        return {
            "model": self.model_name,
            "judge": self.judge_name,
            "hard": self.hard,
            "soft": self.soft,
            "overall": m(self.overall),
            "by_lang": {lang: m(x) for lang, x in self.by_lang.items()},
            "bands": self.bands,
            "auc": self.auc,
            "auc_by_lang": self.auc_by_lang,
            "suggested": list(self.suggested) if self.suggested else None,
            "suggested_by_lang": {k: list(v) for k, v in self.suggested_by_lang.items()},
            "split": self.split,
            "auto_merges": list(self.merges("auto")),
            "auto_precision": self.merge_precision("auto"),
            "judge_merges": list(self.merges("judge")),
            "judge_precision": self.merge_precision("judge"),
        }

    def format(self) -> str:
        def auc_text(value: float | None) -> str:
            return "-" if value is None else f"{value:.3f}"

        lines = [
            f"Dedup calibration: {self.overall.n} pairs"
            + (f", model {self.model_name}" if self.model_name else "")
            + f", judge {self.judge_name or 'none'}",
            f"Split: {self.split}; thresholds: HARD {self.hard:.4f}  SOFT {self.soft:.4f}"
            + ("; automatic merges need agreeing distinguishing tokens" if self.gated else ""),
            "",
            f"{'subset':<10}{'pairs':>6}{'dup':>5}{'AUC':>7}{'prec':>7}{'recall':>8}{'F1':>7}"
            f"{'TP':>5}{'FP':>5}{'FN':>5}",
        ]
        rows = [("all", self.overall, self.auc)]
        rows += [(lang, x, self.auc_by_lang.get(lang)) for lang, x in sorted(self.by_lang.items())]
        for name, x, auc in rows:
            lines.append(
                f"{name:<10}{x.n:>6}{x.tp + x.fn:>5}{auc_text(auc):>7}{x.precision:>7.3f}{x.recall:>8.3f}"
                f"{x.f1:>7.3f}{x.tp:>5}{x.fp:>5}{x.fn:>5}"
            )
        lines += ["", f"{'band':<32}{'duplicate':>10}{'distinct':>10}"]
        labels = {
            "merge": f"merge   (cos >= {self.hard:.4f})",
            "judge": f"judge   ({self.soft:.4f} <= cos < {self.hard:.4f})",
            "new": f"new     (cos < {self.soft:.4f})",
        }
        for band in BANDS:
            counts = self.bands.get(band, {})
            lines.append(f"{labels[band]:<32}{counts.get('duplicate', 0):>10}{counts.get('distinct', 0):>10}")
        if self.judge_name:
            band_scores = [s for s in self.scores if s.judged_same is not None]
            right = sum(1 for s in band_scores if s.judged_same == (s.label == "duplicate"))
            lines.append(f"judge calls: {len(band_scores)}, agreeing with the label: {right}")
        lines.append("")
        for kind, name in (("auto", "automatic merges"), ("judge", "judge merges")):
            dup, distinct = self.merges(kind)
            lines.append(
                f"{name + ':':<18}{dup + distinct:>5}  precision {self.merge_precision(kind):.3f}"
                f"  ({distinct} wrong)"
            )
        lines.append(
            f"{'recall:':<18}{self.overall.tp:>5}  of {self.overall.tp + self.overall.fn} duplicates"
            f" merged ({self.overall.recall:.3f})"
        )
        if self.suggested:
            lines += [
                "",
                f"Suggested (all languages): HARD {_floor5(self.suggested[0])}"
                f"  SOFT {_floor5(self.suggested[1])}",
            ]
            for lang, (hard, soft) in sorted(self.suggested_by_lang.items()):
                lines.append(f"  {lang:<8} HARD {_floor5(hard)}  SOFT {_floor5(soft)}")
            lines.append(
                f"  rule (on the dev split): HARD = lowest cosine with automatic-merge precision >= "
                f"{HARD_TARGET_PRECISION:.2f} above it; SOFT = best F1 with the judge in [SOFT, HARD) while "
                f"judge merges stay >= {JUDGE_TARGET_PRECISION:.2f} precise"
            )
        return "\n".join(lines)


def _floor5(x: float) -> str:
    """A suggested threshold for display, rounded down so that pasting it back keeps the pair it sits on."""
    return f"{math.floor(x * 100_000) / 100_000:.5f}"


# --- decision -----------------------------------------------------------------------------------------


def _band(cosine: float, hard: float, soft: float) -> str:
    if cosine >= hard:
        return "merge"
    if cosine >= soft:
        return "judge"
    return "new"


def _judge_name(judge: Judge | None) -> str | None:
    if judge is None:
        return None
    module = getattr(judge, "__module__", "") or ""
    name = getattr(judge, "__qualname__", None) or type(judge).__name__
    return f"{module}.{name}" if module else name


def _score(
    pairs: Sequence[dict[str, Any]],
    cosines: Sequence[float],
    hard: float,
    soft: float,
    verdict: Callable[[int], bool] | None,
    passes: Callable[[int], bool] | None = None,
) -> list[PairScore]:
    scores = []
    for i, (pair, cosine) in enumerate(zip(pairs, cosines, strict=True)):
        band = _band(cosine, hard, soft)
        auto = band == "merge" and (passes is None or passes(i))
        judged: bool | None = None
        if band != "new" and not auto and verdict is not None:
            judged = verdict(i)
        scores.append(
            PairScore(
                id=str(pair.get("id", i)),
                lang=str(pair.get("lang", "")),
                label=pair["label"],
                cosine=float(cosine),
                judged_same=judged,
                band=band,
                merged=auto or bool(judged),
                auto=auto,
            )
        )
    return scores


def _memoized(pairs: Sequence[dict[str, Any]], judge: Judge | Gate | None) -> Callable[[int], bool] | None:
    """The judge (or gate) as a function of the pair index, asked at most once per pair."""
    if judge is None:
        return None
    cache: dict[int, bool] = {}

    def verdict(i: int) -> bool:
        if i not in cache:
            cache[i] = bool(judge(pairs[i]["a"], pairs[i]["b"]))
        return cache[i]

    return verdict


def evaluate(
    pairs: Sequence[dict[str, Any]],
    cosines: Sequence[float],
    *,
    hard: float,
    soft: float,
    judge: Judge | None,
    gate: Gate | None = None,
    suggest: bool = True,
) -> CalibrationReport:
    """Precision/recall of the merge decision at (hard, soft), overall and per language, with band counts.

    Decision: merge if cos >= hard and the gate passes (no gate: always); otherwise, if cos >= soft, merge
    when judge(a, b) says so (no judge: not merged); below soft, not merged. With `suggest`, also reports
    `suggest_thresholds` overall and per language (this asks the judge about every pair below the
    suggested HARD, once each).
    """
    if len(pairs) != len(cosines):
        raise ValueError(f"{len(pairs)} pairs but {len(cosines)} cosines")
    if soft > hard:
        raise ValueError(f"soft ({soft}) must not exceed hard ({hard})")
    verdict = _memoized(pairs, judge)
    passes = _memoized(pairs, gate)
    scores = _score(pairs, cosines, hard, soft, verdict, passes)
    bands = {band: dict.fromkeys(LABELS, 0) for band in BANDS}
    for s in scores:
        bands[s.band][s.label] += 1
    langs = sorted({s.lang for s in scores})
    labels = [p["label"] for p in pairs]
    report = CalibrationReport(
        hard=hard,
        soft=soft,
        overall=Metrics.of(scores),
        by_lang={lang: Metrics.of(s for s in scores if s.lang == lang) for lang in langs},
        bands=bands,
        scores=scores,
        auc=roc_auc(cosines, labels),
        auc_by_lang={
            lang: roc_auc(
                [c for c, s in zip(cosines, scores, strict=True) if s.lang == lang],
                [s.label for s in scores if s.lang == lang],
            )
            for lang in langs
        },
        judge_name=_judge_name(judge),
        gated=gate is not None,
    )
    if suggest:
        report.suggested, report.suggested_by_lang = _suggest_all(pairs, cosines, verdict, passes)
    return report


def _suggest_all(
    pairs: Sequence[dict[str, Any]],
    cosines: Sequence[float],
    verdict: Callable[[int], bool] | None,
    passes: Callable[[int], bool] | None,
) -> tuple[tuple[float, float], dict[str, tuple[float, float]]]:
    """Suggested (HARD, SOFT) over all the pairs given and per language."""
    overall = _suggest(pairs, cosines, verdict, passes)
    by_lang = {}
    for lang in sorted({str(p.get("lang", "")) for p in pairs}):
        idx = [i for i, p in enumerate(pairs) if p.get("lang", "") == lang]

        def sub(fn: Callable[[int], bool] | None, idx: list[int] = idx) -> Callable[[int], bool] | None:
            return None if fn is None else (lambda j: fn(idx[j]))

        by_lang[lang] = _suggest(
            [pairs[i] for i in idx], [cosines[i] for i in idx], sub(verdict), sub(passes)
        )
    return overall, by_lang


# --- threshold suggestion -----------------------------------------------------------------------------


def _hard_threshold(
    cosines: Sequence[float], labels: Sequence[str], target: float, gated: Sequence[bool] | None = None
) -> float:
    """Lowest observed cosine t with precision >= target among (gated) pairs with cosine >= t; 1.0 if none."""
    order = sorted(range(len(cosines)), key=lambda i: cosines[i], reverse=True)
    best = 1.0
    tp = fp = 0
    i = 0
    while i < len(order):
        t = cosines[order[i]]
        while i < len(order) and cosines[order[i]] == t:  # ties enter together
            if gated is None or gated[order[i]]:
                if labels[order[i]] == "duplicate":
                    tp += 1
                else:
                    fp += 1
            i += 1
        if tp + fp and tp / (tp + fp) >= target:
            best = t
    return best


def _suggest(
    pairs: Sequence[dict[str, Any]],
    cosines: Sequence[float],
    verdict: Callable[[int], bool] | None,
    passes: Callable[[int], bool] | None = None,
) -> tuple[float, float]:
    labels = [p["label"] for p in pairs]
    gated = None if passes is None else [passes(i) for i in range(len(pairs))]
    hard = _hard_threshold(cosines, labels, HARD_TARGET_PRECISION, gated)
    positives = labels.count("duplicate")
    auto = [c >= hard and (gated is None or gated[i]) for i, c in enumerate(cosines)]
    tp = sum(1 for i, label in enumerate(labels) if auto[i] and label == "duplicate")
    fp = sum(1 for i, label in enumerate(labels) if auto[i] and label != "duplicate")
    if verdict is None:
        return hard, hard
    jtp = jfp = 0
    for i, c in enumerate(cosines):  # above HARD but gated out: the judge is asked whatever SOFT is
        if c >= hard and not auto[i] and verdict(i):
            jtp, jfp = jtp + (labels[i] == "duplicate"), jfp + (labels[i] != "duplicate")

    def f1(tp: int, fp: int) -> float:
        return 2 * tp / (2 * tp + fp + (positives - tp)) if positives + fp else 0.0

    def precise(jtp: int, jfp: int) -> bool:
        return jtp + jfp == 0 or jtp / (jtp + jfp) >= JUDGE_TARGET_PRECISION

    best_soft, best_f1 = hard, f1(tp + jtp, fp + jfp) if precise(jtp, jfp) else -1.0
    below = sorted((i for i, c in enumerate(cosines) if c < hard), key=lambda i: cosines[i], reverse=True)
    i = 0
    while i < len(below):
        s = cosines[below[i]]
        while i < len(below) and cosines[below[i]] == s:
            j = below[i]
            if verdict(j):
                if labels[j] == "duplicate":
                    jtp += 1
                else:
                    jfp += 1
            i += 1
        score = f1(tp + jtp, fp + jfp)
        if precise(jtp, jfp) and score > best_f1 + 1e-12:  # strictly better only: ties keep the higher SOFT
            best_soft, best_f1 = s, score
    return hard, best_soft


def suggest_thresholds(
    pairs: Sequence[dict[str, Any]],
    cosines: Sequence[float],
    judge: Judge | None = None,
    gate: Gate | None = None,
) -> tuple[float, float]:
    """(HARD, SOFT) by the rule in the module docstring: precision-first HARD, F1-best SOFT."""
    if len(pairs) != len(cosines):
        raise ValueError(f"{len(pairs)} pairs but {len(cosines)} cosines")
    if not pairs:
        return 1.0, 1.0
    return _suggest(pairs, cosines, _memoized(pairs, judge), _memoized(pairs, gate))


# --- entry point for the CLI --------------------------------------------------------------------------


def run(
    embedder: _Embedder,
    judge: Judge | None,
    hard: float,
    soft: float,
    *,
    path: Path | None = None,
    split: str | None = None,
    gate: Gate | None = None,
) -> CalibrationReport:
    """Score the shipped calibration set with `embedder` and evaluate the decision at (hard, soft).

    The report covers `split` (None: every pair); thresholds are suggested from the dev split."""
    pairs = load_pairs(path)
    cosines = score_pairs(lambda texts: embedder.embed(texts, kind="document"), pairs)
    chosen = [i for i, p in enumerate(pairs) if split is None or split_of(p) == split]
    report = evaluate(
        [pairs[i] for i in chosen],
        [cosines[i] for i in chosen],
        hard=hard,
        soft=soft,
        judge=judge,
        gate=gate,
        suggest=False,
    )
    dev = [i for i, p in enumerate(pairs) if split_of(p) == "dev"]
    dev_pairs = [pairs[i] for i in dev]
    report.suggested, report.suggested_by_lang = _suggest_all(
        dev_pairs, [cosines[i] for i in dev], _memoized(dev_pairs, judge), _memoized(dev_pairs, gate)
    )
    report.model_name = str(getattr(embedder, "model_name", ""))
    report.split = split or "all"
    return report
