"""Command line of the Skill Hub and knowledge clusters: `ultron skills ...`, `ultron skills clusters ...`.

Added to the parser by ultron/cli/__init__.py's build_parser. Each command works in-process (embedded or
`--database-url`) or against a running hub (`--url`), through the SDK.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import ultron.cli as cli
from ultron.skills.bundle import skill_dirs

AddOptions = Callable[[argparse.ArgumentParser], None]
PAGE = 500  # skills per request when exporting them all


def cmd_skills_search(args: argparse.Namespace) -> int:
    with cli._sdk(args) as client:
        hits = client.search_skills(args.query, limit=args.limit)
    if args.json:
        cli._print_json([h.model_dump(mode="json") for h in hits])
        return 0
    for h in hits:
        print(f"{h.similarity:.4f}  {h.slug}@{h.version}  {h.name}: {h.description}")
    if not hits:
        print(
            f"no skill matches {args.query!r} "
            "(skills grow from clusters of memories: `ultron skills clusters list`)"
        )
    return 0


def cmd_skills_list(args: argparse.Namespace) -> int:
    with cli._sdk(args) as client:
        skills = client.list_skills(status=args.status, limit=args.limit, offset=args.offset)
    if args.json:
        cli._print_json([s.model_dump(mode="json") for s in skills])
        return 0
    if not skills:
        print(
            "no more skills"
            if args.offset
            else "no skills yet: they grow from clusters of similar memories "
            "as the worker runs (`ultron skills clusters list` shows them)"
        )
    for s in skills:
        score = f"{s.score:.2f}" if s.score is not None else "-"
        print(f"{s.slug}@{s.version}  {s.status:<10} score={score}  {s.name}")
    return 0


def cmd_skills_show(args: argparse.Namespace) -> int:
    with cli._sdk(args) as client:
        detail = client.get_skill(args.slug, version=args.version)
        text = None if args.json else client.skill_md(args.slug, version=args.version)
    if args.json:
        cli._print_json(detail.model_dump(mode="json"))
        return 0
    print(f"# {detail.slug}@{detail.version} ({detail.status}), versions: {', '.join(detail.versions)}")
    if detail.files:
        print(f"# files: {', '.join(detail.files)}")
    print(text, end="")
    return 0


def cmd_skills_history(args: argparse.Namespace) -> int:
    with cli._sdk(args) as client:
        records = client.skill_history(args.slug, limit=args.limit)
    if args.json:
        cli._print_json([r.model_dump(mode="json") for r in records])
        return 0
    for r in records:
        change = f"{r.old_version or '-'} -> {r.new_version or '-'}"
        print(f"{r.started_at:%Y-%m-%d %H:%M}  {r.trigger:<13} {r.status:<14} {change:<18} {r.detail}")
    return 0


def cmd_skills_export(args: argparse.Namespace) -> int:
    if args.version and not args.slug:
        raise ValueError("--version needs --slug")
    with cli._sdk(args) as client:
        if args.slug:
            slugs = [args.slug]
        else:
            slugs, offset = [], 0
            while page := client.list_skills(status="active", limit=PAGE, offset=offset):
                slugs += [s.slug for s in page]
                offset += PAGE
        for slug in slugs:
            print(client.export_skill(slug, args.dir, version=args.version))
    if not slugs:
        print("no active skills to export")
    return 0


def cmd_skills_upload(args: argparse.Namespace) -> int:
    folders = skill_dirs(args.dir)
    with cli._sdk(args) as client:
        for folder in folders:
            result = client.upload_skill(folder)
            s = result.skill
            after = f" (after {result.previous_version})" if result.previous_version else ""
            print(f"{folder}: {s.slug}@{s.version}{after}, {len(s.files)} other files")
    return 0


def cmd_clusters_list(args: argparse.Namespace) -> int:
    with cli._sdk(args) as client:
        clusters = client.list_clusters(limit=args.limit, offset=args.offset)
    if args.json:
        cli._print_json([c.model_dump(mode="json") for c in clusters])
        return 0
    if not clusters:
        print("no clusters yet: each stored memory joins one")
        return 0
    print(f"{'cluster':<36}  {'members':>7}  {'skill':<24}  {'next':<12}  topic")
    for c in clusters:
        print(f"{c.id}  {c.member_count:>7}  {c.skill_slug or '-':<24}  {c.readiness or '-':<12}  {c.topic}")
    print(
        "next: what the worker's next skill pass does with the cluster: crystallize (a first skill), "
        "recrystallize (revise its skill); '-' nothing yet (too few members, or its skill is current)"
    )
    return 0


def cmd_clusters_show(args: argparse.Namespace) -> int:
    with cli._sdk(args) as client:
        cli._print_json(client.get_cluster(args.id).model_dump(mode="json"))
    return 0


def add_commands(sub: Any, add_common: AddOptions, add_remote: AddOptions) -> None:
    def command(group: Any, name: str, help: str, func: Callable[[argparse.Namespace], int]) -> Any:
        p = group.add_parser(name, help=help)
        add_common(p)
        add_remote(p)
        p.set_defaults(func=func)
        return p

    skills = sub.add_parser("skills", help="search, show, export and upload skills").add_subparsers(
        dest="skills_command", required=True
    )
    p = command(skills, "search", "skills nearest to a query (latest active versions)", cmd_skills_search)
    p.add_argument("query")
    p.add_argument("--limit", type=int, default=5)
    p.add_argument("--json", action="store_true")
    p = command(skills, "list", "the latest version of each skill, newest first", cmd_skills_list)
    p.add_argument("--status", choices=["active", "superseded", "all"], default="active")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--offset", type=int, default=0)
    p.add_argument("--json", action="store_true")
    p = command(skills, "show", "one skill: its SKILL.md, or everything with --json", cmd_skills_show)
    p.add_argument("slug")
    p.add_argument("--version", help="MAJOR.MINOR.PATCH, default the latest")
    p.add_argument("--json", action="store_true")
    p = command(skills, "history", "evolution records of a skill, newest first", cmd_skills_history)
    p.add_argument("slug")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--json", action="store_true")
    p = command(
        skills, "export", "write skills to DIR/<slug>/ (default: every active one)", cmd_skills_export
    )
    p.add_argument("dir")
    p.add_argument("--slug", help="only this skill")
    p.add_argument("--version", help="with --slug: this version, default the latest")
    p = command(
        skills, "upload", "upload a skill folder (holding SKILL.md) or a folder of them", cmd_skills_upload
    )
    p.add_argument("dir")

    clusters = sub.add_parser("clusters", help="knowledge clusters").add_subparsers(
        dest="clusters_command", required=True
    )
    p = command(clusters, "list", "non-empty clusters, largest first", cmd_clusters_list)
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--offset", type=int, default=0)
    p.add_argument("--json", action="store_true")
    p = command(clusters, "show", "one cluster with a sample of its members and its skill", cmd_clusters_show)
    p.add_argument("id")
