"""A skill directory as data: `{relative path: text}` with `SKILL.md` at its root.

The hub never opens a path it is given: clients read a directory and send its contents (JSON or a zip),
and write what they export. Every path is checked here, on both sides, before anything is stored or
written: relative, `/`-separated, no `..`, no hidden segment, no backslash, drive or control character.
"""

from __future__ import annotations

import io
import os
import re
import stat
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath

from ultron.errors import PayloadTooLarge, ValidationFailed
from ultron.validation import BIDI_CONTROLS

SKILL_MD = "SKILL.md"
MAX_FILES = 100  # files in one skill, SKILL.md included
MAX_TOTAL_BYTES = 5 * 1024 * 1024  # UTF-8 bytes of all files together (uncompressed)
MAX_PATH_CHARS = 255
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed entry times: the same skill always zips to the same bytes
_BAD_CHARS = re.compile(r"[\x00-\x1f\x7f\\:*?\"<>|]")
_SURROGATE = re.compile("[\ud800-\udfff]")
SKIPPED_DIRS = {"__pycache__", "node_modules"}


def check_path(path: str) -> str:
    """The path itself when it is a safe relative file path, else ValidationFailed saying why."""
    if not path or len(path) > MAX_PATH_CHARS:
        raise ValidationFailed(f"file path {path[:80]!r} must have 1..{MAX_PATH_CHARS} characters")
    if _BAD_CHARS.search(path):
        raise ValidationFailed(f"file path {path!r} has a backslash, colon, wildcard or control character")
    if any(ch in BIDI_CONTROLS for ch in path) or _SURROGATE.search(path):
        shown = path.encode("unicode_escape").decode()
        raise ValidationFailed(f"file path {shown!r} has a bidirectional control or an invalid character")
    if path.startswith("/"):
        raise ValidationFailed(f"file path {path!r} is absolute; paths are relative to the skill folder")
    for part in path.split("/"):
        if part in ("", ".", ".."):
            raise ValidationFailed(f"file path {path!r} has an empty, '.' or '..' segment")
        if part.startswith("."):
            raise ValidationFailed(f"file path {path!r} has a hidden segment ({part!r})")
        if part != part.strip() or part.endswith("."):
            raise ValidationFailed(f"file path {path!r} has a segment with surrounding spaces or a final dot")
    return path


def check_files(files: Mapping[str, str]) -> dict[str, str]:
    """Validate a whole skill: paths, SKILL.md present, count and size bounds, no NUL in text."""
    if len(files) > MAX_FILES:
        raise PayloadTooLarge(f"a skill has {len(files)} files; the limit is {MAX_FILES}")
    total = 0
    seen: dict[str, str] = {}
    for path, content in files.items():
        check_path(path)
        if not isinstance(content, str):
            raise ValidationFailed(f"{path}: content must be text")
        if "\x00" in content:
            raise ValidationFailed(f"{path}: binary content (a NUL character); skills hold text files only")
        folded = path.casefold()
        if folded in seen:
            raise ValidationFailed(f"{path!r} and {seen[folded]!r} differ only in case")
        seen[folded] = path
        total += len(content.encode("utf-8"))
        if total > MAX_TOTAL_BYTES:
            raise PayloadTooLarge(f"a skill's files exceed {MAX_TOTAL_BYTES} bytes together")
    for path in files:
        for parent in PurePosixPath(path).parents:
            if str(parent) != "." and str(parent) in files:
                raise ValidationFailed(f"{str(parent)!r} is both a file and the folder of {path!r}")
    if SKILL_MD not in files:
        raise ValidationFailed(f"a skill needs a {SKILL_MD} at its root")
    return dict(files)


