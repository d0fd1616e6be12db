"""`ultron ingest DIR` through a hub that answers more slowly than the client waits (issue 32): every file
is stored, the progress shows on stderr, and the command says what it stored. Before, a fixed 60 s
timeout failed the command after the first 25 files and the other files were never sent."""

from __future__ import annotations

import json
import time

from sqlalchemy import func, select

from ultron.api.app import create_app
from ultron.cli import ingest_send, main
from ultron.db.models import SessionRecord
from ultron.tenancy import create_agent
from ultron.web.serve import LiveServer

FILES = 36
# Each ingest request takes the hub longer than the client's first wait (0.2 s) and less than its second
# (twice that): a busy hub, made the same on any machine. The hub still stores what it was sent.
HUB_SECONDS = 0.3


def test_ingest_of_a_directory_slower_than_the_client_timeout_stores_every_file(
    make_hub, tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(ingest_send, "SECONDS_PER_MB", 0.0)  # the first wait is --timeout itself
    hub = make_hub()
    stores = hub.ingestion.ingest_files

    def busy(*args, **kwargs):  # type: ignore[no-untyped-def]
        time.sleep(HUB_SECONDS)
        return stores(*args, **kwargs)

    hub.ingestion.ingest_files = busy  # this hub's service only: the route calls it per request
    folder = tmp_path / "runs"
    folder.mkdir()
    for n in range(FILES):
        rows = [
            {"role": "user", "content": f"task {n}: the build of module {n} fails"},
            {"role": "assistant", "content": f"Looking at module {n}."},
            {"role": "user", "content": "go on"},
            {"role": "assistant", "content": f"Fixed module {n}."},
        ]
        (folder / f"run-{n:02d}.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    with hub.db.session() as s:
        key = create_agent(s, "runner", "acme")[1]
    with LiveServer(create_app(hub, allow_open=False)) as url:
        code = main(["ingest", str(folder), "--url", url, "--api-key", key, "--timeout", "0.2"])
    out, err = capsys.readouterr()
    with hub.db.session() as s:
        stored = s.scalar(select(func.count()).select_from(SessionRecord))
    assert stored == FILES
    assert "sending them again" in err  # the hub was slower than the client's first wait
    assert code == 0, err
    assert out.count(".jsonl") == FILES and "failed" not in out
    assert f"{FILES}/{FILES}" in err  # the progress bar
    assert f"stored {FILES} of {FILES} files" in err and "by a request that timed out" in err
