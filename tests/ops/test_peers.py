"""`ultron bench-peers`: a tiny Ultron-vs-mem0 run when mem0 is installed, and the install hint when not."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import psycopg
import pytest

from tests.conftest import _libpq
from ultron.bench.peers import INSTALL_HINT, mem0_available
from ultron.cli import main


def test_without_mem0_the_command_says_how_to_install_it_and_exits_2():
    # mem0 made unimportable in a fresh interpreter (a None entry in sys.modules is how Python marks a
    # module as not importable): the command's own check runs, nothing of ours is replaced.
    code = (
        "import sys; sys.modules['mem0'] = None; from ultron.cli import main; "
        "sys.exit(main(['bench-peers', '--sizes', '10']))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert INSTALL_HINT in out.stderr and "pip install" in out.stderr and "mem0ai==2.2.1" in out.stderr
    assert out.stdout == ""


@pytest.mark.skipif(
    not mem0_available(), reason="mem0 is not installed (the optional extra 'peers': pip install '.[peers]')"
)
def test_tiny_run_measures_both_systems_side_by_side(pg_server_url, tmp_path, capsys):  # type: ignore[no-untyped-def]
    history = tmp_path / "mem0-history.db"
    argv = ["bench", "peers", "--database-url", pg_server_url, "--sizes", "100", "--uploads", "10"]
    argv += ["--searches", "10", "--dimension", "64", "--mem0-history", str(history), "--json"]
    assert main(argv) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["size"] == 100
    assert row["ultron_redaction"] is True and row["mem0_spacy"] is False  # the defaults on both sides
    warmup = 2
    for name in ("ultron", "mem0"):
        side = row[name]
        assert side["uploads"] == 10 and side["searches"] == 10
        assert 0 < side["upload_p50_ms"] <= side["upload_p95_ms"]
        assert 0 < side["search_p50_ms"] <= side["search_p95_ms"]
        assert side["searches_with_hits"] > 0  # the queries are words of the corpus: something is found
    # mem0 (infer=False) stores every upload; Ultron stores the created ones (dedup may merge a few).
    assert row["mem0"]["stored"] == 100 + warmup + 10
    created = row["ultron_decisions"].get("created", 0)
    assert 100 + created <= row["ultron"]["stored"] <= 100 + warmup + 10
    # the uploads' HNSW entries were the worker's index step, run and timed apart before the searches
    assert row["ultron"]["worker_indexed"] == row["ultron"]["stored"] - 100
    assert row["ultron"]["worker_index_ms"] > 0
    for key in ("upload_p50", "upload_p95", "search_p50", "search_p95"):
        assert row["ratio"][key] == pytest.approx(
            row["ultron"][f"{key}_ms"] / row["mem0"][f"{key}_ms"], rel=0.02
        )
    # mem0 wrote its history rows where it was told to: one ADD per single upload.
    with sqlite3.connect(history) as conn:
        assert conn.execute("SELECT count(*) FROM history WHERE event = 'ADD'").fetchone()[0] == warmup + 10
    with psycopg.connect(_libpq(pg_server_url)) as conn:
        left = conn.execute(
            "SELECT datname FROM pg_database "
            "WHERE datname LIKE 'ultron_peers_%' OR datname LIKE 'mem0_peers_%'"
        )
        assert left.fetchall() == []
