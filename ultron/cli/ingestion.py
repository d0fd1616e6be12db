"""Command line of ingestion and the Trajectory Hub: `ultron ingest`, `ultron import`, `ultron trajectory`,
`ultron bench-ingest`. Added to the parser by ultron/cli/__init__.py's build_parser."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

import ultron.cli as cli
from ultron.bench.progress import progress
from ultron.ingestion.kinds import IMPORT_KINDS

if TYPE_CHECKING:  # the schemas (pydantic models) load when a command runs, not to build the parser
    from ultron.ingestion.schemas import ImportStatus, IngestResult

AddOptions = Callable[[argparse.ArgumentParser], None]


def _local(args: argparse.Namespace) -> Any:
    """The in-process backend (its hub and an existing acting agent), for `--local` runs."""
    return cli._local_backend(args)


def _print_ingest(result: IngestResult) -> None:
    for r in result.results:
        line = f"{r.status:9} {r.name}"
        if r.session_id:
            line += f"  ({r.format}, {r.messages} messages, +{r.new_messages} new, +{r.new_segments} segments"
            line += ", archived)" if r.archived else ", not archived)"
        print(line)
        for p in r.malformed_lines:
            print(f"          line {p.line}: {p.error}")
    print(
        f"{result.total_files} files, {result.successful} ingested, {result.new_segments} new segments, "
        f"{len(result.errors)} problems"
    )


def _print_stored(result: IngestResult, retried: set[str]) -> None:
    """What the hub holds now of the files, on stderr (the per-file lines went to stdout)."""
    by_status: dict[str, int] = {}
    for r in result.results:
        by_status[r.status] = by_status.get(r.status, 0) + 1
    stored = sum(n for k, n in by_status.items() if k != "failed")
    parts = ", ".join(f"{n} {k}" for k, n in sorted(by_status.items()) if k != "failed")
    line = f"stored {stored} of {result.total_files} files" + (f" ({parts})" if parts else "")
    again = sum(1 for r in result.results if r.name in retried and r.status == "unchanged")
    if again:
        line += f"; {again} of them were stored by a request that timed out, and confirmed by its repeat"
    unsent = result.total_files - len(result.results)
    failed = by_status.get("failed", 0) + unsent
    if failed:
        line += f"; {failed} NOT stored (listed above): run the same command again to send them"
    print(line, file=sys.stderr)


def cmd_ingest(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.cli.ingest_send import Sender
    from ultron.ingestion.paths import expand_paths, ingest_paths

    expansion = expand_paths(args.paths)
    if not expansion.files and not expansion.errors:
        skipped = f" ({len(expansion.skipped)} hidden or linked entries skipped)" if expansion.skipped else ""
        print(f"error: no session files (*.jsonl) under {' '.join(args.paths)}{skipped}", file=sys.stderr)
        return 1
    with cli._sdk(args) as client, cli.progress_bar() as bar:
        over_http = cli.hub_url(args) is not None
        send = Sender(client._backend, len(expansion.files), bar, args.timeout, over_http)
        bar(0, len(expansion.files), "ingest")
        result = ingest_paths(send, args.paths)
    if args.json:
        cli._print_json(result.model_dump(mode="json"))
    else:
        _print_ingest(result)
        for error in result.errors:
            if "line " not in error:
                print(f"error: {error}", file=sys.stderr)
        _print_stored(result, send.retried)
        if result.new_segments:
            print(
                f"next: the worker turns the {result.new_segments} new segments into memories "
                "(`ultron serve` runs it; see `ultron trajectory segments`, or run "
                "`ultron trajectory process` to do it now)"
            )
    return 0 if result.successful == result.total_files and result.total_files else 1


def _show_progress(status: ImportStatus) -> None:
    progress(status.done + status.failed, status.total, f"import {status.kind}")


def _print_status(status: ImportStatus) -> None:
    print(
        f"{status.id}  {status.kind}  {status.status}  {status.done}/{status.total} imported, "
        f"{status.failed} failed  ({status.name})"
    )


def cmd_import(args: argparse.Namespace) -> int:
    if cli.hub_url(args) is not None:
        with cli._sdk(args) as client, cli.progress_bar() as bar:
            status = client.import_history(args.kind, args.path, wait=False)
            while status.status == "running":
                bar(status.done + status.failed, status.total, f"import {status.kind}")
                time.sleep(0.5)
                status = client.import_status(status.id)
            bar(status.done + status.failed, status.total, f"import {status.kind}")
    else:
        backend = _local(args)
        try:
            data = Path(args.path).expanduser().read_bytes()
            status = backend._run(
                lambda s, a: backend.hub.ingestion.imports.start(s, a, args.kind, args.path, data)
            )
            print(f"import {status.id}: {status.total} conversations", file=sys.stderr)
            with cli.progress_bar() as bar:
                status = backend.hub.ingestion.imports.run(
                    backend.actor, status.id, progress=lambda st: bar(st.done + st.failed, st.total, "import")
                )
        finally:
            backend.close()
    _print_status(status)
    print(
        "next: review what was extracted with `ultron import review "
        f"{status.id}`, or search it with `ultron memory search ...`"
    )
    return 0 if status.failed == 0 else 1


def _import_action(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.ingestion.schemas import ReviewDecision

    if cli.hub_url(args) is not None:
        return _import_action_http(args)
    backend = _local(args)
    imports = backend.hub.ingestion.imports
    job_id = UUID(args.id) if getattr(args, "id", None) else None
    try:
        if args.import_command == "list":
            for status in backend._run(lambda s, a: imports.list_jobs(s, a)):
                _print_status(status)
            return 0
        assert job_id is not None
        if args.import_command == "review":
            decision = ReviewDecision(
                approve=[UUID(i) for i in args.approve], discard=[UUID(i) for i in args.discard]
            )
            if decision.approve or decision.discard:
                outcome = backend._run(lambda s, a: imports.review(s, a, job_id, decision))
                cli._print_json(outcome.model_dump(mode="json"))
            items = backend._run(lambda s, a: imports.review_list(s, a, job_id, limit=args.limit))
            for item in items:
                print(
                    f"{item.item_id}  {item.review_status or item.status:9}  {item.segments} segments  "
                    f"{len(item.memory_ids)} memories  {item.title}"
                )
            return 0
        action = {"status": imports.status, "pause": imports.pause, "resume": imports.resume}[
            args.import_command
        ]
        status = backend._run(lambda s, a: action(s, a, job_id))
        if args.import_command == "resume":
            status = imports.run(backend.actor, job_id, progress=_show_progress)
        _print_status(status)
        return 0
    finally:
        backend.close()


def _import_action_http(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.ingestion.schemas import ImportStatus, ReviewDecision

    with cli._sdk(args) as client:
        if args.import_command == "list":
            for status in client.list_imports():
                _print_status(status)
            return 0
        http = client._backend
        if args.import_command == "review":
            decision = ReviewDecision(
                approve=[UUID(i) for i in args.approve], discard=[UUID(i) for i in args.discard]
            )
            path = f"/imports/{UUID(args.id)}/review"
            if decision.approve or decision.discard:
                cli._print_json(http._request("POST", path, json=decision.model_dump(mode="json")))
            for item in http._request("GET", path, params={"limit": args.limit}):
                print(
                    f"{item['item_id']}  {item.get('review_status') or item['status']:9}  "
                    f"{item['segments']} segments  {len(item['memory_ids'])} memories  {item['title']}"
                )
            return 0
        if args.import_command == "status":
            _print_status(client.import_status(args.id))
            return 0
        data = http._request("POST", f"/imports/{UUID(args.id)}/{args.import_command}")
        _print_status(ImportStatus.model_validate(data))
        return 0


def cmd_trajectory(args: argparse.Namespace) -> int:
    if args.trajectory_command == "process":
        with cli._sdk(args) as client:
            cli._print_json(client.process_trajectories(args.limit))
        return 0
    with cli._sdk(args) as client:
        if args.trajectory_command == "sessions":
            rows = client.list_sessions(limit=args.limit)
            if args.json:
                cli._print_json([r.model_dump(mode="json") for r in rows])
            for r in [] if args.json else rows:
                state = "pending" if r.needs_segmentation else "segmented"
                print(
                    f"{r.id}  {r.format:12} {r.message_count:6} msgs  {r.segments:3} segs  {state:9}  "
                    f"{r.source}"
                )
            if not rows and not args.json:
                print("no sessions yet: `ultron ingest PATH` sends session logs to the hub")
            return 0
        session_id = UUID(args.session) if args.session else None
        segs = client.list_segments(session_id=session_id, stage=args.stage, limit=args.limit)
        if args.json:
            cli._print_json([r.model_dump(mode="json") for r in segs])
            return 0
        for g in segs:
            score = "  -  " if g.score is None else f"{g.score:.3f}"
            values = " ".join(
                f"{k}={v['value']:.2f}" for k, v in g.metrics.items() if v.get("value") is not None
            )
            print(f"{g.id}  {g.stage:10} {score}  [{g.start_seq}-{g.end_seq}] {g.topic[:50]}  {values}")
        if not segs:
            print("no segments")
        return 0


def cmd_bench_ingest(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.bench.ingestion import run_ingest_benchmark

    return run_ingest_benchmark(args)


def add_commands(sub: Any, add_common: AddOptions, add_remote: AddOptions) -> None:
    p = sub.add_parser(
        "ingest", help="ingest session .jsonl files or directories (read here, sent to the hub)"
    )
    add_common(p)
    add_remote(p)
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="wait per request, plus 240 s per MB it carries; a request that times out is sent again "
        "with twice the wait (default: 60)",
    )
    p.set_defaults(func=cmd_ingest)

    imports = sub.add_parser(
        "import", help="import chat histories; status, pause, resume, review"
    ).add_subparsers(dest="import_command", required=True)
    for kind in IMPORT_KINDS:
        p = imports.add_parser(kind, help=f"import a {kind} export")
        add_common(p)
        add_remote(p)
        p.add_argument("path")
        p.set_defaults(func=cmd_import, kind=kind)
    for action in ("status", "pause", "resume", "review", "list"):
        p = imports.add_parser(action, help=f"{action} import jobs")
        add_common(p)
        add_remote(p)
        if action != "list":
            p.add_argument("id")
        if action == "review":
            p.add_argument("--approve", action="append", default=[], metavar="ITEM_ID")
            p.add_argument("--discard", action="append", default=[], metavar="ITEM_ID")
            p.add_argument("--limit", type=int, default=100)
        p.set_defaults(func=_import_action)

    traj = sub.add_parser("trajectory", help="sessions, task segments and their processing").add_subparsers(
        dest="trajectory_command", required=True
    )
    p = traj.add_parser("process", help="segment, score and extract what is due now")
    add_common(p)
    add_remote(p)
    p.add_argument("--limit", type=int, default=100)
    p.set_defaults(func=cmd_trajectory)
    p = traj.add_parser("sessions", help="list sessions")
    add_common(p)
    add_remote(p)
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_trajectory)
    p = traj.add_parser("segments", help="list task segments with their metric values")
    add_common(p)
    add_remote(p)
    p.add_argument("--session", help="only this session's segments")
    p.add_argument("--stage", choices=["score", "extract", "done", "skipped", "superseded"])
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_trajectory)

    p = sub.add_parser("bench-ingest", help="ingestion throughput (messages/s) with offline providers")
    add_common(p)
    p.add_argument("--messages", type=int, default=10_000, help="messages in the one big session")
    p.add_argument("--files", type=int, default=1_000, help="number of small files")
    p.add_argument("--file-messages", type=int, default=12, help="messages per small file")
    p.set_defaults(func=cmd_bench_ingest)
