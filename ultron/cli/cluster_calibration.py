"""`ultron eval clusters`'s parser: it loads nothing heavy (the CLI's start-up stays fast); the work
is in ultron/bench/cluster_calibration.py."""

from __future__ import annotations

import argparse
from typing import Any

SET_NAMES = ("all", "calibration", "heldout")  # calibration.SETS
ORDERS = 10  # calibration.ORDERS


def run_command(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.bench.cluster_calibration import run_command as run

    return run(args)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "cluster-calibration", help="cluster purity/completeness per join threshold on the topic set"
    )
    p.add_argument(
        "--embedding-provider",
        dest="embedding_provider",
        choices=["local", "hash", "dashscope", "openai"],
        help="embedding provider (default: ULTRON_EMBEDDING_PROVIDER, else local)",
    )
    p.add_argument(
        "--thresholds", help="LO:HI:STEP or a comma list (default: around the model's threshold in use)"
    )
    p.add_argument(
        "--set",
        choices=SET_NAMES,
        default="calibration",
        help="calibration (the thresholds were chosen on it), heldout (six other topics), or all of them",
    )
    p.add_argument("--orders", type=int, default=ORDERS, help=f"shuffled upload orders (default {ORDERS})")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=run_command)
