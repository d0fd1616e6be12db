"""`ultron bench-clusters` at tiny sizes: the report's shape, its ratios, and no scratch database left."""

from __future__ import annotations

import json

import psycopg

from tests.conftest import _libpq
from ultron.cli import main


def test_bench_clusters_reports_each_size_against_the_smallest(pg_server_url, capsys):  # type: ignore[no-untyped-def]
    argv = ["bench", "clusters", "--database-url", pg_server_url, "--sizes", "300,30", "--probes", "20"]
    assert main([*argv, "--dimension", "64", "--pending", "5", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["clusters"] for r in rows] == [30, 300]  # sorted: the smallest is the baseline
    base = rows[0]
    assert base["p50_ratio"] == base["p95_ratio"] == base["probe_p50_ratio"] == base["exact_p50_ratio"] == 1.0
    for r in rows:
        assert r["probes"] == 20 and r["joined"] + r["started"] == 20
        assert r["joined"] >= 8 and r["started"] >= 8  # half the probes aim at a centroid, half at none
        assert 0 < r["p50_ms"] <= r["p95_ms"] and r["probe_p50_ms"] > 0 and r["exact_p50_ms"] > 0
        assert r["join_p50_ms"] > 0 and r["start_p50_ms"] > 0  # timed apart: joins and new clusters
        # the bare nearest-centroid kNN, timed on the same vectors: the baseline at each size
        assert 0 < r["knn_p50_ms"] <= r["knn_p95_ms"]
        assert abs(r["probe_vs_knn"] - r["probe_p50_ms"] / r["knn_p50_ms"]) < 0.01 * r["probe_vs_knn"] + 1e-3
        assert abs(r["assign_vs_knn"] - r["p50_ms"] / r["knn_p50_ms"]) < 0.01 * r["assign_vs_knn"] + 1e-3
        assert r["join_vs_knn"] > 0 and r["start_vs_knn"] > 0  # joins and new clusters apart
        # and against the bare kNN on a vector nothing probed before, timed just before each assignment
        assert r["cold_knn_p50_ms"] > 0 and r["join_vs_cold_knn"] > 0 and r["start_vs_cold_knn"] > 0
        cold = r["p50_ms"] / r["cold_knn_p50_ms"]
        assert abs(r["assign_vs_cold_knn"] - cold) < 0.01 * cold + 1e-3
        # cold against cold: the assignments timed first on their vector over the kNNs timed first on theirs
        first = r["assign_first_p50_ms"] / r["knn_first_p50_ms"]
        assert r["assign_first_p50_ms"] > 0
        assert abs(r["assign_first_vs_knn_first"] - first) < 0.01 * first + 1e-3
        join_ratio = r["join_p50_ms"] / base["join_p50_ms"]
        assert abs(r["join_p50_ratio"] - join_ratio) < 0.01 * join_ratio + 1e-3
        # every join updates its cluster's row; with 50 members a join at cosine 0.9 leaves the indexed
        # centroid alone, so (almost) all of those updates are HOT
        assert r["updates"] == r["joined"] and r["hot_updates"] >= r["joined"] - 2
        # new clusters wait for the worker (none runs in the bench): the 5 stored so and every new one
        assert r["unindexed"] >= 5 + r["started"]
        assert abs(r["p50_ratio"] - r["p50_ms"] / base["p50_ms"]) < 0.01 * r["p50_ratio"] + 1e-3
        assert abs(r["p95_ratio"] - r["p95_ms"] / base["p95_ms"]) < 0.01 * r["p95_ratio"] + 1e-3
    assert 0 < rows[0]["index_mb"] < rows[1]["index_mb"]
    with psycopg.connect(_libpq(pg_server_url)) as conn:
        left = conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'ultron_bench_clusters_%'")
        assert left.fetchall() == []


def test_bench_clusters_text_report(pg_server_url, capsys):  # type: ignore[no-untyped-def]
    argv = ["bench", "clusters", "--database-url", pg_server_url, "--sizes", "20,40", "--probes", "12"]
    assert main([*argv, "--dimension", "64"]) == 0
    out = capsys.readouterr().out
    assert "assignment at 40 clusters / at 20: p50 " in out and "the HNSW probe alone: p50 " in out
    assert "(joins " in out and "new clusters " in out
    assert "an exact scan over every cluster's mean" in out and "upd/HOT" in out
    assert "/ the bare pgvector kNN (ORDER BY centroid <=> v LIMIT 4)" in out and "target <= 1.2x" in out
    assert "20: p50 " in out and "40: p50 " in out  # the ratio at each size
    assert "/ the bare kNN, same vectors, the order of the two alternating (target <= 1.2x): 20: " in out
    assert "the assignments timed first on their vector / the bare kNNs timed first on theirs: 20: " in out
    assert "/ the bare kNN on a fresh vector timed just before it" in out and "cold kNN p50 " in out
    assert "unindexed clusters at the end, 20: " in out
