"""evaluate / suggest_thresholds / score_pairs / run on small hand-made inputs."""

from __future__ import annotations

import math

import pytest

from ultron.bench import dedup_calibration as cal


def mem(content: str) -> dict[str, str]:
    return {"content": content, "context": "", "resolution": ""}


def pair(pid: str, lang: str, label: str, a: str = "x", b: str = "y") -> dict:
    return {"id": pid, "lang": lang, "label": label, "a": mem(a), "b": mem(b), "note": ""}


def says_same(a: dict, b: dict) -> bool:
    """A stand-in judge: 'same' when the first memory's content says so."""
    return a["content"] == "same"


# cosines chosen around hard=0.9 / soft=0.8
TINY = [
    (pair("p1", "en", "duplicate"), 0.95),  # merge, TP
    (pair("p2", "en", "distinct"), 0.90),  # merge (cos == hard), FP
    (pair("p3", "en", "duplicate", a="same"), 0.85),  # judge says same, TP
    (pair("p4", "zh", "distinct"), 0.82),  # judge says different, TN
    (pair("p5", "zh", "duplicate"), 0.80),  # judge (cos == soft) says different, FN
    (pair("p6", "zh", "distinct", a="same"), 0.50),  # below soft: new, the judge is not asked
    (pair("p7", "zh", "duplicate"), 0.79),  # below soft: new, FN
]


def tiny() -> tuple[list[dict], list[float]]:
    return [p for p, _ in TINY], [c for _, c in TINY]


def test_evaluate_counts_and_metrics_with_judge() -> None:
    pairs, cosines = tiny()
    report = cal.evaluate(pairs, cosines, hard=0.9, soft=0.8, judge=says_same)
    o = report.overall
    assert (o.n, o.tp, o.fp, o.fn, o.tn) == (7, 2, 1, 2, 2)
    assert o.precision == pytest.approx(2 / 3)
    assert o.recall == pytest.approx(0.5)
    assert o.f1 == pytest.approx(4 / 7)
    en, zh = report.by_lang["en"], report.by_lang["zh"]
    assert (en.tp, en.fp, en.fn, en.tn) == (2, 1, 0, 0)
    assert en.precision == pytest.approx(2 / 3) and en.recall == 1.0
    assert (zh.tp, zh.fp, zh.fn, zh.tn) == (0, 0, 2, 2)
    assert zh.precision == 1.0 and zh.recall == 0.0  # nothing merged: no wrong merge
    assert report.bands == {
        "merge": {"duplicate": 1, "distinct": 1},
        "judge": {"duplicate": 2, "distinct": 1},
        "new": {"duplicate": 1, "distinct": 1},
    }
    assert report.judge_calls == 3
    verdicts = {s.id: s.judged_same for s in report.scores}
    assert verdicts == {"p1": None, "p2": None, "p3": True, "p4": False, "p5": False, "p6": None, "p7": None}
    assert [s.band for s in report.scores] == ["merge", "merge", "judge", "judge", "judge", "new", "new"]


def test_without_a_judge_the_soft_band_never_merges() -> None:
    pairs, cosines = tiny()
    report = cal.evaluate(pairs, cosines, hard=0.9, soft=0.8, judge=None)
    assert all(s.judged_same is None for s in report.scores)
    assert not any(s.merged for s in report.scores if s.band == "judge")
    o = report.overall
    assert (o.tp, o.fp, o.fn, o.tn) == (1, 1, 3, 2)
    assert o.precision == 0.5 and o.recall == 0.25
    assert report.bands["judge"] == {"duplicate": 2, "distinct": 1}  # counted, just not merged


def test_evaluate_rejects_bad_input() -> None:
    pairs, cosines = tiny()
    with pytest.raises(ValueError):
        cal.evaluate(pairs, cosines[:-1], hard=0.9, soft=0.8, judge=None)
    with pytest.raises(ValueError):
        cal.evaluate(pairs, cosines, hard=0.8, soft=0.9, judge=None)


def test_format_mentions_thresholds_and_bands() -> None:
    pairs, cosines = tiny()
    report = cal.evaluate(pairs, cosines, hard=0.9, soft=0.8, judge=says_same)
    text = report.format()
    assert "HARD 0.9000" in text and "SOFT 0.8000" in text
    assert "merge" in text and "judge calls: 3" in text
    assert "Suggested" in text
    assert report.to_dict()["overall"]["tp"] == 2


def separable() -> tuple[list[dict], list[float]]:
    dup = [0.90 + 0.01 * i for i in range(10)]  # 0.90 .. 0.99
    dist = [0.50 + 0.03 * i for i in range(11)]  # 0.50 .. 0.80
    pairs = [pair(f"d{i}", "en", "duplicate") for i in range(len(dup))]
    pairs += [pair(f"n{i}", "en", "distinct") for i in range(len(dist))]
    return pairs, dup + dist


def test_suggest_hard_lies_between_separable_classes() -> None:
    pairs, cosines = separable()
    hard, soft = cal.suggest_thresholds(pairs, cosines)
    assert 0.80 < hard <= 0.90
    assert soft == hard  # no judge: an empty band


def test_suggest_soft_reaches_down_to_duplicates_a_good_judge_can_confirm() -> None:
    dup_cos = [0.95, 0.96, 0.97, 0.98, 0.99, 0.70, 0.72]
    dist_cos = [0.60, 0.65, 0.75, 0.85]
    pairs = [pair(f"d{i}", "en", "duplicate", a="same") for i in range(len(dup_cos))]
    pairs += [pair(f"n{i}", "en", "distinct") for i in range(len(dist_cos))]
    hard, soft = cal.suggest_thresholds(pairs, dup_cos + dist_cos, judge=says_same)
    assert hard == 0.95  # 0.85 (distinct) would bring precision to 5/6
    assert soft == 0.70  # the lowest duplicate; lower adds nothing, and ties keep the higher SOFT
    report = cal.evaluate(pairs, dup_cos + dist_cos, hard=hard, soft=soft, judge=says_same)
    assert report.overall.f1 == 1.0


