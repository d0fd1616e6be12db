"""The `ultron` command line, run as a user would (a subprocess), against a real database."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ultron.cli import build_parser


def ultron(settings, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    env = {
        **os.environ,
        "ULTRON_DATABASE_URL": settings.database_url.get_secret_value(),
        "ULTRON_EMBEDDING_PROVIDER": "hash",
        "ULTRON_REDACTION_ENABLED": "false",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "ultron.cli", *args], env=env, capture_output=True, text=True, timeout=120
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_help_names_each_options_environment_variable():
    serve = build_parser()._subparsers._group_actions[0].choices["serve"].format_help()  # type: ignore[union-attr]
    for var in (
        "ULTRON_HOST",
        "ULTRON_PORT",
        "ULTRON_DATA_DIR",
        "ULTRON_DATABASE_URL",
        "ULTRON_EMBEDDING_PROVIDER",
    ):
        assert var in serve


def test_agents_memory_and_stats_round_trip(settings):
    created = ultron(settings, "agents", "create", "ci-bot", "--tenant", "acme")
    key = created.stdout.strip().splitlines()[-1]
    assert key.startswith("ult_")
    assert "ci-bot" in ultron(settings, "agents", "list").stdout

    up = json.loads(
        ultron(
            settings,
            "memory",
            "upload",
            "--agent",
            "ci-bot",
            "--content",
            "pytest collection error: import file mismatch",
            "--resolution",
            "delete __pycache__ and rerun",
            "--tag",
            "pytest",
        ).stdout
    )
    assert up["decision"] == "created" and up["record"]["memory_type"] == "error"
    found = json.loads(
        ultron(settings, "memory", "search", "--agent", "ci-bot", "import file mismatch", "--json").stdout
    )
    assert found[0]["record"]["id"] == up["record"]["id"]
    shown = json.loads(ultron(settings, "memory", "show", "--agent", "ci-bot", up["record"]["id"]).stdout)
    assert shown["resolution"] == "delete __pycache__ and rerun"
    stats = json.loads(ultron(settings, "stats").stdout)
    assert stats["embedding_model"].startswith("hash-v1")

    assert "revoked" in ultron(settings, "agents", "revoke", "ci-bot", "--tenant", "acme").stdout
    ultron(settings, "memory", "delete", "--agent", "ci-bot", up["record"]["id"])


def test_bad_input_gets_a_clear_message_not_a_traceback(settings):
    proc = ultron(settings, "memory", "show", "not-a-uuid", check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "error" in proc.stderr.lower()
    proc = ultron(settings, "memory", "upload", "--content", "   ", check=False)
    assert proc.returncode != 0 and "content must not be empty" in proc.stderr
    proc = ultron(settings, "agents", "revoke", "nobody", check=False)
    assert proc.returncode == 1 and "no agent 'nobody'" in proc.stderr


def test_serve_refuses_a_public_address_without_keys(settings):
    proc = ultron(settings, "serve", "--host", "0.0.0.0", check=False)
    assert proc.returncode == 2 and "refusing" in proc.stderr


@pytest.mark.parametrize("argv", [["bench", "--sizes", "300,600", "--queries", "20", "--upload-probe", "10"]])
def test_bench_prints_its_figures(settings, pg_server_url, argv):
    proc = subprocess.run(
        [sys.executable, "-m", "ultron.cli", *argv, "--database-url", pg_server_url],
        env={**os.environ, "ULTRON_REDACTION_ENABLED": "false"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "search p95 / raw kNN p95 at 600" in proc.stdout
    assert "upload cost at 600 / at 300" in proc.stdout
