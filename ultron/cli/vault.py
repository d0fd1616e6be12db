"""`ultron export markdown DIR` and `ultron import markdown DIR` (in-process, as one agent)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import ultron.cli as cli

AddOptions = Callable[[argparse.ArgumentParser], None]


def _run(args: argparse.Namespace, fn: Callable[..., Any]) -> Any:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.hub import Hub
    from ultron.sdk._local import LocalBackend
    from ultron.vault.markdown import Vault

    hub = Hub.open(cli._settings(args))
    try:
        tenant = getattr(args, "tenant", None) or "default"
        # --agent names an existing agent: a vault command never creates one (nor its tenant).
        backend = LocalBackend(hub, agent=args.agent, tenant=tenant, owns_hub=False, create_agent=False)
        vault = Vault(hub.memory)
        with hub.db.session() as session:
            return fn(vault, session, backend.actor, hub)
    finally:
        hub.close()


SKILL_PAGE = 100


def tenant_skills(hub: Any, session: Any, actor: Any, written: list[str]) -> Iterator[tuple[str, str]]:
    """(slug, SKILL.md) of the latest version of every active skill of the tenant, a page at a time."""
    if getattr(hub, "skills", None) is None:
        return
    offset = 0
    while True:
        page = hub.skills.list_skills(
            session, actor.tenant_id, status="active", limit=SKILL_PAGE, offset=offset
        )
        for summary in page:
            skill = hub.skills.latest(session, actor.tenant_id, summary.slug, summary.version)
            written.append(summary.slug)
            yield summary.slug, hub.skills.skill_md(skill)
        if len(page) < SKILL_PAGE:
            return
        offset += SKILL_PAGE


def cmd_export_markdown(args: argparse.Namespace) -> int:
    skills: list[str] = []
    report = _run(
        args,
        lambda v, s, a, hub: v.export(s, a, Path(args.directory), tenant_skills(hub, s, a, skills)),
    )
    print(f"{report.summary('exported')} and {len(skills)} skills to {args.directory}")
    return 0


def cmd_import_markdown(args: argparse.Namespace) -> int:
    report = _run(args, lambda v, s, a, _hub: v.import_(s, a, Path(args.path)))
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


def add_commands(sub: Any, add_common: AddOptions) -> None:
    exports = _subparsers(sub, "export", "export memories", "export_command")
    p = exports.add_parser(
        "markdown", help="write a Markdown vault (Obsidian-compatible), one file per memory"
    )
    add_common(p)
    p.add_argument("directory")
    p.add_argument("--agent", default=None, help="export what this agent may see (default: the local agent)")
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
    p.add_argument("path", metavar="DIRECTORY")
    p.add_argument("--agent", default=None, help="import as this agent (default: the local agent)")
    p.set_defaults(func=cmd_import_markdown)


def _vault_or(other: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def dispatch(args: argparse.Namespace) -> int:
        return cmd_import_markdown(args) if Path(args.path).is_dir() else other(args)

    return dispatch