def test_suggest_hard_is_one_when_no_threshold_is_precise_enough() -> None:
    pairs = [pair("a", "en", "distinct"), pair("b", "en", "duplicate")]
    assert cal.suggest_thresholds(pairs, [0.9, 0.8]) == (1.0, 1.0)


def test_suggest_hard_uses_the_lowest_precise_threshold() -> None:
    # 100 duplicates then one distinct: precision stays >= 0.99 down to the distinct pair's cosine.
    pairs = [pair(f"d{i}", "en", "duplicate") for i in range(100)] + [pair("n", "en", "distinct")]
    cosines = [0.999 - 0.001 * i for i in range(100)] + [0.5]
    hard, _ = cal.suggest_thresholds(pairs, cosines)
    assert hard == 0.5  # 100/101 = 0.9901 >= 0.99


def test_roc_auc() -> None:
    assert cal.roc_auc([0.9, 0.8, 0.1], ["duplicate", "duplicate", "distinct"]) == 1.0
    assert cal.roc_auc([0.1, 0.9], ["duplicate", "distinct"]) == 0.0
    assert cal.roc_auc([0.5, 0.5], ["duplicate", "distinct"]) == 0.5
    assert cal.roc_auc([0.5], ["duplicate"]) is None


def test_score_pairs_batches_and_embeds_each_text_once() -> None:
    calls: list[list[str]] = []

    def embed(texts: list[str]) -> list[list[float]]:
        calls.append(list(texts))
        return [[1.0, 0.0] if "up" in t else [0.0, 2.0] for t in texts]

    pairs = [
        pair("1", "en", "duplicate", a="up one", b="up two"),
        pair("2", "en", "distinct", a="up one", b="down"),
        pair("3", "en", "distinct", a="down", b="down again"),
    ]
    cosines = cal.score_pairs(embed, pairs, batch_size=2)
    assert cosines == pytest.approx([1.0, 0.0, 1.0])
    flat = [t for batch in calls for t in batch]
    assert sorted(flat) == sorted({"up one", "up two", "down", "down again"})
    assert all(len(batch) <= 2 for batch in calls)


class FakeEmbedder:
    model_name = "fake:letters"

    def embed(self, texts, *, kind="document"):  # type: ignore[no-untyped-def]
        assert kind == "document"
        rows = []
        for text in texts:
            row = [0.0] * 27
            for ch in text.lower():
                row[ord(ch) - 97 if "a" <= ch <= "z" else 26] += 1.0
            norm = math.sqrt(sum(x * x for x in row))
            rows.append([x / norm for x in row])
        return rows


def test_run_scores_the_shipped_set() -> None:
    report = cal.run(FakeEmbedder(), None, 0.95, 0.9)
    assert report.overall.n == len(cal.load_pairs())
    assert report.model_name == "fake:letters"
    assert report.hard == 0.95 and report.soft == 0.9
    assert sum(sum(c.values()) for c in report.bands.values()) == report.overall.n
    assert report.suggested is not None
    assert "fake:letters" in report.format()


def test_run_with_the_heuristic_judge() -> None:
    heuristic = pytest.importorskip("ultron.memory.heuristic")
    report = cal.run(FakeEmbedder(), heuristic.same_subject, 0.95, 0.9)
    assert report.judge_name is not None and "same_subject" in report.judge_name
    assert report.judge_calls == report.bands["judge"]["duplicate"] + report.bands["judge"]["distinct"]


def test_a_gated_out_pair_above_hard_goes_to_the_judge() -> None:
    pairs = [
        pair("g1", "en", "duplicate", a="ok"),  # gate passes: automatic merge
        pair("g2", "en", "distinct", a="veto"),  # gate fails, judge says different: not merged
        pair("g3", "en", "duplicate", a="veto same"),  # gate fails, judge says same: judge merge
    ]
    report = cal.evaluate(
        pairs,
        [0.99, 0.99, 0.99],
        hard=0.9,
        soft=0.8,
        judge=lambda a, b: "same" in a["content"],
        gate=lambda a, b: "veto" not in a["content"],
        suggest=False,
    )
    assert [(s.auto, s.merged) for s in report.scores] == [(True, True), (False, False), (False, True)]
    assert report.merges("auto") == (1, 0) and report.merges("judge") == (1, 0)
    assert report.merge_precision("auto") == report.merge_precision("judge") == 1.0
    assert "automatic merges" in report.format()


def test_suggested_soft_keeps_judge_merges_precise() -> None:
    # The judge says "same" to everything: reaching down would add wrong judge merges, so SOFT stays at HARD.
    pairs = [pair(f"d{i}", "en", "duplicate") for i in range(5)] + [pair("n", "en", "distinct")]
    cosines = [0.99, 0.98, 0.97, 0.85, 0.84, 0.86]
    hard, soft = cal.suggest_thresholds(pairs, cosines, judge=lambda a, b: True)
    assert hard == 0.97 and soft == 0.97


def test_splits_partition_the_shipped_set() -> None:
    every = cal.load_pairs()
    dev, held = cal.load_pairs(split="dev"), cal.load_pairs(split="heldout")
    assert len(dev) + len(held) == len(every)
    assert all(cal.split_of(p) == "dev" for p in dev)
    with pytest.raises(ValueError):
        cal.load_pairs(split="test")
