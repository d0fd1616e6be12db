"""The vault's files where they are read and written (the CLI's machine, or the hub's for --local): light
imports only, since the SDK and the CLI load this module at start-up."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ultron.errors import UltronError, ValidationFailed

# A vault file larger than this is not a memory (the hub caps a field at max_field_chars).
MAX_FILE_BYTES = 1_000_000


@dataclass
class VaultReport:
    written: int = 0
    created: int = 0
    updated: int = 0
    skipped: list[str] = field(default_factory=list)

    def add(self, other: VaultReport) -> None:
        self.written += other.written
        self.created += other.created
        self.updated += other.updated
        self.skipped += other.skipped

    def summary(self, verb: str) -> str:
        parts = [f"{verb} {self.written or self.created + self.updated} memories"]
        if self.created or self.updated:
            parts.append(f"({self.created} new, {self.updated} updated)")
        if self.skipped:
            parts.append(f"{len(self.skipped)} skipped")
        return " ".join(parts)


def _inside(root: Path, path: Path) -> Path:
    resolved = path.resolve()
    if resolved != root and root not in resolved.parents:
        raise ValidationFailed(f"{path} is outside the vault {root}")
    return resolved


# The reader could not read this file: the text after the marker says why (reported as skipped).
SKIPPED = "\x00skipped: "
IMPORT_CHUNK = 100  # files per import request


def write_files(root: Path, files: Iterable[tuple[str, str]]) -> int:
    """Write (vault path, text) pairs under root, every path checked to stay inside it; returns how many."""
    root = root.expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    written = 0
    for rel, text in files:
        path = _inside(root, root / rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written += 1
    return written


def _vault_files(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        # Hidden folders (.obsidian, .trash) hold settings, not memories; skills are the skill hub's.
        dirnames[:] = sorted(
            d
            for d in dirnames
            if not d.startswith(".") and not (here == root and d in ("skills", "entities"))
        )
        for name in sorted(filenames):
            path = here / name
            if name.endswith(".md") and not path.is_symlink():
                yield path


def read_files(directory: Path) -> Iterator[list[tuple[str, str]]]:
    """The memory files of a vault as (vault path, text), IMPORT_CHUNK at a time; a file that cannot be
    read becomes SKIPPED + why."""
    root = directory.expanduser().resolve()
    if not root.is_dir():
        raise ValidationFailed(f"{directory} is not a directory")
    chunk: list[tuple[str, str]] = []
    for path in _vault_files(root):
        rel = str(path.relative_to(root))
        try:
            _inside(root, path)
            if path.stat().st_size > MAX_FILE_BYTES:
                raise ValidationFailed(f"larger than {MAX_FILE_BYTES} bytes")
            chunk.append((rel, path.read_text(encoding="utf-8")))
        except (UltronError, UnicodeDecodeError, OSError) as exc:
            chunk.append((rel, SKIPPED + str(getattr(exc, "detail", exc))))
        if len(chunk) == IMPORT_CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
