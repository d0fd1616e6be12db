"""Serendipity's threshold, calibrated per embedding model from the model's own score distribution.

A fixed relevance threshold cannot work across models: with the hash embedder an unrelated query scores
about 0, with multilingual-e5-small about 0.7 (e5's cosines live in a narrow band near the top). So the
hub embeds a small fixed set of probe topics, each as a query and as a memory, once per process and
model: cosine(query i, memory i) is a strong match, cosine(query i, memory j != i) an unrelated one. The
threshold sits halfway between the unrelated 95th percentile and the strong-match median, and is
compared with a search's best relevance scaled by its vector share (relevance = (1 - ft) x cosine +
ft x text rank, and an unrelated query has next to no text rank).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

# (query, memory) pairs on unrelated subjects, English and Chinese.
PROBES: tuple[tuple[str, str], ...] = (
    (
        "pip cannot find pandas in the cron job",
        "cron uses the system python; put the venv interpreter path in the crontab",
    ),
    (
        "nginx returns 502 bad gateway",
        "502 from nginx: the upstream gunicorn workers were not listening on the socket",
    ),
    (
        "how do I rotate TLS certificates",
        "renew the TLS certificate with certbot a week before it expires and reload nginx",
    ),
    (
        "kubernetes pod stuck in CrashLoopBackOff",
        "the pod crash-looped because the liveness probe hit /health before the app started",
    ),
    (
        "postgres query is slow on a large table",
        "add an index on orders(customer_id) and run ANALYZE; the planner used a seq scan",
    ),
    (
        "git rebase conflict in package-lock.json",
        "resolve lockfile conflicts by regenerating package-lock.json with npm install",
    ),
    ("my daughter's piano lesson time", "Lily's piano lesson moved to Thursday at five"),
    ("what food am I allergic to", "allergic to peanuts and shellfish"),
    ("plum dumpling recipe", "grandmother's plum dumplings need quark, semolina and a pinch of cinnamon"),
    ("flight seat preference", "always book an aisle seat on long flights"),
    (
        "docker build is slow",
        "order the Dockerfile so dependencies install before the source is copied, to reuse the cache",
    ),
    ("redis memory keeps growing", "keys without a TTL filled redis; set expiry on session keys"),
    ("数据库迁移什么时候做", "周五晚上十点做数据库迁移，提前通知业务方"),
    ("怎么配置 nginx 反向代理", "nginx 反向代理要设置 proxy_set_header Host 和 X-Real-IP"),
    ("孩子几点放学", "孩子下午四点半放学，周三提前到三点"),
    ("报销流程", "报销要先在系统里提交发票，再找部门经理审批"),
)


@dataclass(frozen=True)
class Calibration:
    model: str
    unrelated_p50: float
    unrelated_p95: float
    related_p50: float
    cosine_threshold: float

    def relevance_threshold(self, fulltext_weight: float) -> float:
        """The threshold on a search's fused relevance (its vector part)."""
        return (1.0 - fulltext_weight) * self.cosine_threshold


def calibrate(embedder: object) -> Calibration:
    queries = np.asarray(embedder.embed([q for q, _ in PROBES], kind="query"), dtype=np.float64)  # type: ignore[attr-defined]
    docs = np.asarray(embedder.embed([d for _, d in PROBES], kind="document"), dtype=np.float64)  # type: ignore[attr-defined]
    queries /= np.linalg.norm(queries, axis=1, keepdims=True) + 1e-12
    docs /= np.linalg.norm(docs, axis=1, keepdims=True) + 1e-12
    sims = queries @ docs.T
    related = np.diag(sims)
    unrelated = sims[~np.eye(len(PROBES), dtype=bool)]
    p95 = float(np.percentile(unrelated, 95))
    r50 = float(np.median(related))
    return Calibration(
        model=str(getattr(embedder, "model_name", "?")),
        unrelated_p50=round(float(np.median(unrelated)), 4),
        unrelated_p95=round(p95, 4),
        related_p50=round(r50, 4),
        cosine_threshold=round((p95 + r50) / 2.0, 4),
    )


_cache: dict[str, Calibration] = {}
_lock = threading.Lock()


def calibration_for(embedder: object) -> Calibration:
    """Computed once per process and model (a few dozen short embeddings)."""
    key = f"{getattr(embedder, 'model_name', '?')}:{getattr(embedder, 'dimension', '?')}"
    with _lock:
        if key not in _cache:
            _cache[key] = calibrate(embedder)
        return _cache[key]
