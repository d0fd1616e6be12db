"""`ultron eval clusters`: purity and completeness of the online clustering per join threshold.

The labelled topic set `data/cluster_topics.jsonl` (memories as agents upload them: content, context,
resolution, over topics that share words -- "docker", "connection", "cache") is embedded with the
configured model, then clustered online in several shuffled upload orders with the service's own rule:
the `PROBE_CANDIDATES` clusters whose centroid direction is nearest are the candidates (what the HNSW
probe returns), the one with the highest `join_score` (average cosine to its members) is joined when the
score reaches the threshold, else the memory starts a cluster. Per threshold it reports:

- purity: the share of memories that sit in a cluster whose majority topic is their own (1.0 when every
  cluster holds one topic; singletons count as pure), worst and mean over the orders;
- completeness: the share of memories in their topic's largest cluster (1.0 when no topic is split);
- clusters, and clusters with at least `crystallization_threshold` members (those become skills), how
  many of those are mixed (more than one topic), and how many have a mixed core (`CORE_MARGIN`: the
  members a skill is distilled from and cites; a mixed core is a skill citing another topic's memory).

`choose` picks the lowest threshold (the most joining) whose worst purity reaches TARGET_PURITY and at
which no ready cluster of any order has a mixed core.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ultron.clusters.service import CORE_MARGIN, PROBE_CANDIDATES, join_score, unit
from ultron.config import Settings
from ultron.hub import build_embedder
from ultron.memory.text import embedding_text

TOPICS_PATH = Path(__file__).parent / "data" / "cluster_topics.jsonl"
# Six more topics, written after the thresholds were chosen and never used to choose them.
HELDOUT_PATH = Path(__file__).parent / "data" / "cluster_topics_heldout.jsonl"
SETS = {"calibration": (TOPICS_PATH,), "heldout": (HELDOUT_PATH,), "all": (TOPICS_PATH, HELDOUT_PATH)}
TARGET_PURITY = 0.9  # the worst order's purity
ORDERS = 10
SEED = 5
READY = 5  # the default crystallization_threshold


def load_topics(path: Path | None = None) -> list[dict[str, str]]:
    with (path or TOPICS_PATH).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def embed_topics(embedder: Any, rows: Sequence[dict[str, str]]) -> np.ndarray:
    texts = [embedding_text(r["content"], r.get("context", ""), r.get("resolution", "")) for r in rows]
    return np.asarray([unit(v) for v in embedder.embed(texts, kind="document")])


def cluster_online(vectors: np.ndarray, threshold: float, order: Sequence[int] | np.ndarray) -> list[int]:
    """Each vector's cluster, assigned one at a time in `order` with `ClusterService.assign`'s rule."""
    means: list[np.ndarray] = []
    counts: list[int] = []
    assigned = [-1] * len(vectors)
    for i in order:
        v = vectors[i]
        best = -1
        if means:
            directions = np.asarray([m / np.linalg.norm(m) for m in means]) @ v
            candidates = np.argsort(-directions)[:PROBE_CANDIDATES]
            best = int(max(candidates, key=lambda c: join_score(v, means[c])))
        if best >= 0 and join_score(v, means[best]) >= threshold:
            n = counts[best]
            means[best] = (means[best] * n + v) / (n + 1)
            counts[best] = n + 1
        else:
            best = len(means)
            means.append(v.astype(np.float64))
            counts.append(1)
        assigned[i] = best
    return assigned


@dataclass
class Row:
    threshold: float
    purity_min: float
    purity_mean: float
    completeness: float
    clusters: float
    ready: float
    mixed_ready: float
    mixed_core: float


def _core(vectors: np.ndarray, members: list[int], threshold: float) -> list[int]:
    """The members whose average cosine to the other members reaches threshold + CORE_MARGIN."""
    n = len(members)
    mean = vectors[members].mean(axis=0)
    return [i for i in members if (n * float(mean @ vectors[i]) - 1) / (n - 1) >= threshold + CORE_MARGIN]


def score(
    assigned: Sequence[int], labels: Sequence[str], vectors: np.ndarray, threshold: float
) -> tuple[float, float, int, int, int, int]:
    """(purity, completeness, clusters, clusters of >= READY members, of which mixed, of which with a
    mixed core)."""
    by_cluster: dict[int, Counter[str]] = {}
    by_topic: dict[str, Counter[int]] = {}
    for c, label in zip(assigned, labels, strict=True):
        by_cluster.setdefault(c, Counter())[label] += 1
        by_topic.setdefault(label, Counter())[c] += 1
    n = len(labels)
    purity = sum(t.most_common(1)[0][1] for t in by_cluster.values()) / n
    completeness = sum(c.most_common(1)[0][1] for c in by_topic.values()) / n
    ready = [c for c, t in by_cluster.items() if t.total() >= READY]
    mixed = sum(1 for c in ready if len(by_cluster[c]) > 1)
    members: dict[int, list[int]] = {}
    for i, c in enumerate(assigned):
        members.setdefault(c, []).append(i)
    mixed_core = sum(1 for c in ready if len({labels[i] for i in _core(vectors, members[c], threshold)}) > 1)
    return purity, completeness, len(by_cluster), len(ready), mixed, mixed_core


def sweep(
    vectors: np.ndarray, labels: Sequence[str], thresholds: Sequence[float], orders: int = ORDERS
) -> list[Row]:
    rng = np.random.default_rng(SEED)
    perms = [rng.permutation(len(labels)) for _ in range(orders)]
    rows = []
    for t in thresholds:
        runs = np.asarray(
            [score(cluster_online(vectors, t, p), labels, vectors, t) for p in perms], dtype=np.float64
        )
        rows.append(
            Row(
                round(float(t), 4),
                round(float(runs[:, 0].min()), 3),
                round(float(runs[:, 0].mean()), 3),
                round(float(runs[:, 1].mean()), 3),
                round(float(runs[:, 2].mean()), 1),
                round(float(runs[:, 3].mean()), 1),
                round(float(runs[:, 4].mean()), 1),
                round(float(runs[:, 5].mean()), 1),
            )
        )
    return rows


def choose(rows: Sequence[Row], target: float = TARGET_PURITY) -> float | None:
    """The lowest threshold whose worst purity reaches `target` with no mixed core (None when none does)."""
    ok = [r.threshold for r in rows if r.purity_min >= target and r.mixed_core == 0]
    return min(ok) if ok else None


def _grid(spec: str | None, current: float) -> list[float]:
    """LO:HI:STEP or a comma list; unset, a range around the threshold in use (steps of 0.005 on a model
    whose scores crowd near 1, of 0.05 below 0.5)."""
    if spec is None:
        step = 0.005 if current >= 0.5 else 0.05
        return [round(current + k * step, 4) for k in range(-6, 5) if 0 <= current + k * step <= 1]
    if ":" in spec:
        lo, hi, step = (float(x) for x in spec.split(":"))
        return [round(float(x), 4) for x in np.arange(lo, hi + step / 2, step)]
    return [float(x) for x in spec.split(",")]


def run_command(args: argparse.Namespace) -> int:
    overrides = {"embedding_provider": args.embedding_provider} if args.embedding_provider else {}
    settings = Settings(**overrides)  # type: ignore[arg-type]
    topics = [row for path in SETS[args.set] for row in load_topics(path)]
    labels = [r["topic"] for r in topics]
    vectors = embed_topics(build_embedder(settings), topics)
    rows = sweep(vectors, labels, _grid(args.thresholds, settings.cluster_threshold), args.orders)
    chosen = choose(rows)
    if args.json:
        print(json.dumps({"rows": [asdict(r) for r in rows], "chosen": chosen}))
        return 0
    print(
        f"{args.set} set: {len(topics)} memories, {len(set(labels))} topics, {args.orders} upload orders; "
        f"provider {settings.embedding_provider}, join threshold in use {settings.cluster_threshold}"
    )
    print(
        "| threshold | purity (worst) | purity (mean) | completeness | clusters | ready (>=5) | mixed ready "
        "| mixed core |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        mark = " *" if r.threshold == chosen else ""
        print(
            f"| {r.threshold}{mark} | {r.purity_min:.3f} | {r.purity_mean:.3f} | {r.completeness:.3f} | "
            f"{r.clusters} | {r.ready} | {r.mixed_ready} | {r.mixed_core} |"
        )
    print(f"* lowest threshold with worst purity >= {TARGET_PURITY} and no mixed core: {chosen}")
    return 0
