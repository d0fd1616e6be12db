"""`ultron worker [--once]`, `ultron worker status` and `ultron bench rebalance`."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ultron.cli as cli

if TYPE_CHECKING:
    from ultron.config import Settings

SettingsOf = Callable[[argparse.Namespace], "Settings"]


def add_parsers(
    sub: Any, add_common: Callable[[argparse.ArgumentParser], None], settings_of: SettingsOf
) -> None:
    p = sub.add_parser("worker", help="run the background worker, or show what it is doing")
    add_common(p)
    p.add_argument("action", nargs="?", choices=["run", "status"], default="run")
    p.add_argument("--once", action="store_true", help="run one full cycle and exit (cron, CronJob)")
    p.add_argument("--json", action="store_true", help="status: print JSON")
    p.add_argument(
        "--decay-interval-hours", dest="decay_interval_hours", type=float, help="hours between full cycles"
    )

    cli._add_remote(p)  # status reads the running hub (--local: the database)
    p.set_defaults(func=lambda args: cmd_worker(args, settings_of(args)))

    p = sub.add_parser("bench-rebalance", help="time the tier rebalance statement at growing sizes")
    p.add_argument("--database-url", dest="database_url", help="benchmark on this server (a new database)")
    p.add_argument("--sizes", default="100000,1000000", help="memory counts to measure at")
    p.add_argument("--repeat", type=int, default=3, help="steady-state runs per size")
    p.add_argument("--dimension", type=int, default=64, help="embedding dimension of the loaded rows")
    p.add_argument(
        "--no-hnsw", action="store_true", help="skip building the HNSW index (its build dominates at 1M)"
    )
    p.set_defaults(func=cmd_bench_rebalance)


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    if args.action == "status":
        return _print_status(args, as_json=args.json)
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.hub import Hub, build_worker
    from ultron.observability.logs import configure_logging

    configure_logging(settings.log_level, settings.log_json)  # JSON lines like the API's
    hub = Hub.open(settings)
    try:
        worker = build_worker(hub)
        # A signal becomes a graceful stop: the current item and step finish, then the worker returns.
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: worker.stop())
        if args.once:
            outcomes = worker.run_once()
            for o in outcomes:
                print(f"{o.step:<12} {o.status:<12} {json.dumps(o.counts)}", *o.errors, sep="\n  ")
            return 1 if any(o.status == "failed" for o in outcomes) else 0
        if settings.metrics_port is not None:
            # start-up: loaded when the command runs, not when the CLI builds its parser
            from ultron.observability.metrics import serve

            serve(settings.metrics_port)  # the worker has no HTTP API: a bare /metrics listener
        print(f"ultron worker {worker.id}  database: {hub.db.display_url()}", file=sys.stderr)
        worker.run_forever()
    finally:
        hub.close()
    return 0


def _print_status(args: argparse.Namespace, *, as_json: bool) -> int:
    with cli._sdk(args) as client:
        status = client.worker_status()
    if as_json:
        print(status.model_dump_json(indent=2))
        return 0
    print("workers:")
    for w in status.workers:
        state = "alive" if w.alive else ("stopped" if w.stopped_at else "silent")
        print(f"  {w.id:<40} {state:<8} heartbeat {w.heartbeat_at:%Y-%m-%d %H:%M:%S} {w.current_step or ''}")
    print("queues (ready / waiting / leased / parked):")
    for d in status.queues:
        print(f"  {d.queue:<8} tenant {d.tenant_id}  {d.ready} / {d.waiting} / {d.leased} / {d.parked}")
    print("recent runs:")
    for r in status.runs:
        # the two times come from different clocks (the worker's, the database's): never print -0.00s
        took = f"{max(0.0, (r.finished_at - r.started_at).total_seconds()):.2f}s" if r.finished_at else "..."
        print(
            f"  {r.started_at:%Y-%m-%d %H:%M:%S} {r.step:<12} {r.status:<12} {took:>8} {json.dumps(r.counts)}"
        )
        for e in r.errors:
            print(f"      ! {e}")
    print("parked items:")
    for p in status.parked:
        print(f"  {p.queue:<8} {p.id} tenant {p.tenant_id} attempts {p.attempts}: {p.last_error}")
    return 0


def cmd_bench_rebalance(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.bench.rebalance import run

    return run(args)
