"""`ultron export markdown DIR` and `ultron import markdown DIR`: through the hub as the caller's key (or
`--local`, in-process as `--agent`), like every command; the files are written and read here."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ultron.cli as cli

AddOptions = Callable[[argparse.ArgumentParser], None]


def cmd_export_markdown(args: argparse.Namespace) -> int:
    with cli._sdk(args) as client:
        memories, skills = client.export_markdown(args.directory)
    print(f"exported {memories} memories and {skills} skills to {args.directory}")
    return 0


def cmd_import_markdown(args: argparse.Namespace) -> int:
    with cli._sdk(args) as client:
        report = client.import_markdown(args.path)
    print(report.summary("imported"))
    for line in report.skipped:
        print(f"  skipped {line}")
    return 1 if report.skipped and not (report.created or report.updated) else 0


def _subparsers(sub: Any, name: str, help_text: str, dest: str) -> Any:
    """The subcommands of `ultron NAME`, created if no one has added that command yet."""
    if name in sub.choices:
        parser = sub.choices[name]
        return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.add_parser(name, help=help_text).add_subparsers(dest=dest, required=True)


def add_commands(sub: Any, add_common: AddOptions, add_remote: AddOptions) -> None:
    exports = _subparsers(sub, "export", "export memories", "export_command")
    p = exports.add_parser(
        "markdown", help="write a Markdown vault (Obsidian-compatible), one file per memory"
    )
    add_common(p)
    add_remote(p)
    p.add_argument("directory")
    p.set_defaults(func=cmd_export_markdown)
    imports = _subparsers(sub, "import", "import memories", "import_command")
    if "markdown" in imports.choices:
        # `ultron import markdown FILE` imports a Markdown chat export (ultron/ingestion); given a
        # directory, the same command reads a vault back.
        p = imports.choices["markdown"]
        p.set_defaults(func=_vault_or(p.get_default("func")))
        return
    p = imports.add_parser(
        "markdown", help="read a Markdown vault back (same ids; updates existing memories)"
    )
    add_common(p)
    add_remote(p)
    p.add_argument("path", metavar="DIRECTORY")
    p.set_defaults(func=cmd_import_markdown)


def _vault_or(other: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def dispatch(args: argparse.Namespace) -> int:
        return cmd_import_markdown(args) if Path(args.path).is_dir() else other(args)

    return dispatch
