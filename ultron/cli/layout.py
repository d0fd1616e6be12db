"""How the commands are laid out: groups, the old names that still work, and "did you mean" for a typo.

`ultron --help` lists few commands so a newcomer can read it; benchmarks live under `ultron bench`,
evaluations and calibrations under `ultron eval`, backup/restore/reembed under `ultron db`. The names they
had before keep working (scripts and old notes use them) but are not listed: `main` rewrites them before
parsing, which costs nothing at start-up.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence
from typing import Any, NoReturn

# old top-level name -> what it is now (the rest of the command line follows unchanged)
LEGACY: dict[str, tuple[str, ...]] = {
    "bench-batch": ("bench", "batch"),
    "bench-concurrency": ("bench", "concurrency"),
    "bench-start": ("bench", "start"),
    "bench-peers": ("bench", "peers"),
    "bench-clusters": ("bench", "clusters"),
    "bench-rebalance": ("bench", "rebalance"),
    "bench-ingest": ("bench", "ingest"),
    "dashboard-bench": ("bench", "dashboard"),
    "dashboard-screenshots": ("bench", "screenshots"),
    "dedup-calibration": ("eval", "dedup"),
    "cluster-calibration": ("eval", "clusters"),
    "backup": ("db", "backup"),
    "restore": ("db", "restore"),
    "reembed": ("db", "reembed"),
    "stats": ("memory", "stats"),
    "clusters": ("skills", "clusters"),
}
# groups that were commands with options of their own: `ultron bench --sizes ...` is `ultron bench core`
BARE_GROUP_DEFAULT = {"bench": "core", "eval": "retrieval"}


def rewrite_legacy(argv: Sequence[str]) -> list[str]:
    """The command line with an old command name replaced by its new one (options before it kept)."""
    args = list(argv)
    i = next((n for n, a in enumerate(args) if not a.startswith("-")), None)
    if i is None:
        return args
    name, rest = args[i], args[i + 1 :]
    if name in LEGACY:
        return [*args[:i], *LEGACY[name], *rest]
    if name == "privacy" and rest[:1] == ["eval"]:
        return [*args[:i], "eval", "privacy", *rest[1:]]
    if name in BARE_GROUP_DEFAULT and rest and rest[0].startswith("-") and rest[0] not in ("-h", "--help"):
        return [*args[:i], name, BARE_GROUP_DEFAULT[name], *rest]
    return args


def _suggestion(value: str, choices: Sequence[str], legacy: bool) -> str:
    names = list(choices) + (list(LEGACY) if legacy else [])
    close = difflib.get_close_matches(value, names, n=1, cutoff=0.6)
    if not close:
        prefixed = [n for n in choices if n.startswith(value[:3])] if len(value) >= 3 else []
        close = prefixed[:1]
    if not close:
        return ""
    spelled = " ".join(LEGACY.get(close[0], (close[0],)))
    return f"; did you mean '{spelled}'?"


class UltronParser(argparse.ArgumentParser):
    """argparse with a one-line "did you mean" for a mistyped command (subparsers inherit the class)."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if (
            isinstance(action, argparse._SubParsersAction)
            and action.choices is not None
            and value not in action.choices
        ):
            visible = [a.dest for a in action._choices_actions]
            top = self.prog == "ultron"
            hint = _suggestion(str(value), visible, legacy=top)
            listed = ", ".join(visible)
            raise argparse.ArgumentError(None, f"unknown command '{value}'{hint or f' (commands: {listed})'}")
        super()._check_value(action, value)

    def error(self, message: str) -> NoReturn:
        if message.endswith("required: COMMAND"):  # a bare group (`ultron bench`): show its commands
            self.exit(2, self.format_help() + f"{self.prog}: error: choose a command\n")
        self.exit(2, f"{self.prog}: error: {message}\n(`{self.prog} --help` lists what it takes)\n")


class Routed:
    """The top-level subparsers action as the modules that add commands see it: a command added under
    its old name (`bench-start`) is filed where it lives now (`bench start`), so those modules stay as
    they are. `extra` routes names that are not in LEGACY (`eval` itself becomes `eval retrieval`)."""

    def __init__(self, top: Any, groups: dict[str, Any], extra: dict[str, tuple[str, str]] | None = None):
        self._top, self._groups, self._extra = top, groups, extra or {}

    @property
    def choices(self) -> Any:
        return self._top.choices

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        where = self._extra.get(name) or LEGACY.get(name)
        if where is None:
            return self._top.add_parser(name, **kwargs)  # type: ignore[no-any-return]
        return self._group(where[0]).add_parser(where[1], **kwargs)  # type: ignore[no-any-return]

    def _group(self, name: str) -> Any:
        if name not in self._groups:  # a group a module added itself (`skills` before its `clusters`)
            parser = self._top.choices[name]
            self._groups[name] = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return self._groups[name]


def group(sub: Any, name: str, help_text: str) -> Any:
    """The subcommands of a new top-level group `ultron NAME`."""
    return sub.add_parser(name, help=help_text).add_subparsers(
        dest=f"{name}_command", metavar="COMMAND", required=True
    )


def visible_commands(parser: argparse.ArgumentParser) -> list[str]:
    """The top-level commands `ultron --help` lists."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [a.dest for a in sub._choices_actions]
