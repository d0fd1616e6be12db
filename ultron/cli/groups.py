"""`ultron groups ...`: list, create and delete groups, add and remove members, show an agent's groups.

Added to the parser by ultron/cli/__init__.py's build_parser. Each command works in-process (embedded or
`--database-url`, as the local admin agent unless `--agent`) or against a running hub (`--url`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import ultron.cli as cli


def _show(info: Any) -> None:
    members = ", ".join(info.members) or "-"
    print(f"{info.name:<24} members: {members}  memories: {info.memories}")


def cmd_list(args: argparse.Namespace) -> int:
    with cli._sdk(args) as client:
        groups = client.list_groups()
    if args.json:
        cli._print_json([g.model_dump(mode="json") for g in groups])
    for g in [] if args.json else groups:
        _show(g)
    return 0


def cmd_create(args: argparse.Namespace) -> int:
    with cli._sdk(args) as client:
        _show(client.create_group(args.name))
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    with cli._sdk(args) as client:
        client.delete_group(args.name)
    print(f"group {args.name} deleted")
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    with cli._sdk(args) as client:
        for member in args.members:
            info = client.add_to_group(args.name, member)
    _show(info)
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    with cli._sdk(args) as client:
        for member in args.members:
            info = client.remove_from_group(args.name, member)
    _show(info)
    return 0


def cmd_of(args: argparse.Namespace) -> int:
    with cli._sdk(args) as client:
        names = client.agent_groups(args.member)
    print("\n".join(names) if names else "(no groups)")
    return 0


def add_parser(sub: Any) -> None:
    def command(group: Any, name: str, help: str, func: Callable[[argparse.Namespace], int]) -> Any:
        p = group.add_parser(name, help=help)
        cli._add_common(p)
        cli._add_remote(p)
        p.set_defaults(func=func)
        return p

    groups = sub.add_parser(
        "groups", help="groups of agents that share group-scoped memories"
    ).add_subparsers(dest="groups_command", required=True)
    p = command(groups, "list", "every group (admin) or your own, with members", cmd_list)
    p.add_argument("--json", action="store_true")
    p = command(groups, "create", "create a group (admin)", cmd_create)
    p.add_argument("name")
    p = command(groups, "delete", "delete a group (admin; refused while it holds memories)", cmd_delete)
    p.add_argument("name")
    p = command(groups, "add", "add agents to a group (admin)", cmd_add)
    p.add_argument("name")
    p.add_argument("members", nargs="+", metavar="AGENT")
    p = command(groups, "remove", "remove agents from a group (admin)", cmd_remove)
    p.add_argument("name")
    p.add_argument("members", nargs="+", metavar="AGENT")
    p = command(groups, "of", "the groups of an agent (default: yourself)", cmd_of)
    p.add_argument("member", nargs="?", default=None, metavar="AGENT")
