"""`ultron eval retrieval --suite sweep`: pick the fusion settings by measurement on both development sets.

Loads the conversation suite and the developer suite once each (scratch databases, the real upload
paths), then runs every question of both through the hub's search under each candidate setting and
prints R@10 and MRR of both suites and the no-answer quiet rate per setting. docs/ranking.md records
the run that chose the defaults.

`--relevance-only` (run after the fusion sweep, on the settings it chose) fits the relevance model
(ultron/memory/relevance.py) instead: every question of both sets is searched once, and each result's
signals (dense z, content coverage, cosine) are scored offline under each pair of weights and each floor.
Rule: the most no-answer questions quiet (nothing at or over the floor) plus the most answerable
questions with an evidence memory at or over it, the two shares weighed alike, the answerable share the
mean of the two sets'.
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from ultron.bench.evaluation import conversations, retrieval
from ultron.config import Settings
from ultron.hub import Hub
from ultron.memory.relevance import relevance_from
from ultron.tenancy import local_actor

# The grid: fusion form and its weights first; phrase and neighbour credit, then the relevance floor.
FUSION_GRID: list[dict[str, Any]] = [
    *(
        {"search_fusion": "rrf", "fulltext_weight": w, "rrf_k": k}
        for w, k in itertools.product((0.3, 0.4, 0.5, 0.6, 0.7), (10, 30, 60))
    ),
    *(
        {"search_fusion": "weighted", "fulltext_weight": w, "lexical_half": h}
        for w, h in itertools.product((0.2, 0.3, 0.4, 0.5), (2.0, 5.0, 10.0))
    ),
]
CREDIT_GRID: list[dict[str, Any]] = [
    {"phrase_weight": p, "neighbour_weight": n}
    for p, n in itertools.product((0.0, 0.5, 1.0), (0.0, 0.1, 0.2, 0.3))
]


RELEVANCE_GRID: list[tuple[float, float]] = list(
    itertools.product((0.1, 0.2, 0.3, 0.4, 0.5), (1.0, 1.5, 2.0, 2.5, 3.0))
)
FLOORS = [round(0.3 + 0.01 * i, 2) for i in range(61)]

# One question's results for the relevance fit: per result (dense_z, content_coverage, cosine, evidence?)
Sample = list[tuple[float, float, float, bool]]


def _sample(results: Sequence[Any], is_evidence: Any) -> Sample:
    return [
        (r.explain.dense_z, r.explain.content_coverage, r.explain.vector_similarity, bool(is_evidence(r)))
        for r in results
    ]


def fit_relevance(
    provider: str, no_answer: Sequence[Sample], answerable: dict[str, Sequence[Sample]]
) -> list[dict[str, Any]]:
    """Every (weights, floor) scored by the rule in the module docstring, best first."""
    rows = []
    for w_z, w_cov in RELEVANCE_GRID:

        def best(sample: Sample, evidence_only: bool, w_z: float = w_z, w_cov: float = w_cov) -> float:
            values = [
                relevance_from(provider, z, c, cos, w_z, w_cov)
                for z, c, cos, e in sample
                if e or not evidence_only
            ]
            return max(values, default=0.0)

        loud = [best(s, False) for s in no_answer]
        found = {name: [best(s, True) for s in samples] for name, samples in answerable.items()}
        for floor in FLOORS:
            quiet = sum(v < floor for v in loud) / max(len(loud), 1)
            confident = {name: sum(v >= floor for v in vs) / max(len(vs), 1) for name, vs in found.items()}
            answered = sum(confident.values()) / max(len(confident), 1)
            rows.append(
                {
                    "w_dense_z": w_z,
                    "w_coverage": w_cov,
                    "floor": floor,
                    "no_answer_quiet": round(quiet, 4),
                    **{f"{name}_confident": round(v, 4) for name, v in confident.items()},
                    "objective": round(quiet + answered, 4),
                }
            )
    rows.sort(
        key=lambda r: (-r["objective"], -r["no_answer_quiet"], r["w_dense_z"], r["w_coverage"], r["floor"])
    )
    return rows


class _CachedEmbedder:
    """The hub's embedder with its query vectors remembered (a sweep asks every question many times)."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.model_name = inner.model_name
        self.dimension = inner.dimension
        self._cache: dict[str, list[float]] = {}

    def embed(self, texts: Sequence[str], *, kind: str = "document") -> list[list[float]]:
        if kind != "query":
            return self.inner.embed(texts, kind=kind)
        missing = [t for t in texts if t not in self._cache]
        if missing:
            self._cache.update(zip(missing, self.inner.embed(missing, kind="query"), strict=True))
        return [self._cache[t] for t in texts]


