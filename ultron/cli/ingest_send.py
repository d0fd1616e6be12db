"""How `ultron ingest` sends files so that every one arrives, and says which did.

Files go in small chunks (CHUNK_FILES files or CHUNK_BYTES bytes). Over HTTP each request waits
`--timeout` seconds plus SECONDS_PER_MB for each megabyte it carries: the hub segments what it stores
before it answers, which on long sessions takes minutes per megabyte. A request that times out is sent
again with twice the wait: the hub goes on with the first one, and storing a session is idempotent by its
digests, so the repeat finds the files stored ("unchanged") rather than storing them twice. A chunk that
still gets no answer, or an error, is reported file by file as failed -- and the next chunks are still sent.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import httpx

from ultron.errors import UltronError
from ultron.ingestion.schemas import FileResult, IngestFile, IngestResult

CHUNK_FILES = 25
CHUNK_BYTES = 512 * 1024
SECONDS_PER_MB = 240.0
RETRIES = 5  # waits of 1, 2, 4 ... 32 times the first: the hub is slow, not gone

Progress = Callable[[int, int, str], None]


def chunks(files: list[IngestFile]) -> list[list[IngestFile]]:
    out: list[list[IngestFile]] = []
    size = 0
    for f in files:
        if not out or len(out[-1]) >= CHUNK_FILES or (out[-1] and size + len(f.content) > CHUNK_BYTES):
            out.append([])
            size = 0
        out[-1].append(f)
        size += len(f.content)
    return out


def wait_for(part: list[IngestFile], base: float) -> float:
    return base + SECONDS_PER_MB * sum(len(f.content) for f in part) / 1e6


class Sender:
    """`send(files)` for ingest_paths: chunks, timeouts that fit, repeats, a running count on `bar`."""

    def __init__(self, backend: Any, total: int, bar: Progress, timeout: float | None, over_http: bool):
        self.backend = backend
        self.total = total
        self.bar = bar
        self.timeout = timeout
        self.over_http = over_http
        self.done = 0
        self.retried: set[str] = set()  # files a timed-out request may have stored before the repeat

    def _one(self, part: list[IngestFile]) -> IngestResult:
        if not self.over_http:
            result: IngestResult = self.backend.ingest_files(part)
            return result
        wait = wait_for(part, self.timeout or 60.0)
        for attempt in range(RETRIES + 1):
            try:
                result = self.backend.ingest_files(part, timeout=wait)
                return result
            except httpx.TimeoutException:
                if attempt == RETRIES:
                    raise
                self.retried.update(f.name for f in part)
                print(
                    f"no answer for {len(part)} files within {wait:.0f}s; sending them again with "
                    f"{2 * wait:.0f}s (the hub goes on with them; a repeat stores nothing twice)",
                    file=sys.stderr,
                )
                wait *= 2
        raise AssertionError("unreachable")

    def __call__(self, files: list[IngestFile]) -> IngestResult:
        merged = IngestResult(total_files=0, successful=0, new_segments=0, results=[], errors=[])
        for part in chunks(files):
            try:
                got = self._one(part)
            except (httpx.HTTPError, UltronError) as exc:
                reason = f"not confirmed by the hub: {type(exc).__name__}: {exc}".strip().rstrip(":")
                got = IngestResult(
                    total_files=len(part),
                    successful=0,
                    new_segments=0,
                    results=[FileResult(name=f.name, status="failed", error=reason) for f in part],
                    errors=[f"{f.name}: {reason}" for f in part],
                )
            merged.results.extend(got.results)
            merged.errors.extend(got.errors)
            self.done += len(part)
            self.bar(self.done, self.total, "ingest")
        return merged