def _decode(path: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValidationFailed(f"{path}: not UTF-8 text; skills hold text files only") from None


def _strip_root(files: dict[str, str]) -> dict[str, str]:
    """`slug/SKILL.md, slug/x` -> `SKILL.md, x`: a zip of the folder itself (as archive.zip makes)."""
    if SKILL_MD in files:
        return files
    roots = {p.split("/", 1)[0] for p in files}
    if len(roots) == 1 and all("/" in p for p in files):
        root = roots.pop()
        return {p[len(root) + 1 :]: c for p, c in files.items()}
    return files


def read_zip(data: bytes) -> dict[str, str]:
    """The files of a zipped skill; every entry checked before it is decompressed, sizes bounded."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError):
        raise ValidationFailed("the body is not a valid zip archive") from None
    entries = [i for i in archive.infolist() if not i.is_dir()]
    if len(entries) > MAX_FILES:
        raise PayloadTooLarge(f"the zip holds {len(entries)} files; the limit is {MAX_FILES}")
    for info in entries:
        check_path(info.filename)
        if stat.S_ISLNK(info.external_attr >> 16):
            raise ValidationFailed(f"{info.filename}: symbolic links are not accepted")
        if info.flag_bits & 0x1:
            raise ValidationFailed(f"{info.filename}: encrypted entries are not accepted")
    if sum(i.file_size for i in entries) > MAX_TOTAL_BYTES:
        raise PayloadTooLarge(f"the zip's files exceed {MAX_TOTAL_BYTES} bytes uncompressed")
    files: dict[str, str] = {}
    left = MAX_TOTAL_BYTES
    for info in entries:
        try:
            with archive.open(info) as fh:
                data = fh.read(left + 1)  # never trust the declared size: read at most what is left
        except (zipfile.BadZipFile, NotImplementedError, RuntimeError, OSError) as exc:
            raise ValidationFailed(f"{info.filename}: cannot be read ({exc})") from None
        left -= len(data)
        if info.filename in files:
            raise ValidationFailed(f"{info.filename}: appears twice in the zip")
        if left < 0:
            raise PayloadTooLarge(f"the zip's files exceed {MAX_TOTAL_BYTES} bytes uncompressed")
        files[info.filename] = _decode(info.filename, data)
    return check_files(_strip_root(files))


def write_zip(slug: str, files: Mapping[str, str]) -> bytes:
    """`{slug}/SKILL.md` plus the other files, ready to unzip into an agent's skills folder."""
    check_path(slug)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(files, key=lambda p: (p != SKILL_MD, p)):
            info = zipfile.ZipInfo(f"{slug}/{check_path(path)}", date_time=ZIP_EPOCH)
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, files[path].encode("utf-8"))
    return out.getvalue()


# --- the client's side: folders on this machine -----------------------------------------------------


def _walk(root: Path, at: Path) -> Iterator[Path]:
    for entry in sorted(at.iterdir()):
        if entry.name.startswith(".") or entry.is_symlink():
            continue  # hidden files (.git, .DS_Store) and links never leave the machine
        if entry.is_dir():
            if entry.name not in SKIPPED_DIRS:
                yield from _walk(root, entry)
        elif entry.is_file():
            yield entry


def read_dir(directory: str | os.PathLike[str]) -> dict[str, str]:
    """A skill folder (holding SKILL.md) as `{relative path: text}`, read on this machine."""
    root = Path(directory).expanduser()
    if not (root / SKILL_MD).is_file():
        raise ValidationFailed(f"{root} holds no {SKILL_MD}")
    files: dict[str, str] = {}
    total = 0
    for path in _walk(root, root):
        rel = path.relative_to(root).as_posix()
        if len(files) >= MAX_FILES:
            raise PayloadTooLarge(f"{root} holds more than {MAX_FILES} files")
        data = path.read_bytes()
        total += len(data)
        if total > MAX_TOTAL_BYTES:
            raise PayloadTooLarge(f"{root}'s files exceed {MAX_TOTAL_BYTES} bytes together")
        files[rel] = _decode(rel, data)
    return check_files(files)


def skill_dirs(directory: str | Path) -> list[Path]:
    """The folder itself when it holds SKILL.md, else each of its sub-folders that does."""
    root = Path(directory).expanduser()
    if (root / SKILL_MD).is_file():
        return [root]
    if not root.is_dir():
        raise ValidationFailed(f"{root} is not a folder")
    found = [d for d in sorted(root.iterdir()) if not d.name.startswith(".") and (d / SKILL_MD).is_file()]
    if not found:
        raise ValidationFailed(f"{root} holds no {SKILL_MD}, nor do its sub-folders")
    return found


def write_dir(directory: str | os.PathLike[str], slug: str, files: Mapping[str, str]) -> Path:
    """Write `DIR/<slug>/...`; every path checked, nothing written outside it or through a link."""
    check_path(slug)
    if "/" in slug:
        raise ValidationFailed(f"slug {slug!r} is not a single folder name")
    checked = {check_path(p): c for p, c in files.items()}
    target = Path(directory).expanduser() / slug
    if target.is_symlink():
        raise ValidationFailed(f"{target} is a symbolic link; refusing to write through it")
    target.mkdir(parents=True, exist_ok=True)
    base = target.resolve()
    for rel, content in checked.items():
        dest = target.joinpath(*rel.split("/"))
        if not dest.parent.resolve().is_relative_to(base) or dest.is_symlink():
            raise ValidationFailed(f"{rel}: would be written outside {target}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.parent.resolve().is_relative_to(base):
            raise ValidationFailed(f"{rel}: would be written outside {target}")
        dest.write_text(content, encoding="utf-8", newline="")
    return target
