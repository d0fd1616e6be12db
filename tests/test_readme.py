"""The README and docs/quickstart.md walk: their shell commands run as written, in order, against a fresh
data dir (each page its own hub).

The quick start's install step (`python3 -m venv .venv && .venv/bin/pip install .`) is not run: this test
runs inside the installed environment already. Its last step, `.venv/bin/ultron serve`, is what the test
starts in the background (on a free port, with a fresh data dir). Two substitutions make the commands
run here exactly as a user types them there: `.venv/bin/ultron` is a script running this checkout's
`ultron` with this interpreter, `.venv/bin/python` is this interpreter, and the port 8765 is the free
port. Blocks marked
`<!-- readme-walk: skip (why) -->` are not run, and each must say why.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(
    r"(?:<!--\s*readme-walk:\s*skip\s*(?P<why>\([^\n]*\))?\s*-->\n)?```bash\n(?P<body>.*?)```", re.S
)
QUICK_START = "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/ultron serve"
WALK_SECONDS = 600  # the whole walk: a fresh embedded server, the models loaded once, a dozen commands


WALKED = ("README.md", "docs/quickstart.md")
# What each walk did, seen from its output.
EXPECTED = {
    # the memory went in, search found it, the curl with the key got results, the ingested session is
    # listed, the admin's group lists its member
    "README.md": (
        re.compile(r"^created\s+[0-9a-f-]{36}  \[", re.M),
        re.compile(r"^pinned\s+[0-9a-f-]{36}  \[", re.M),  # by its short id
        "pip install times out behind the office proxy",
        "multi_task.jsonl",
        '"results":',
        "members: ci-bot",
    ),
    # search found the upload, the session is listed, the group lists its member, the SDK found its
    # memory, edited it and got a brief
    "docs/quickstart.md": (
        "pytest hangs forever in CI",
        "first-session.jsonl",
        "members: my-agent",
        "redis refused connections",
        "brief items",
    ),
}


def readme_blocks(page: str = "README.md") -> list[tuple[str | None, str, bool]]:
    """(why skipped or None, body, marked) for each ```bash block, in order."""
    text = (ROOT / page).read_text(encoding="utf-8")
    return [(m["why"], m["body"], m.group(0).startswith("<!--")) for m in BLOCK.finditer(text)]


@pytest.mark.parametrize("page", WALKED)
def test_every_skipped_block_says_why(page):
    for why, body, marked in readme_blocks(page):
        assert not marked or why, f"a skipped {page} block gives no reason:\n{body}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture()
def walk_dir() -> Iterator[Path]:
    """A fresh folder outside pytest's basetemp: concurrent pytest sessions on the box prune old
    basetemps, and a data dir removed under a running initdb fails the walk for no fault of the README."""
    path = Path(tempfile.mkdtemp(prefix="ultron-readme-walk-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("page", WALKED)
def test_the_readme_walks(walk_dir, page):
    tmp_path = walk_dir
    blocks = readme_blocks(page)
    assert blocks[0][1].strip() == QUICK_START, f"{page}'s first shell block is the quick start"
    walked = [body for why, body, marked in blocks[1:] if not marked]
    assert walked, "nothing left to walk"

    port = _free_port()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ultron = bin_dir / "ultron"
    ultron.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m ultron.cli "$@"\n')
    ultron.chmod(0o755)
    work = tmp_path / "work"  # the user's checkout: the README's relative paths resolve in it
    work.mkdir()
    (work / "tests").symlink_to(ROOT / "tests")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTRON_")}
    env.update(ULTRON_DATA_DIR=str(tmp_path / "home"), ULTRON_PORT=str(port), PYTHONPATH=str(ROOT))

    def as_here(body: str) -> str:
        return (
            body.replace(".venv/bin/ultron", str(ultron))
            .replace(".venv/bin/python", sys.executable)
            .replace(":8765", f":{port}")
        )

    log = tmp_path / "serve.log"
    with log.open("w") as sink:
        hub = subprocess.Popen(
            as_here(QUICK_START.rsplit("&& ", 1)[1]).split(), cwd=work, env=env, stdout=sink, stderr=sink
        )
    try:
        deadline = time.monotonic() + WALK_SECONDS
        while not _healthy(port):
            assert hub.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.3)
        script = "set -euo pipefail\n" + "\n".join(as_here(body) for body in walked)
        proc = subprocess.run(
            ["bash", "-c", script],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=max(30.0, deadline - time.monotonic()),
        )
        assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        assert "Traceback" not in proc.stderr, proc.stderr
        for expected in EXPECTED[page]:
            out = proc.stdout
            found = expected.search(out) if isinstance(expected, re.Pattern) else expected in out
            assert found, (expected, out[-3000:])
    finally:
        hub.terminate()
        hub.wait(timeout=60)
    assert hub.returncode == 0, log.read_text()


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
