"""`ultron db stop`: stop the embedded PostgreSQL server of a data dir (hooked into the CLI's parser)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def cmd_db_stop(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.config import Settings
    from ultron.db.embedded import force_stop, pgdata_dir

    overrides = {"data_dir": args.data_dir} if getattr(args, "data_dir", None) else {}
    settings = Settings(**overrides)  # type: ignore[arg-type]
    if settings.database_url is not None:
        print("ULTRON_DATABASE_URL is set: there is no embedded server to stop", file=sys.stderr)
        return 1
    stopped = force_stop(settings.data_dir)
    where = pgdata_dir(settings.data_dir)
    print(f"embedded PostgreSQL in {where} {'stopped' if stopped else 'was not running'}", file=sys.stderr)
    return 0


def add_parser(db_subparsers: Any) -> None:
    p = db_subparsers.add_parser(
        "stop", help="stop the embedded PostgreSQL server (it also stops when its last user exits)"
    )
    p.add_argument("--data-dir", help="the data dir (default: ULTRON_DATA_DIR)")
    p.set_defaults(func=cmd_db_stop)