def _settings(url: str, provider: str) -> Settings:
    return Settings(
        database_url=url,
        data_dir=Path(tempfile.gettempdir()),
        embedding_provider=provider,
        llm_provider="heuristic",
        hit_flush_seconds=0,
    )


def _configs(base: dict[str, Any], grid: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for change in grid:
        yield {**base, **change}


def main(args: argparse.Namespace) -> int:
    provider = args.embedding_provider or "local"
    turns, questions = conversations.load_set()
    dev = retrieval.load_set()
    with ExitStack() as stack:
        conv_url = stack.enter_context(retrieval.scratch_database(args.database_url))
        conv_hub = Hub.open(_settings(conv_url, provider))
        stack.callback(conv_hub.close)
        dev_url = stack.enter_context(retrieval.scratch_database(args.database_url))
        dev_hub = Hub.open(_settings(dev_url, provider))
        stack.callback(dev_hub.close)
        hubs = {"conv": conv_hub, "dev": dev_hub}
        for hub in hubs.values():
            hub.memory.embedder = _CachedEmbedder(hub.memory.embedder)
        with conv_hub.db.session() as session:
            conv_actor = local_actor(session)
        held = conversations.load_hub(conv_hub, conv_actor, turns)
        with dev_hub.db.session() as session:
            dev_actor = local_actor(session)
        ids = retrieval.load_memories(dev_hub, dev_actor, dev.memories)
        with dev_hub.db.session() as session:
            dev_hub.memory.refresh_term_stats(session, dev_actor.tenant_id)
        base_settings = {name: hub.settings for name, hub in hubs.items()}

        def measure(change: dict[str, Any]) -> dict[str, Any]:
            for name, hub in hubs.items():
                hub.memory.settings = base_settings[name].model_copy(update=change)
            groups, flagged, _ = conversations.evaluate_hub(conv_hub, conv_actor, held, questions)
            ranks: dict[str, int | None] = {}
            for query in dev.queries:
                with dev_hub.db.session() as session:
                    results = dev_hub.memory.search(
                        session, dev_actor, query.text, limit=retrieval.SEARCH_LIMIT
                    )
                ranks[query.id] = retrieval.rank_of(
                    [ids.get(r.record.id, "?") for r in results], query.expected
                )
            dev_scores = retrieval.score(dev.queries, ranks)["overall"]
            conv = groups["overall"]
            quiet = flagged["quiet"] / max(flagged["quiet"] + flagged["loud"], 1)
            return {
                **change,
                "conv_r10": round(conv.r(10), 4),
                "conv_mrr": round(conv.mrr, 4),
                "dev_r10": round(dev_scores.recall(10), 4),
                "dev_mrr": round(dev_scores.mrr, 4),
                "no_answer_quiet": round(quiet, 4),
                "answered_confident": flagged["answered-confident"],
            }

        if getattr(args, "relevance_only", False):
            for name, hub in hubs.items():
                hub.memory.settings = base_settings[name]
            _, _, raw = conversations.evaluate_hub(conv_hub, conv_actor, held, questions)
            no_answer: list[Sample] = []
            conv_found: list[Sample] = []
            for question in questions:
                evidence = set(question.evidence)
                sample = _sample(raw[question.id], lambda r, e=evidence: held.get(r.record.id, set()) & e)
                (no_answer if question.category == "no-answer" else conv_found).append(sample)
            dev_found: list[Sample] = []
            for query in dev.queries:
                with dev_hub.db.session() as session:
                    results = dev_hub.memory.search(
                        session, dev_actor, query.text, limit=retrieval.SEARCH_LIMIT, explain=True
                    )
                dev_found.append(_sample(results, lambda r, q=query: ids.get(r.record.id) in q.expected))
            fitted = fit_relevance(provider, no_answer, {"conv": conv_found, "dev": dev_found})
            for row in fitted[:10]:
                print(json.dumps(row), flush=True)
            print(f"best relevance: {json.dumps(fitted[0])}", flush=True)
            return 0
        rows = []
        for change in _configs({}, FUSION_GRID):
            rows.append(measure(change))
            print(json.dumps(rows[-1]), flush=True)
        eligible = [r for r in rows if r["dev_r10"] >= 0.97] or rows
        best = max(eligible, key=lambda r: r["conv_r10"] + r["conv_mrr"] + r["dev_mrr"])
        fusion: dict[str, Any] = {
            k: best[k] for k in ("search_fusion", "fulltext_weight", "rrf_k", "lexical_half") if k in best
        }
        print(f"best fusion: {json.dumps(fusion)}", flush=True)
        for change in _configs(fusion, CREDIT_GRID):
            rows.append(measure(change))
            print(json.dumps(rows[-1]), flush=True)
    return 0
