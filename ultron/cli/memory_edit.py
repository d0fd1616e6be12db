"""`ultron memory edit | pin | unpin | resolve | contributions`, and short ids for every memory command.

An id may be given in full or as a prefix of at least 6 hex characters (`ultron memory show dc066691`,
as a search line shows it): the hub resolves the prefix among the memories the caller may see.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any
from uuid import UUID

import ultron.cli as cli
from ultron.errors import NotFound, ValidationFailed

_FULL = re.compile(r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}")


def memory_id(client: Any, raw: str) -> UUID:
    """The full id `raw` names: itself when complete, else the one visible memory it is a prefix of."""
    text = raw.strip()
    if _FULL.fullmatch(text):
        return UUID(text)
    found = client.find_memory_ids(text)
    if not found:
        raise NotFound(f"no memory you may see has an id starting with {text!r}")
    if len(found) > 1:
        more = "" if len(found) < 10 else ", ..."
        raise ValidationFailed(
            f"id prefix {text!r} is ambiguous: {', '.join(str(i) for i in found)}{more}; give more characters"
        )
    return UUID(str(found[0]))


def print_record_line(record: Any, lead: str) -> None:
    print(f"{lead}  {record.id}  [{record.memory_type}/{record.tier}] {record.summary_l0}")


def _print(args: argparse.Namespace, record: Any, lead: str) -> None:
    if getattr(args, "json", False):
        cli._print_json(record.model_dump(mode="json"))
    else:
        print_record_line(record, lead)


def cmd_edit(args: argparse.Namespace) -> int:
    changes: dict[str, Any] = {
        key: value
        for key, value in {
            "content": args.content,
            "context": args.context,
            "resolution": args.resolution,
            "tags": args.tag,
            "importance": args.importance,
        }.items()
        if value is not None
    }
    if not changes:
        raise ValidationFailed(
            "nothing to change: give --content, --context, --resolution, --tag or --importance"
        )
    with cli._sdk(args) as client:
        record = client.edit_memory(memory_id(client, args.id), **changes)
    _print(args, record, "edited")
    return 0


def cmd_pin(args: argparse.Namespace) -> int:
    with cli._sdk(args) as client:
        target = memory_id(client, args.id)
        record = client.pin_memory(target) if args.pin else client.unpin_memory(target)
    _print(args, record, "pinned" if args.pin else "unpinned")
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    with cli._sdk(args) as client:
        record = client.resolve_memory(memory_id(client, args.id), resolved=not args.reopen)
    _print(args, record, "reopened" if args.reopen else "resolved")
    return 0


def cmd_contributions(args: argparse.Namespace) -> int:
    with cli._sdk(args) as client:
        target = memory_id(client, args.id)
        items = client.get_contributions(target)
    if args.json:
        cli._print_json([c.model_dump(mode="json") for c in items])
        return 0
    for c in items:
        similarity = f" {c.similarity:.3f}" if c.similarity is not None else ""
        when = f"{c.created_at:%Y-%m-%d %H:%M}"
        print(f"{c.id:>6}  {when}  {c.agent or '-'}  {c.decision}{similarity}  {c.content[:80]}")
    if len(items) > 1:
        print(f"undo a merge: `ultron memory split {str(target)[:8]} CONTRIBUTION` (the number on the left)")
    return 0


def add_parsers(memory: Any, *common: Callable[[argparse.ArgumentParser], None]) -> None:
    def command(name: str, help_text: str, func: Callable[[argparse.Namespace], int]) -> Any:
        p = memory.add_parser(name, help=help_text)
        for add in common:
            add(p)
        p.add_argument("id", help="the memory's id, or its first 6+ characters")
        p.add_argument("--json", action="store_true", help="print the whole record as JSON")
        p.set_defaults(func=func)
        return p

    p = command("edit", "change a memory's text, tags or importance (its author or an admin)", cmd_edit)
    p.add_argument("--content")
    p.add_argument("--context")
    p.add_argument("--resolution")
    p.add_argument("--tag", action="append", help="repeatable; replaces the memory's tags")
    p.add_argument("--importance", type=int, help="1 to 10")
    command("pin", "pin a memory: always in the brief, never archived", cmd_pin).set_defaults(pin=True)
    command("unpin", "unpin a memory", cmd_pin).set_defaults(pin=False)
    p = command("resolve", "mark a memory resolved (it sinks in search and the brief)", cmd_resolve)
    p.add_argument("--reopen", action="store_true", help="undo: the memory is open again")
    command(
        "contributions", "every upload merged into a memory (the ids `memory split` takes)", cmd_contributions
    )
