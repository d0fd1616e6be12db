"""`ultron bench dashboard`: API and page-load times of the dashboard at a given number of memories.

A throw-away hub on a fresh embedded database is bulk-filled (ultron/bench/core.py's COPY loader), its tiers
and hit counts spread as a used hub's are (10 % hot, 40 % warm, the rest cold; Zipf-like hits), its
memories put into heavy-tailed knowledge clusters with skills on the largest, then:
API timings are taken over HTTP on loopback (median and p95 of `--repeat` calls), and page loads in
headless Chromium, from navigation until the page's data is drawn.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

from ultron.api.app import create_app
from ultron.bench.core import Corpus, bulk_fill
from ultron.bench.screenshots import VIEWPORT, launch
from ultron.config import Settings
from ultron.db.vectors import drop_vector_index
from ultron.hub import Hub
from ultron.tenancy import local_actor
from ultron.web.serve import LiveServer

API_CASES = (
    ("list, first page (50)", "/api/dashboard/memories?limit=50"),
    ("list, page 2 by cursor", "CURSOR"),
    ("list, most used first", "/api/dashboard/memories?limit=50&sort=hits"),
    ("list, type + tier filter", "/api/dashboard/memories?limit=50&type=error&tier=hot"),
    ("list, text filter", "/api/dashboard/memories?limit=50&q=error"),
    ("map + clusters, fresh", "/api/dashboard/map?per_tier=300&fresh=true"),
    ("map, no clusters, fresh", "/api/dashboard/map?per_tier=300&max_clusters=0&fresh=true"),
    ("map, reused (30 s cache)", "/api/dashboard/map?per_tier=300"),
    ("overview (30 days), fresh", "/api/dashboard/overview?days=30&fresh=true"),
    ("overview, reused counts", "/api/dashboard/overview?days=30"),
    ("skills list", "/api/dashboard/skills"),
    ("skill detail (largest)", "SKILL"),
)
PAGE_CASES = (
    ("overview", "[data-testid=activity-chart]"),
    ("memories", "#memory-rows tr[data-id]"),
    ("map", "[data-testid=map-svg] circle.node"),
    ("skills", "[data-testid=skills-table] tr[data-slug]"),
)
# Clusters as online assignment leaves them: a few large, a long tail of small ones and singletons. A
# memory's cluster is floor(CLUSTER_KEYS * u^3) for a uniform u of its id: at 100k memories about 18,000
# clusters (15,000 of 2+), the largest with ~3,700 members; the SKILLS largest get a skill (two versions).
CLUSTER_KEYS = 20_000
SKILLS = 200


def spread_usage(hub: Any) -> None:
    """Tiers and hits as a hub in use has them, so the map and the 'most used' sort have work to do."""
    with hub.db.session() as s:
        # Rewriting 100k rows under the HNSW graph costs 100k graph inserts; and no dashboard read uses
        # the graph (the playground's search is not timed here), so it is dropped, not rebuilt.
        drop_vector_index(s)
        s.execute(
            text(
                "UPDATE memories SET "
                "tier = CASE WHEN r < 0.1 THEN 'hot' WHEN r < 0.5 THEN 'warm' ELSE 'cold' END, "
                # One bulk statement gives every row the same created_at; a year of history is realistic.
                "created_at = now() - make_interval(secs => ((r * 7919) % 1) * 365 * 86400), "
                "updated_at = now() - make_interval(secs => ((r * 104729) % 1) * 30 * 86400), "
                "hit_count = floor(power(1 - r, 4) * 200)::int, "
                "last_hit_at = now() - make_interval(secs => r * 30 * 86400) "
                "FROM (SELECT id, (abs(hashtext(id::text)) % 100000) / 100000.0 AS r FROM memories) x "
                "WHERE memories.id = x.id"
            )
        )
    with hub.db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE memories"))


# Bench-only bulk statements (run in order, one transaction): clusters by a hash of the memory id, their
# members, and two versions and two evolution records for each of the largest SKILLS clusters.
CLUSTER_FILL = (
    """
    CREATE TEMP TABLE bench_assign ON COMMIT DROP AS
    SELECT id AS memory_id,
           floor(:keys * power((abs(hashtext(id::text || 'c')) % 1000003) / 1000003.0, 3))::int AS k
    FROM memories WHERE tenant_id = :t AND status = 'active'
    """,
    """
    CREATE TEMP TABLE bench_clusters ON COMMIT DROP AS
    SELECT k, gen_random_uuid() AS id, count(*) AS n, row_number() OVER (ORDER BY count(*) DESC, k) AS rank
    FROM bench_assign GROUP BY k
    """,
    """
    INSERT INTO knowledge_clusters
        (id, tenant_id, topic, member_count, members_at_last_version, centroid_norm, skill_slug)
    SELECT id, :t, CASE WHEN rank <= :skills OR n >= 5 THEN 'bench topic ' || k ELSE '' END, n, n, 1,
           CASE WHEN rank <= :skills THEN 'bench-skill-' || k END
    FROM bench_clusters
    """,
    """
    INSERT INTO cluster_members (memory_id, cluster_id, tenant_id)
    SELECT a.memory_id, c.id, :t FROM bench_assign a JOIN bench_clusters c USING (k)
    """,
    """
    INSERT INTO skills (tenant_id, slug, version_major, version_minor, version_patch, name, description,
                        body, score, source_cluster_id)
    SELECT :t, 'bench-skill-' || c.k, 1, v.minor, 0, 'Bench skill ' || c.k, 'A benchmark skill',
           :body, 0.8 + 0.1 * v.minor, c.id
    FROM bench_clusters c CROSS JOIN (VALUES (0), (1)) v(minor)
    WHERE c.rank <= :skills
    """,
    """
    INSERT INTO evolution_records (tenant_id, cluster_id, skill_slug, old_version, new_version, old_score,
                                   new_score, status, trigger, finished_at)
    SELECT :t, c.id, 'bench-skill-' || c.k, v.old, v.new, v.old_score, v.new_score, 'published', v.trigger,
           now()
    FROM bench_clusters c
    CROSS JOIN (VALUES ('crystallize', NULL, '1.0.0', NULL::float, 0.8::float),
                       ('recrystallize', '1.0.0', '1.1.0', 0.8, 0.9))
        AS v(trigger, old, new, old_score, new_score)
    WHERE c.rank <= :skills
    """,
)


def spread_clusters(hub: Any, tenant_id: Any) -> tuple[int, int]:
    """Bulk clusters and skills (no vectors: no dashboard read uses them); returns (clusters, skills)."""
    body = "# Bench skill\n\n## When to use\n\n- always\n\n## Steps\n\n1. one\n2. two\n3. three\n"
    params = {"t": tenant_id, "keys": CLUSTER_KEYS, "skills": SKILLS, "body": body}
    with hub.db.session() as s:
        for statement in CLUSTER_FILL:
            s.execute(text(statement), params)
        clusters = s.execute(
            text("SELECT count(*) FROM knowledge_clusters WHERE tenant_id = :t"), params
        ).scalar_one()
        skills = s.execute(
            text("SELECT count(DISTINCT slug) FROM skills WHERE tenant_id = :t"), params
        ).scalar_one()
    with hub.db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for table in ("knowledge_clusters", "cluster_members", "skills", "evolution_records"):
            conn.execute(text(f"VACUUM ANALYZE {table}"))
    return int(clusters), int(skills)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def time_api(url: str, repeat: int) -> list[tuple[str, float, float, int]]:
    rows = []
    with httpx.Client(base_url=url, timeout=60) as client:
        cursor = client.get("/api/dashboard/memories?limit=50").json()["next_cursor"]
        skills = client.get("/api/dashboard/skills").json()["items"]
        largest = max(skills, key=lambda x: x["cluster_size"] or 0)["slug"] if skills else "none"
        special = {
            "CURSOR": f"/api/dashboard/memories?limit=50&cursor={cursor}",
            "SKILL": f"/api/dashboard/skills/{largest}",
        }
        for name, path in API_CASES:
            path = special.get(path, path)
            client.get(path).raise_for_status()  # warm caches and plans once
            times, size = [], 0
            for _ in range(repeat):
                start = time.perf_counter()
                resp = client.get(path)
                times.append((time.perf_counter() - start) * 1000)
                resp.raise_for_status()
                size = len(resp.content)
            rows.append((name, statistics.median(times), _pct(times, 0.95), size))
    return rows


def time_pages(url: str, repeat: int, shots: Path | None = None) -> list[tuple[str, float, float]]:
    from playwright.sync_api import sync_playwright  # optional: the browser part needs playwright

    rows = []
    with sync_playwright() as p:
        browser = launch(p)
        try:
            for name, selector in PAGE_CASES:
                times = []
                for _ in range(repeat + 1):
                    page = browser.new_page(viewport=VIEWPORT)
                    start = time.perf_counter()
                    page.goto(f"{url}/dashboard#/{name}")
                    page.wait_for_selector(selector, timeout=60_000)
                    times.append((time.perf_counter() - start) * 1000)
                    page.close()
                times = times[1:]  # the first load warms the browser's cache
                rows.append((name, statistics.median(times), _pct(times, 0.95)))
                if shots is not None:
                    page = browser.new_page(viewport=VIEWPORT)
                    page.goto(f"{url}/dashboard#/{name}")
                    page.wait_for_selector(selector, timeout=60_000)
                    page.wait_for_timeout(300)
                    shots.mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=str(shots / f"{name}-at-size.png"), full_page=True)
                    page.close()
        finally:
            browser.close()
    return rows


def run(args: argparse.Namespace, settings: Any) -> int:
    data_dir = Path(tempfile.mkdtemp(prefix="ultron-dashbench-"))
    data_dir.chmod(0o755)
    bench_settings = Settings.model_validate(
        {
            **settings.model_dump(),
            "database_url": None,
            "data_dir": data_dir,
            "embedding_provider": "hash",
            "llm_provider": "heuristic",
        }
    )
    hub = Hub.open(bench_settings)
    try:
        with hub.db.session() as s:
            actor = local_actor(s)
        fill = _timed(lambda: bulk_fill(hub, actor.tenant_id, actor.agent_id, Corpus(), args.size))
        spread_usage(hub)
        clusters, skills = spread_clusters(hub, actor.tenant_id)
        print(
            f"filled {args.size} memories in {fill / 1000:.1f} s; {clusters} clusters, {skills} skills",
            file=sys.stderr,
        )
        with LiveServer(create_app(hub, allow_open=True)) as url:
            api_rows = time_api(url, args.repeat)
            page_rows = time_pages(
                url, args.page_repeat, Path(args.screenshots) if args.screenshots else None
            )
    finally:
        hub.close()
        shutil.rmtree(data_dir, ignore_errors=True)
    print(report(args.size, api_rows, page_rows))
    return 0


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def report(
    size: int, api_rows: list[tuple[str, float, float, int]], page_rows: list[tuple[str, float, float]]
) -> str:
    lines = [
        f"ultron bench dashboard: {size:,} memories, hash embedder, loopback HTTP, headless Chromium",
        "",
    ]
    lines.append(f"{'API call':<28} {'p50':>9} {'p95':>9} {'bytes':>9}")
    lines += [f"{n:<28} {p50:>7.1f}ms {p95:>7.1f}ms {b:>9,}" for n, p50, p95, b in api_rows]
    lines.append("")
    lines.append(f"{'page load (until drawn)':<28} {'p50':>9} {'p95':>9}")
    lines += [f"{n:<28} {p50:>7.1f}ms {p95:>7.1f}ms" for n, p50, p95 in page_rows]
    return "\n".join(lines)
