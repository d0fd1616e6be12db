"""`ultron memory split`, `ultron memory repair-merges` and `ultron memory upload-batch`: the parsers load
nothing heavy (the CLI's start-up stays fast); the work is in ultron/memory/repair.py, MemoryService.split
and the batch upload endpoint."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

import ultron.cli as cli
from ultron.cli.memory_edit import memory_id

# Items per request: the endpoint's limit.
BATCH_ITEMS = 500


def cmd_split(args: argparse.Namespace) -> int:
    with cli._sdk(args) as client:
        result = client.split_memory(memory_id(client, args.memory_id), args.contribution_id)
    cli._print_json(result.model_dump(mode="json"))
    return 0


def cmd_repair(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.hub import Hub
    from ultron.memory.repair import repair

    hub = Hub.open(cli._settings(args))
    try:
        repair(hub.db, hub.memory, apply=args.apply)
    finally:
        hub.close()
    return 0


def _chunks(path: str) -> Iterator[list[tuple[int, Any]]]:
    """(line number, parsed object or the reason it is not one) per non-blank line, BATCH_ITEMS at a
    time: a file of any size is read as it is sent, never whole."""
    chunk: list[tuple[int, Any]] = []
    with sys.stdin if path == "-" else open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                item: Any = json.loads(line)
            except ValueError as exc:
                item = ValueError(f"not JSON: {exc}")
            chunk.append((number, item))
            if len(chunk) == BATCH_ITEMS:
                yield chunk
                chunk = []
    if chunk:
        yield chunk


def cmd_upload_batch(args: argparse.Namespace) -> int:
    totals = {"created": 0, "merged": 0, "refused": 0}
    refusals: list[dict[str, Any]] = []
    with cli._sdk(args) as client:
        for chunk in _chunks(args.file):
            sendable = [(n, item) for n, item in chunk if isinstance(item, dict)]
            for n, item in chunk:
                if not isinstance(item, dict):
                    reason = str(item) if isinstance(item, ValueError) else "a line must hold a JSON object"
                    refusals.append({"line": n, "reason": reason})
            if not sendable:
                continue
            result = client.upload_batch([item for _, item in sendable])
            totals["created"] += result.created
            totals["merged"] += result.merged
            for r in result.results:
                if r.decision == "refused":
                    refusals.append({"line": sendable[r.index][0], "reason": r.reason})
    totals["refused"] = len(refusals)
    cli._print_json({**totals, "refusals": sorted(refusals, key=lambda r: r["line"])})
    return 1 if refusals else 0


def add_parser(sub: Any, *common: Callable[[argparse.ArgumentParser], None]) -> None:
    """`memory split` and `memory repair-merges` under the `memory` command."""
    p = sub.add_parser("split", help="undo a merge: a contribution becomes its own memory again")
    for add in common:
        add(p)
    p.add_argument("memory_id", help="the memory's id, or its first 6+ characters")
    p.add_argument(
        "contribution_id", type=int, help="the number `ultron memory contributions ID` shows on the left"
    )
    p.set_defaults(func=cmd_split)
    p = sub.add_parser(
        "upload-batch",
        help=f"upload the memories of a JSON Lines file ({BATCH_ITEMS} per request), de-duplicated as "
        "single uploads are",
    )
    for add in common:
        add(p)
    p.add_argument(
        "file", help="one upload per line: {content, context, resolution, tags, scope, ...}; - for stdin"
    )
    p.set_defaults(func=cmd_upload_batch)
    p = sub.add_parser(
        "repair-merges",
        help="find (and with --apply split back) merges today's rules would not make "
        "(opens the database in this process; the default tenant)",
    )
    common[0](p)
    p.add_argument("--apply", action="store_true", help="split them back (default: only print them)")
    p.set_defaults(func=cmd_repair)
