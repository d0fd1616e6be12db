"""`ultron ingest`, `ultron import`, `ultron trajectory`, run as a user would (a subprocess)."""

from __future__ import annotations

import json
import shutil

from tests.ingestion.conftest import SESSIONS
from tests.test_cli import ultron


def test_ingest_process_and_list_from_the_command_line(settings, tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    shutil.copy(SESSIONS / "multi_task.jsonl", root / "a.jsonl")
    shutil.copy(SESSIONS / "malformed.jsonl", root / "b.jsonl")
    (root / ".hidden.jsonl").write_text("{}")
    out = ultron(settings, "ingest", str(root)).stdout
    assert "created" in out and "line 2: not JSON" in out and "2 files, 2 ingested, 4 new segments" in out
    again = json.loads(ultron(settings, "ingest", str(root), "--json").stdout)
    assert [r["status"] for r in again["results"]] == ["unchanged", "unchanged"]

    counts = json.loads(ultron(settings, "trajectory", "process").stdout)
    assert counts["scored"] == 4 and counts["failed"] == 0
    sessions = ultron(settings, "trajectory", "sessions").stdout
    assert "a.jsonl" in sessions and "segmented" in sessions
    segments = json.loads(ultron(settings, "trajectory", "segments", "--json").stdout)
    assert len(segments) == 4 and all("completion" in s["metrics"] for s in segments)

    missing = ultron(settings, "ingest", str(tmp_path / "nowhere"), check=False)
    assert missing.returncode == 1 and "no such file" in missing.stderr


def test_import_status_and_review_from_the_command_line(settings):
    out = ultron(settings, "import", "chatgpt", str(SESSIONS / "chatgpt_conversations.json")).stdout
    assert "done  2/2 imported, 0 failed" in out
    job_id = out.split()[0]
    assert "done" in ultron(settings, "import", "status", job_id).stdout
    assert job_id in ultron(settings, "import", "list").stdout
    review = ultron(settings, "import", "review", job_id).stdout
    assert "Postgres connection pool exhausted" in review and "Trip to Kyoto" in review
    paused = ultron(settings, "import", "pause", job_id, check=False)
    assert paused.returncode == 1 and "only a running import" in paused.stderr
