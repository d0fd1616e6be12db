"""Client-side path expansion for `ingest(paths)`: runs on the caller's machine, never on the hub's.

A named file is taken as it is (unless it is a symlink). A directory is walked recursively, keeping only
`.jsonl` files and skipping every symlink and every hidden segment below it (`.git/`, `.cache.jsonl`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ultron.ingestion.schemas import FileResult, IngestFile, IngestResult

SESSION_SUFFIX = ".jsonl"
# Files per request and bytes per request when the SDK sends over HTTP.
BATCH_FILES = 200
BATCH_BYTES = 8 * 1024 * 1024


@dataclass
class Expansion:
    files: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _walk(root: Path, out: Expansion) -> None:
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        for name in list(dirnames):
            if name.startswith(".") or (here / name).is_symlink():
                out.skipped.append(str(here / name))
                dirnames.remove(name)
        dirnames.sort()
        for name in sorted(filenames):
            path = here / name
            if name.startswith(".") or path.is_symlink():
                out.skipped.append(str(path))
            elif name.endswith(SESSION_SUFFIX):
                out.files.append(path)


def expand_paths(paths: Iterable[str | os.PathLike[str]]) -> Expansion:
    out = Expansion()
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_symlink():
            out.skipped.append(str(path))
        elif path.is_dir():
            _walk(path, out)
        elif path.is_file():
            out.files.append(path)
        else:
            out.errors.append(f"{path}: no such file or directory")
    out.files = list(dict.fromkeys(out.files))
    return out


def read_batches(files: list[Path], errors: list[str]) -> Iterator[list[IngestFile]]:
    """The files' contents in request-sized batches; unreadable files are added to `errors`."""
    batch: list[IngestFile] = []
    size = 0
    for path in files:
        try:
            data = path.read_bytes()
        except OSError as exc:
            errors.append(f"{path}: {exc.strerror or exc}")
            continue
        if batch and (len(batch) >= BATCH_FILES or size + len(data) > BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(IngestFile(str(path), data))
        size += len(data)
    if batch:
        yield batch


def ingest_paths(
    send: Callable[[list[IngestFile]], IngestResult], paths: Iterable[str | os.PathLike[str]]
) -> IngestResult:
    """Expand `paths` here, read the files here, and send their contents in batches; one merged result."""
    expansion = expand_paths(paths)
    errors = list(expansion.errors)
    results: list[FileResult] = []
    for batch in read_batches(expansion.files, errors):
        part = send(batch)
        results.extend(part.results)
        errors.extend(part.errors)
    return IngestResult(
        total_files=len(expansion.files),
        successful=sum(1 for r in results if r.status != "failed"),
        new_segments=sum(r.new_segments for r in results),
        results=results,
        errors=errors,
    )
