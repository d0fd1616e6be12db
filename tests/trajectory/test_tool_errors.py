"""Segment scoring sees tool errors in any case and the common shapes (issue 19): the Docker socket
"Error: permission denied" used to count as a success."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from tests.trajectory.test_pipeline import _ingest
from ultron.db.models import TaskSegment
from ultron.hub import build_worker
from ultron.ingestion.schemas import IngestFile
from ultron.trajectory.metrics import TOOL_ERROR

DOCKER = "Error: permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock"


@pytest.mark.parametrize(
    "text",
    [
        DOCKER,
        "ERROR: Could not find a version that satisfies the requirement torch==9.9",
        "npm ERR! code ELIFECYCLE",
        "[error] build broke on step 3",
        "Process exited with code 1",
        "exit status 2",
        '{"exit_code": 127, "stdout": "", "stderr": "sh: 1: foo: not found"}',
        '{"is_error": true, "content": "rate limited"}',
        '{"status": "error", "message": "quota exceeded"}',
        "subprocess returncode=1",
        '  File "app.py", line 3, in <module>',
        'FATAL:  password authentication failed for user "app"',
        "bash: kubectl: command not found",
        "E: Unable to locate package nodejs",
        "Build FAILED.",
        "curl: (7) Failed to connect to localhost port 8080: Connection refused",
        "cat: /etc/app.yaml: No Such File or Directory",
    ],
)
def test_error_shapes(text):
    assert TOOL_ERROR.search(text)


@pytest.mark.parametrize(
    "text",
    [
        "10 passed, 0 failed in 2.1s",
        "exit code 0",
        "All checks passed!",
        "no errors found",
        "Successfully installed pandas-2.2.2",
        '{"is_error": false, "content": "ok"}',
        "Found 0 errors in 12 files",
        "error_count = 0",
    ],
)
def test_successes_stay_successes(text):
    assert not TOOL_ERROR.search(text)


def test_the_docker_error_counts_through_ingest_and_scoring(make_hub):
    hub = make_hub(ingest_segment_inline=False)
    lines = [
        {"role": "user", "content": "Build the image and push it"},
        {
            "role": "assistant",
            "content": "Building.",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "sh", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": DOCKER},
        {
            "role": "assistant",
            "content": "Retrying with sudo.",
            "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "sh", "arguments": "{}"}}],
        },
        {
            "role": "tool",
            "tool_call_id": "c2",
            "content": "Successfully built 3f2a1b\nSuccessfully tagged app:1",
        },
        {"role": "assistant", "content": "Done: the image is built."},
    ]
    body = "\n".join(json.dumps(line) for line in lines).encode()
    _ingest(hub, IngestFile(name="docker.jsonl", content=body))
    build_worker(hub).process_due()
    with hub.db.session() as session:
        segment = session.execute(select(TaskSegment)).scalars().one()
    assert segment.metrics["tool_success"]["value"] == 0.5
    assert segment.metrics["errors_recovered"]["value"] == 1.0
