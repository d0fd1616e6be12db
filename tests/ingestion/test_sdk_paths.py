"""`ingest(paths)` expands paths on the caller's machine and sends contents, in-process and over HTTP."""

from __future__ import annotations

import os
import shutil

import pytest
from fastapi.testclient import TestClient

from tests.ingestion.conftest import SESSIONS
from ultron.api.app import create_app
from ultron.ingestion.paths import expand_paths
from ultron.sdk import Ultron
from ultron.tenancy import create_agent


@pytest.fixture()
def tree(tmp_path):  # type: ignore[no-untyped-def]
    """A directory of sessions with the things ingest must skip."""
    root = tmp_path / "sessions"
    (root / "2025" / "04").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / ".hidden-dir").mkdir()
    shutil.copy(SESSIONS / "openai_messages.jsonl", root / "run-1.jsonl")
    shutil.copy(SESSIONS / "claude_code.jsonl", root / "2025" / "04" / "run-2.jsonl")
    shutil.copy(SESSIONS / "codex_rollout.jsonl", root / ".git" / "packed.jsonl")
    shutil.copy(SESSIONS / "codex_rollout.jsonl", root / ".hidden-dir" / "run-3.jsonl")
    shutil.copy(SESSIONS / "codex_rollout.jsonl", root / ".cache.jsonl")
    (root / "notes.txt").write_text("not a session")
    outside = tmp_path / "outside.jsonl"
    shutil.copy(SESSIONS / "anthropic_blocks.jsonl", outside)
    os.symlink(outside, root / "link.jsonl")
    os.symlink(tmp_path, root / "loop")
    return root


def test_expansion_keeps_jsonl_and_skips_hidden_paths_and_symlinks(tree):
    found = expand_paths([tree])
    assert sorted(p.relative_to(tree).as_posix() for p in found.files) == [
        "2025/04/run-2.jsonl",
        "run-1.jsonl",
    ]
    skipped = {os.path.basename(s) for s in found.skipped}
    assert {".git", ".hidden-dir", ".cache.jsonl", "link.jsonl", "loop"} <= skipped
    named = expand_paths([tree / "notes.txt", tree / "link.jsonl", tree / "missing.jsonl"])
    assert [p.name for p in named.files] == ["notes.txt"]  # a file named explicitly is taken as it is
    assert len(named.skipped) == 1 and "no such file" in named.errors[0]


def test_hidden_segments_above_the_given_directory_do_not_count(tmp_path):
    root = tmp_path / ".claude" / "projects"
    root.mkdir(parents=True)
    shutil.copy(SESSIONS / "claude_code.jsonl", root / "s.jsonl")
    assert [p.name for p in expand_paths([root]).files] == ["s.jsonl"]


def test_in_process_sdk_ingest(hub, tree):
    with Ultron(hub=hub) as client:
        result = client.ingest([tree])
        assert (result.total_files, result.successful) == (2, 2)
        assert result.new_segments == 2
        assert client.ingest([tree]).results[0].status == "unchanged"
        assert client.process_trajectories()["scored"] == 2


def test_http_sdk_sends_contents_not_paths(hub, tree):
    with hub.db.session() as s:
        key = create_agent(s, "remote", "acme")[1]
    with TestClient(create_app(hub, allow_open=False)) as http:
        client = Ultron(base_url="http://testserver", api_key=key, transport=http._transport)
        result = client.ingest([tree, tree / "missing.jsonl"])
        assert (result.total_files, result.successful) == (2, 2)
        assert any("no such file" in e for e in result.errors)
        names = {r.name for r in result.results}
        assert names == {str(tree / "run-1.jsonl"), str(tree / "2025" / "04" / "run-2.jsonl")}
        text = client.ingest_text(
            "1. Error: pip install failed without network\n2. Fix: use the proxy settings"
        )
        assert text.memories_uploaded >= 1
        assert client.process_trajectories()["scored"] == 2
        status = client.import_history("claude", SESSIONS / "claude_export.json")
        assert (status.status, status.done) == ("done", 1)
