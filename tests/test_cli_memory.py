"""`ultron memory` through a keyed hub: one-line upload, edit/pin/resolve/contributions, short ids; a
closed pipe; the small messages of the first hour (no skills yet, no -0.00s, a backup's missing folder)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import text

from tests.test_cli import _clean_env
from tests.worker.conftest import add_memories
from ultron.cli import main
from ultron.tenancy import create_agent


@pytest.fixture()
def keyed(hub) -> Iterator[dict[str, Any]]:  # type: ignore[no-untyped-def]
    """The hub served on loopback with keys required; one agent of tenant 'default', one of 'other'."""
    from ultron.api.app import create_app
    from ultron.web.serve import LiveServer

    with hub.db.session() as s:
        _, key = create_agent(s, "cli-bot", "default")
        _, other_key = create_agent(s, "other-bot", "other")
    with LiveServer(create_app(hub, allow_open=False)) as url:
        yield {"url": url, "key": key, "other_key": other_key, "remote": ["--url", url, "--api-key", key]}


def _run(capsys, *argv: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_upload_prints_one_line_and_every_memory_command_takes_a_short_id(keyed, hub, capsys):
    remote = keyed["remote"]
    code, out, err = _run(
        capsys, "memory", "upload", "--content", "pip install hangs behind the proxy", "--tag", "pip", *remote
    )
    assert code == 0, err
    assert len(out.splitlines()) == 1 and out.startswith("created ")
    full = out.split()[1]
    short = full[:8]
    code, out, _ = _run(
        capsys, "memory", "upload", "--content", "npm ci fails: EINTEGRITY", "--json", *remote
    )
    assert code == 0 and json.loads(out)["decision"] == "created"

    code, out, err = _run(capsys, "memory", "show", short, *remote)
    assert code == 0 and json.loads(out)["id"] == full, err
    code, out, err = _run(
        capsys,
        "memory",
        "edit",
        short,
        "--content",
        "pip install hangs: set PIP_PROXY",
        "--importance",
        "8",
        *remote,
    )
    assert code == 0 and out.startswith(f"edited  {full}"), err
    record = json.loads(_run(capsys, "memory", "show", full, *remote)[1])
    assert record["content"] == "pip install hangs: set PIP_PROXY" and record["importance"] == 8
    assert _run(capsys, "memory", "pin", short, *remote)[1].startswith(f"pinned  {full}")
    assert json.loads(_run(capsys, "memory", "show", short, *remote)[1])["pinned"] is True
    assert _run(capsys, "memory", "unpin", short, *remote)[1].startswith(f"unpinned  {full}")
    assert _run(capsys, "memory", "resolve", short, *remote)[1].startswith(f"resolved  {full}")
    assert json.loads(_run(capsys, "memory", "show", short, *remote)[1])["pinned"] is False
    code, out, _ = _run(capsys, "memory", "contributions", short, "--json", *remote)
    assert code == 0 and [c["decision"] for c in json.loads(out)] == ["created"]
    code, _, err = _run(capsys, "memory", "edit", short, *remote)
    assert code == 2 and "nothing to change" in err

    # Ambiguous within the tenant: both candidates named; another tenant's memory is never a candidate.
    _, ids = add_memories(hub, [{}, {}], tenant="default")
    _, [foreign] = add_memories(hub, [{}], tenant="other")
    wanted = ["abcdef01-0000-4000-8000-000000000001", "abcdef01-0000-4000-8000-000000000002"]
    with hub.db.session() as s:
        for old, new in [*zip(ids, wanted, strict=True), (foreign, "abcdef01-0000-4000-8000-000000000003")]:
            s.execute(text("UPDATE memories SET id = :new WHERE id = :old"), {"new": new, "old": old})
    code, _, err = _run(capsys, "memory", "show", "abcdef01", *remote)
    assert code == 2 and "ambiguous" in err and wanted[0] in err and wanted[1] in err
    assert "-000000000003" not in err and len(err.strip().splitlines()) == 1
    code, out, _ = _run(capsys, "memory", "show", "abcdef01-0000-4000-8000-00000000000", *remote)
    assert code == 2  # still two: ambiguous, bad input
    code, _, err = _run(capsys, "memory", "show", "abcdef01000040008000000000000003", *remote)
    assert code == 1 and "not found" in err
    code, _, err = _run(capsys, "memory", "show", "abc", *remote)
    assert code == 2 and "at least 6 hex characters" in err
    code, out, _ = _run(capsys, "memory", "delete", short, *remote)
    assert code == 0 and out.strip() == f"deleted {full}"


def test_a_closed_pipe_ends_quietly(keyed):
    proc = subprocess.Popen(
        [sys.executable, "-m", "ultron.cli", "memory", "stats", *keyed["remote"]],
        env=_clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    proc.stdout.close()  # the reader is gone before anything is written (`| head -0`)
    _, err = proc.communicate(timeout=60)
    assert "Broken pipe" not in err and "Traceback" not in err and "Exception ignored" not in err, err
    assert proc.returncode == 0


def test_empty_skills_and_worker_status_say_so_plainly(keyed, hub, capsys):
    code, out, _ = _run(capsys, "skills", "list", *keyed["remote"])
    assert code == 0 and out.startswith("no skills yet")
    with hub.db.session() as s:  # the run's end by the worker's clock, a hair before the database's start
        s.execute(
            text(
                "INSERT INTO worker_runs (cycle_id, worker_id, step, status, started_at, finished_at) "
                "VALUES (gen_random_uuid(), 'w', 'rebalance', 'ok', now(), now() - interval '1 millisecond')"
            )
        )
    code, out, _ = _run(capsys, "worker", "status", *keyed["remote"])
    assert code == 0 and "rebalance" in out
    assert "-0.00s" not in out and "0.00s" in out


def test_backup_into_a_missing_folder_is_one_clear_line(settings, tmp_path):
    env = _clean_env(ULTRON_DATABASE_URL=settings.database_url.get_secret_value())
    target = tmp_path / "nope" / "ultron.dump"
    proc = subprocess.run(
        [sys.executable, "-m", "ultron.cli", "db", "backup", str(target)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2  # bad input (the README's exit codes)
    assert proc.stderr.strip() == (
        f"error: cannot write {target}: the folder {target.parent} does not exist (create it first)"
    )
    assert not target.parent.exists()


def test_export_and_import_markdown_go_through_the_hub_with_the_callers_key(
    keyed, hub, capsys, tmp_path, monkeypatch
):
    remote = keyed["remote"]
    ids = []
    for content in (
        "terraform plan hangs on the state lock",
        "kubectl rollout stuck: check the readiness probe",
    ):
        ids.append(_run(capsys, "memory", "upload", "--content", content, *remote)[1].split()[1])
    other = ["--url", keyed["url"], "--api-key", keyed["other_key"]]
    assert _run(capsys, "memory", "upload", "--content", "the other tenant's secret recipe", *other)[0] == 0

    # the key from the environment, as a user sets it once
    monkeypatch.setenv("ULTRON_API_KEY", keyed["key"])
    vault = tmp_path / "vault"
    code, out, err = _run(capsys, "export", "markdown", str(vault), "--url", keyed["url"])
    assert code == 0, err
    assert out.startswith(f"exported 2 memories and 0 skills to {vault}")
    files = {p.name: p.read_text() for p in vault.rglob("*.md") if "entities" not in p.parts}
    assert len(files) == 2 and all(any(i in name for name in files) for i in ids)
    assert not any("secret recipe" in text for text in files.values())

    page = next(p for p in vault.rglob(f"*{ids[0]}.md"))
    page.write_text(
        page.read_text().replace("hangs on the state lock", "hangs on the state lock, force-unlock it")
    )
    assert _run(capsys, "memory", "delete", ids[1][:8], "--url", keyed["url"])[0] == 0
    code, out, err = _run(capsys, "import", "markdown", str(vault), "--url", keyed["url"])
    assert code == 0, err
    assert out.strip() == "imported 2 memories (1 new, 1 updated)"
    restored = json.loads(_run(capsys, "memory", "show", ids[1], "--url", keyed["url"])[1])
    assert restored["content"] == "kubectl rollout stuck: check the readiness probe"
    edited = json.loads(_run(capsys, "memory", "show", ids[0], "--url", keyed["url"])[1])
    assert edited["content"] == "terraform plan hangs on the state lock, force-unlock it"

    # through a hub the key is the agent: --tenant is refused in one line, not silently ignored
    code, _, err = _run(
        capsys, "export", "markdown", str(tmp_path / "x"), "--tenant", "other", "--url", keyed["url"]
    )
    assert code == 2 and "the API key is the agent and its tenant" in err
    assert not (tmp_path / "x").exists()
