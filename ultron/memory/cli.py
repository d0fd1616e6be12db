"""`ultron memory split` and `ultron memory repair-merges`: the parsers load nothing heavy (the CLI's
start-up stays fast); the work is in ultron/memory/repair.py and MemoryService.split."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def cmd_split(args: argparse.Namespace) -> int:
    from ultron.cli import _print_json, _sdk

    with _sdk(args) as client:
        result = client.split_memory(args.memory_id, args.contribution_id)
    _print_json(result.model_dump(mode="json"))
    return 0


def cmd_repair(args: argparse.Namespace) -> int:
    from ultron.cli import _settings
    from ultron.hub import Hub
    from ultron.memory.repair import repair

    hub = Hub.open(_settings(args))
    try:
        repair(hub, apply=args.apply)
    finally:
        hub.close()
    return 0


def add_parser(sub: Any, *common: Callable[[argparse.ArgumentParser], None]) -> None:
    """`memory split` and `memory repair-merges` under the `memory` command."""
    p = sub.add_parser("split", help="undo a merge: a contribution becomes its own memory again")
    for add in common:
        add(p)
    p.add_argument("memory_id")
    p.add_argument("contribution_id", type=int, help="from `GET /memories/{id}/contributions`")
    p.set_defaults(func=cmd_split)
    p = sub.add_parser(
        "repair-merges",
        help="find (and with --apply split back) merges today's rules would not make "
        "(opens the database in this process; the default tenant)",
    )
    common[0](p)
    p.add_argument("--apply", action="store_true", help="split them back (default: only print them)")
    p.set_defaults(func=cmd_repair)
