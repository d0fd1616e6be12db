"""`ultron demo`: fill a fresh store with a small mixed set and show three searches and a brief."""

from __future__ import annotations

import argparse
from typing import Any


def cmd_demo(args: argparse.Namespace) -> int:
    # start-up: the demo (it imports the hub) and pydantic-settings load only when the command runs
    from ultron.bench.tour import fresh_data_dir, run_demo
    from ultron.config import Settings

    data_dir = fresh_data_dir(args.data_dir)
    overrides: dict[str, Any] = {"data_dir": data_dir, "database_url": None, "database_replica_urls": None}
    if args.embedding_provider:
        overrides["embedding_provider"] = args.embedding_provider
    run_demo(Settings(**overrides), data_dir)
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="see it work in a minute: a fresh store of its own, filled, three searches and a brief",
    )
    p.add_argument(
        "--data-dir",
        dest="data_dir",
        help="a new or empty folder for the demo's store (default: a new temporary folder; never ~/.ultron)",
    )
    p.add_argument(
        "--embedding-provider",
        dest="embedding_provider",
        choices=["local", "hash"],
        help="the demo's embedder (default: local, the offline model)",
    )
    p.set_defaults(func=cmd_demo)
