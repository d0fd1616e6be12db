"""`ultron eval retrieval --suite conversations`: long two-person chats, the hub beside BM25 and dense-only.

The set (data/conversations.jsonl, built by convgen.py from the scripts beside it) holds three long
multi-session conversations (two English, one Chinese) and questions with the turns that answer them:
single-hop, multi-hop, temporal, and no-answer questions whose answer is nowhere in the store.

A run uploads every turn through the hub's real upload path (redaction, typing, summaries, embedding,
dedup; with its thread, position and occurred_at), asks every question through the hub's real search,
and in the same run ranks the same turn texts with a plain BM25 (Okapi, k1 = 1.2, b = 0.75, lower-cased
words, jieba for Chinese) and with dense-only cosine (the hub's own embedder). Per category it prints
R@1/5/10 (the share of a question's evidence turns in the top k) and MRR (first evidence turn). For the
no-answer questions it prints the share that came back empty or flagged low-confidence.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import tempfile
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import numpy as np

from ultron.bench.evaluation.retrieval import scratch_database
from ultron.config import Settings
from ultron.hub import Hub
from ultron.memory.fulltext import _get_jieba
from ultron.memory.schemas import UploadRequest
from ultron.tenancy import local_actor

DEFAULT_SET = Path(__file__).parent / "data" / "conversations.jsonl"
KS = (1, 5, 10)
LIMIT = 10
CATEGORIES = ("single-hop", "multi-hop", "temporal")


@dataclass(frozen=True)
class Turn:
    id: str
    conv: str
    lang: str
    session: int
    position: int
    speaker: str
    text: str
    occurred_at: str

    @property
    def content(self) -> str:
        return f"{self.speaker}: {self.text}"


@dataclass(frozen=True)
class Question:
    id: str
    conv: str
    lang: str
    category: str
    text: str
    evidence: tuple[str, ...]


# The held-out part, by rule and fixed before any tuning on it: a question is held out when the session of its
# first evidence turn is a multiple of HELD_OUT_EVERY (c1 sessions 3, 6, 9; c2 and c3 sessions 3, 6), a
# no-answer question when the CRC-32 of its id is. Ranking rules are tuned on the dev part only; a rule
# that helps dev and hurts held-out is dropped (docs/evaluation.md).
HELD_OUT_EVERY = 3
SPLITS = ("dev", "held-out")


def split_of(question: Question, sessions: dict[str, int]) -> str:
    """'dev' or 'held-out' (the rule above); `sessions`: turn id -> its session number."""
    number = sessions.get(question.evidence[0], 1) if question.evidence else zlib.crc32(question.id.encode())
    return "held-out" if number % HELD_OUT_EVERY == 0 else "dev"


def load_set(path: Path = DEFAULT_SET) -> tuple[list[Turn], list[Question]]:
    turns, questions = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if row["kind"] == "turn":
            turns.append(
                Turn(
                    row["id"],
                    row["conv"],
                    row["lang"],
                    row["session"],
                    row["position"],
                    row["speaker"],
                    row["text"],
                    row["occurred_at"],
                )
            )
        else:
            questions.append(
                Question(
                    row["id"],
                    row["conv"],
                    row["lang"],
                    row["category"],
                    row["question"],
                    tuple(row["evidence"]),
                )
            )
    return turns, questions


@dataclass
class Scores:
    n: int = 0
    recall: dict[int, float] = field(default_factory=lambda: dict.fromkeys(KS, 0.0))
    reciprocal: float = 0.0

    def add(self, ranked: Sequence[set[str]], evidence: Sequence[str]) -> None:
        """ranked: for each result, the turn ids it holds (a merged memory may hold several)."""
        self.n += 1
        first = None
        for k in KS:
            found = set().union(*ranked[:k]) if ranked[:k] else set()
            self.recall[k] += len(found & set(evidence)) / len(evidence)
        for position, held in enumerate(ranked[:LIMIT], 1):
            if held & set(evidence):
                first = position
                break
        if first:
            self.reciprocal += 1.0 / first

    def r(self, k: int) -> float:
        return self.recall[k] / self.n if self.n else 0.0

    @property
    def mrr(self) -> float:
        return self.reciprocal / self.n if self.n else 0.0


# --- baselines ---------------------------------------------------------------------------------------

_WORD = re.compile(r"\w+", re.UNICODE)
_CJK = re.compile(r"[\u3400-\u9fff]")


def bm25_tokens(text: str) -> list[str]:
    text = text.lower()
    if _CJK.search(text):
        return [t for piece in _get_jieba().cut(text) for t in _WORD.findall(piece)]
    return _WORD.findall(text)


class BM25:
    """Okapi BM25 over the turn texts, the textbook formula (as rank_bm25's BM25Okapi)."""

    def __init__(self, docs: Sequence[str], k1: float = 1.2, b: float = 0.75):
        self.tokens = [bm25_tokens(d) for d in docs]
        self.k1, self.b = k1, b
        self.avg = sum(map(len, self.tokens)) / max(len(self.tokens), 1)
        df: Counter[str] = Counter()
        for toks in self.tokens:
            df.update(set(toks))
        n = len(self.tokens)
        self.idf = {t: math.log((n - f + 0.5) / (f + 0.5) + 1) for t, f in df.items()}
        self.tf = [Counter(toks) for toks in self.tokens]

    def rank(self, query: str, limit: int) -> list[int]:
        terms = set(bm25_tokens(query))
        scores = []
        for i, tf in enumerate(self.tf):
            norm = self.k1 * (1 - self.b + self.b * len(self.tokens[i]) / self.avg)
            s = sum(self.idf[t] * tf[t] * (self.k1 + 1) / (tf[t] + norm) for t in terms if t in tf)
            scores.append(s)
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        return [i for i in order[:limit] if scores[i] > 0]


def dense_ranker(embedder: Any, docs: Sequence[str]) -> Callable[[str, int], list[int]]:
    matrix = np.asarray(embedder.embed(list(docs), kind="document"), dtype=np.float32)

    def rank(query: str, limit: int) -> list[int]:
        q = np.asarray(embedder.embed([query], kind="query")[0], dtype=np.float32)
        return list(np.argsort(-(matrix @ q))[:limit])

    return rank


# --- the hub -----------------------------------------------------------------------------------------


def upload_turns(hub: Any, actor: Any, turns: Sequence[Turn]) -> dict[UUID, set[str]]:
    """Every turn through MemoryService.upload (the real path: dedup may merge turns); memory -> turn ids."""
    extra_fields = set(UploadRequest.model_fields)
    held: dict[UUID, set[str]] = defaultdict(set)
    for start in range(0, len(turns), 25):
        with hub.db.session() as session:
            for turn in turns[start : start + 25]:
                payload: dict[str, Any] = {"content": turn.content}
                optional = {
                    "thread": f"{turn.conv}/session-{turn.session}",
                    "position": turn.position,
                    "occurred_at": datetime.fromisoformat(turn.occurred_at.replace("Z", "+00:00")),
                }
                payload.update({k: v for k, v in optional.items() if k in extra_fields})
                result = hub.memory.upload(session, actor, UploadRequest(**payload))
                held[result.record.id].add(turn.id)
    return held


SUPERSEDED_SET = Path(__file__).parent / "data" / "superseded_facts.jsonl"


def evaluate_superseded(hub: Any, actor: Any, path: Path = SUPERSEDED_SET) -> dict[str, Any]:
    """The superseded-fact set: each pair's older fact uploaded, then the newer one that changes its value
    (a host, a version, a date, a choice), then its question asked. Counts the questions whose first result
    is the newer fact, and the pairs the upload linked (the older one flagged `superseded_by`)."""
    pairs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    ids: dict[str, tuple[UUID, UUID]] = {}
    for pair in pairs:
        with hub.db.session() as session:
            old = hub.memory.upload(session, actor, UploadRequest(content=pair["old"])).record.id
            new = hub.memory.upload(session, actor, UploadRequest(content=pair["new"])).record.id
        ids[pair["id"]] = (old, new)
    out: dict[str, Any] = {"pairs": len(pairs), "current_first": 0, "linked": 0, "merged": 0, "misses": []}
    by_lang: Counter[str] = Counter()
    for pair in pairs:
        old, new = ids[pair["id"]]
        with hub.db.session() as session:
            results = hub.memory.search(session, actor, pair["query"], limit=LIMIT)
            linked = hub.memory.get(session, actor, old).superseded_by == new
        out["merged"] += old == new
        out["linked"] += linked
        if results and results[0].record.id == new and old != new:
            out["current_first"] += 1
            by_lang[pair["lang"]] += 1
        else:
            out["misses"].append(pair["id"])
    out["by_lang"] = {lang: [by_lang[lang], sum(p["lang"] == lang for p in pairs)] for lang in ("en", "zh")}
    return out


def low_confidence(results: Sequence[Any]) -> bool:
    """True when a search returned nothing or only results the hub flags as low-confidence."""
    return all(getattr(r, "confidence", "high") == "low" for r in results)


def asks_only(turn: Turn) -> bool:
    """A turn that only asks: its text ends with a question mark (the search's own rule, `asks`)."""
    return turn.text.rstrip().endswith(("?", "？"))


def answer_first(ranks: Sequence[set[str]], evidence: Sequence[str], askers: frozenset[str]) -> bool | None:
    """Whether the first evidence turn ranks above every question-only turn in the results: True/False,
    None when neither is among them (nothing to compare). A result that holds an evidence turn counts as
    evidence; one whose turns all only ask, as a question."""
    for held in ranks:
        if held & set(evidence):
            return True
        if held and held <= askers:
            return False
    return None


def evaluate_hub(
    hub: Any,
    actor: Any,
    held: dict[UUID, set[str]],
    questions: Sequence[Question],
    askers: frozenset[str] = frozenset(),
    splits: dict[str, str] | None = None,
) -> tuple[dict[str, Scores], Counter[str], dict[str, list[Any]]]:
    """Every question through the hub's search: scores per group, no-answer flags, the raw results.
    `splits`: question id -> 'dev' / 'held-out', scored as groups `split=...` and answer-first counts
    `answer-first/<split>`, `question-first/<split>`."""
    splits = splits or {}
    groups: dict[str, Scores] = defaultdict(Scores)
    flagged: Counter[str] = Counter()
    raw: dict[str, list[Any]] = {}
    for question in questions:
        with hub.db.session() as session:
            results = hub.memory.search(session, actor, question.text, limit=LIMIT, explain=True)
        raw[question.id] = results
        if question.category == "no-answer":
            flagged["quiet" if low_confidence(results) else "loud"] += 1
            continue
        ranks = [held.get(r.record.id, set()) for r in results]
        confident = [h for h, r in zip(ranks, results, strict=True) if r.confidence != "low"]
        hit = set().union(*confident) & set(question.evidence) if confident else set()
        flagged["answered-confident" if hit else "answered-quiet"] += 1
        first = answer_first(ranks, question.evidence, askers)
        split = splits.get(question.id)
        if first is not None:
            flagged["answer-first" if first else "question-first"] += 1
            if split:
                flagged[f"{'answer' if first else 'question'}-first/{split}"] += 1
        for group in (
            "overall",
            question.category,
            f"lang={question.lang}",
            *([f"split={split}"] if split else []),
        ):
            groups[group].add(ranks, question.evidence)
    return groups, flagged, raw


def load_hub(hub: Any, actor: Any, turns: Sequence[Turn]) -> dict[UUID, set[str]]:
    held = upload_turns(hub, actor, turns)
    with hub.db.session() as session:  # what the worker (or the hub's own keeper) does after uploads
        hub.memory.refresh_term_stats(session, actor.tenant_id)
    return held


def run(settings: Settings, turns: list[Turn], questions: list[Question]) -> dict[str, Any]:
    hub = Hub.open(settings)
    try:
        with hub.db.session() as session:
            actor = local_actor(session)
        started = time.perf_counter()
        held = load_hub(hub, actor, turns)
        loaded = time.perf_counter() - started
        started = time.perf_counter()
        askers = frozenset(t.id for t in turns if asks_only(t))
        sessions = {t.id: t.session for t in turns}
        splits = {q.id: split_of(q, sessions) for q in questions}
        hub_groups, hub_flags, raw = evaluate_hub(hub, actor, held, questions, askers, splits)
        searched = time.perf_counter() - started
        superseded = evaluate_superseded(hub, actor)
        docs = [t.content for t in turns]
        bm25 = BM25(docs)
        dense = dense_ranker(hub.embedder, docs)
        systems: dict[str, dict[str, Scores]] = {"hub": hub_groups, "bm25": defaultdict(Scores)}
        systems["dense"] = defaultdict(Scores)
        for question in questions:
            if question.category == "no-answer":
                continue
            ranked = {
                "bm25": [{turns[i].id} for i in bm25.rank(question.text, LIMIT)],
                "dense": [{turns[i].id} for i in dense(question.text, LIMIT)],
            }
            for name, ranks in ranked.items():
                for group in (
                    "overall",
                    question.category,
                    f"lang={question.lang}",
                    f"split={splits[question.id]}",
                ):
                    systems[name][group].add(ranks, question.evidence)
        dump = {
            q.id: {
                "category": q.category,
                "split": splits[q.id],
                "question": q.text,
                "evidence": list(q.evidence),
                "results": [
                    {
                        "turns": sorted(held.get(r.record.id, set())),
                        "confidence": r.confidence,
                        **(r.explain.model_dump() if r.explain else {}),
                    }
                    for r in raw[q.id]
                ],
            }
            for q in questions
        }
        return {
            "dump": dump,
            "systems": systems,
            "flagged": {"hub": hub_flags},
            "superseded": superseded,
            "info": {
                "embedder": f"{settings.embedding_provider} ({hub.embedder.model_name})",
                "turns": len(turns),
                "memories": len(held),
                "questions": len(questions),
                "load_seconds": round(loaded, 1),
                "search_ms": round(1000 * searched / max(len(questions), 1), 1),
            },
        }
    finally:
        hub.close()


def format_report(out: dict[str, Any]) -> str:
    info = out["info"]
    lines = [
        f"ultron eval retrieval --suite conversations: {info['turns']} turns "
        f"(stored as {info['memories']} memories), "
        f"{info['questions']} questions; embedder {info['embedder']}; load {info['load_seconds']} s, "
        f"{info['search_ms']} ms/question (hub search)",
        f"{'group':<14} {'system':<6} {'n':>4} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'MRR':>6}",
    ]
    groups = ["overall", *CATEGORIES, "lang=en", "lang=zh", *(f"split={s}" for s in SPLITS)]
    for group in groups:
        for name in ("hub", "bm25", "dense"):
            s = out["systems"][name].get(group)
            if s is None:
                continue
            lines.append(
                f"{group:<14} {name:<6} {s.n:>4} {s.r(1):>6.3f} {s.r(5):>6.3f} {s.r(10):>6.3f} {s.mrr:>6.3f}"
            )
    hub = out["flagged"]["hub"]
    none_total = hub["quiet"] + hub["loud"]
    answered = hub["answered-confident"] + hub["answered-quiet"]
    lines.append(
        f"no-answer questions: hub returned nothing or only low-confidence results for "
        f"{hub['quiet']}/{none_total} ({hub['quiet'] / max(none_total, 1):.1%}); "
        f"answerable questions with an evidence turn among confident results: "
        f"{hub['answered-confident']}/{answered} ({hub['answered-confident'] / max(answered, 1):.1%})"
    )
    sup = out.get("superseded")
    if sup:
        lines.append(
            f"superseded facts: the current fact ranks first for {sup['current_first']}/{sup['pairs']} "
            f"({sup['current_first'] / max(sup['pairs'], 1):.1%}; en {sup['by_lang']['en'][0]}/"
            f"{sup['by_lang']['en'][1]}, zh {sup['by_lang']['zh'][0]}/{sup['by_lang']['zh'][1]}); "
            f"linked on upload {sup['linked']}, merged {sup['merged']}"
            + (f"; missed: {', '.join(sup['misses'])}" if sup["misses"] else "")
        )
    compared = hub["answer-first"] + hub["question-first"]
    lines.append(
        f"evidence above every question-only turn: {hub['answer-first']}/{compared} "
        f"({hub['answer-first'] / max(compared, 1):.1%}; questions with an evidence or a question-only turn "
        f"in the top {LIMIT})"
        + "".join(
            f"; {split} {first}/{first + hub[f'question-first/{split}']}"
            for split in SPLITS
            if (first := hub[f"answer-first/{split}"]) + hub[f"question-first/{split}"]
        )
    )
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    turns, questions = load_set(Path(args.set) if args.set else DEFAULT_SET)
    with scratch_database(args.database_url) as url:
        settings = Settings(
            database_url=url,
            data_dir=Path(tempfile.gettempdir()),
            embedding_provider=args.embedding_provider or "local",
            llm_provider="heuristic",
            hit_flush_seconds=0,
        )
        out = run(settings, turns, questions)
    if getattr(args, "dump", None):
        Path(args.dump).write_text(
            json.dumps(out["dump"], ensure_ascii=False, indent=1, default=str), encoding="utf-8"
        )
    if args.json:
        systems = {
            name: {
                g: {"n": s.n, **{f"recall@{k}": round(s.r(k), 4) for k in KS}, "mrr": round(s.mrr, 4)}
                for g, s in groups.items()
            }
            for name, groups in out["systems"].items()
        }
        flagged = {n: dict(c) for n, c in out["flagged"].items()}
        print(
            json.dumps(
                {
                    "info": out["info"],
                    "systems": systems,
                    "flagged": flagged,
                    "superseded": out["superseded"],
                },
                indent=2,
            )
        )
    else:
        print(format_report(out))
    return 0
