"""`ultron ingest DIR` through a hub that answers more slowly than the client waits (issue 32): every file
is stored, the progress shows on stderr, and the command says what it stored. Before, a fixed 60 s
timeout failed the command after the first 25 files and the other files were never sent."""

from __future__ import annotations

import json
import time

from sqlalchemy import func, select

from tests.fakes.servers import FAKE_API_KEY
from ultron.api.app import create_app
from ultron.cli import main
from ultron.db.models import SessionRecord
from ultron.tenancy import create_agent
from ultron.web.serve import LiveServer

FILES = 36
LLM_SECONDS = 0.3  # per session segmented: 25 sessions take the hub far longer than the client's wait


def _slow_segmenter(messages):  # type: ignore[no-untyped-def]
    time.sleep(LLM_SECONDS)
    return "not JSON"  # the hub falls back to its heuristic splitter: only the time matters here


def test_ingest_of_a_directory_slower_than_the_client_timeout_stores_every_file(
    make_hub, fake_openai, tmp_path, capsys
):
    fake_openai.reply_fn = _slow_segmenter
    hub = make_hub(
        llm_provider="openai",
        llm_base_url=fake_openai.base_url,
        llm_api_key=FAKE_API_KEY,
        llm_model="fake-chat",
    )
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
