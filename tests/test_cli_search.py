"""`ultron memory search` as a person reads it: each result's confidence on the 0-1 relevance scale, and one
line saying so before the list when nothing is confident."""

from __future__ import annotations

import re

import pytest

from ultron.api.app import create_app
from ultron.cli import main
from ultron.memory.schemas import UploadRequest
from ultron.tenancy import authenticate, create_agent
from ultron.web.serve import LiveServer

TEXTS = [
    "pod keeps getting OOMKilled: the JVM heap grows past the container memory limit",
    "nginx returns 502 bad gateway when the upstream gunicorn worker times out",
    "git push rejected as non-fast-forward: pull with rebase first",
]
LINE = re.compile(r"^(high|low)\s+(\d\.\d\d)\s+[0-9a-f-]{36}\s+\[\w+/\w+\] .+$")


@pytest.fixture()
def remote(hub):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        _, key = create_agent(s, "reader", "people")
    with hub.db.session() as s:
        actor = authenticate(s, key)
    for t in TEXTS:
        with hub.db.session() as s:
            hub.memory.upload(s, actor, UploadRequest(content=t))
    with LiveServer(create_app(hub, allow_open=False)) as url:
        yield ["--url", url, "--api-key", key]


def _search(capsys, remote, query: str) -> list[str]:  # type: ignore[no-untyped-def]
    capsys.readouterr()
    assert main(["memory", "search", query, *remote]) == 0
    return capsys.readouterr().out.splitlines()


def test_each_result_shows_its_confidence_on_one_scale(remote, capsys):
    lines = _search(capsys, remote, "pod OOMKilled container memory limit")
    assert "nothing confident" not in lines[0]
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    assert parsed[0] and parsed[0].group(1) == "high" and "OOMKilled" in lines[0]
    assert all(0 <= float(m.group(2)) <= 1 for m in parsed if m)


def test_nothing_confident_is_said_before_the_closest_matches(remote, capsys):
    lines = _search(capsys, remote, "What is Maya's favourite movie?")
    assert lines[0] == "nothing confident found; closest matches:"
    assert lines[1:] and all((m := LINE.match(line)) and m.group(1) == "low" for line in lines[1:])
