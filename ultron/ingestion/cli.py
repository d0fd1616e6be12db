"""Command line of ingestion and the Trajectory Hub: `ultron ingest`, `ultron import`, `ultron trajectory`,
`ultron bench-ingest`. Added to the parser by ultron/cli.py's build_parser."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any
from uuid import UUID

from ultron.ingestion.schemas import IMPORT_KINDS, ImportStatus, IngestResult, ReviewDecision

AddOptions = Callable[[argparse.ArgumentParser], None]


def _cli() -> Any:
    import ultron.cli as cli

    return cli


def _local(args: argparse.Namespace) -> Any:
    """The in-process backend (its hub and acting agent) for commands that read the hub directly."""
    from ultron.hub import Hub
    from ultron.sdk._local import LocalBackend

    return LocalBackend(Hub.open(_cli()._settings(args)), agent=args.agent)


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


def cmd_ingest(args: argparse.Namespace) -> int:
    with _cli()._sdk(args) as client:
        result = client.ingest(args.paths)
    if args.json:
        _cli()._print_json(result.model_dump(mode="json"))
    else:
        _print_ingest(result)
        for error in result.errors:
            if "line " not in error:
                print(f"error: {error}", file=sys.stderr)
    return 0 if result.successful == result.total_files and result.total_files else 1


def _show_progress(status: ImportStatus) -> None:
    _cli()._progress(status.done + status.failed, status.total, f"import {status.kind}")


def _print_status(status: ImportStatus) -> None:
    print(
        f"{status.id}  {status.kind}  {status.status}  {status.done}/{status.total} imported, "
        f"{status.failed} failed  ({status.name})"
    )


def cmd_import(args: argparse.Namespace) -> int:
    if args.url:
        with _cli()._sdk(args) as client:
            status = client.import_history(args.kind, args.path)
    else:
        from pathlib import Path

        backend = _local(args)
        try:
            data = Path(args.path).expanduser().read_bytes()
            status = backend._run(
                lambda s, a: backend.hub.ingestion.imports.start(s, a, args.kind, args.path, data)
            )
            print(f"import {status.id}: {status.total} conversations", file=sys.stderr)
            status = backend.hub.ingestion.imports.run(backend.actor, status.id, progress=_show_progress)
        finally:
            backend.close()
    _print_status(status)
    return 0 if status.failed == 0 else 1


def _import_action(args: argparse.Namespace) -> int:
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
                _cli()._print_json(outcome.model_dump(mode="json"))
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


def cmd_trajectory(args: argparse.Namespace) -> int:
    if args.trajectory_command == "process":
        with _cli()._sdk(args) as client:
            _cli()._print_json(client.process_trajectories(args.limit))
        return 0
    from ultron.trajectory import views

    backend = _local(args)
    try:
        if args.trajectory_command == "sessions":
            rows = backend._run(lambda s, a: views.list_sessions(s, a, limit=args.limit))
            if args.json:
                _cli()._print_json([r.model_dump(mode="json") for r in rows])
            for r in [] if args.json else rows:
                state = "pending" if r.needs_segmentation else "segmented"
                print(
                    f"{r.id}  {r.format:12} {r.message_count:6} msgs  {r.segments:3} segs  {state:9}  "
                    f"{r.source}"
                )
            return 0
        session_id = UUID(args.session) if args.session else None
        segs = backend._run(
            lambda s, a: views.list_segments(s, a, session_id=session_id, stage=args.stage, limit=args.limit)
        )
        if args.json:
            _cli()._print_json([r.model_dump(mode="json") for r in segs])
            return 0
        for g in segs:
            score = "  -  " if g.score is None else f"{g.score:.3f}"
            values = " ".join(
                f"{k}={v['value']:.2f}" for k, v in g.metrics.items() if v.get("value") is not None
            )
            print(f"{g.id}  {g.stage:10} {score}  [{g.start_seq}-{g.end_seq}] {g.topic[:50]}  {values}")
        return 0
    finally:
        backend.close()


def cmd_bench_ingest(args: argparse.Namespace) -> int:
    from ultron.ingestion.bench import run_ingest_benchmark

    return run_ingest_benchmark(args)


def add_commands(sub: Any, add_common: AddOptions, add_remote: AddOptions) -> None:
    p = sub.add_parser(
        "ingest", help="ingest session .jsonl files or directories (read here, sent to the hub)"
    )
    add_common(p)
    add_remote(p)
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--json", action="store_true")
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
        p = imports.add_parser(action, help=f"{action} import jobs (in-process)")
        add_common(p)
        p.add_argument("--agent", default=None)
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
    p = traj.add_parser("sessions", help="list sessions (in-process)")
    add_common(p)
    p.add_argument("--agent", default=None)
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_trajectory)
    p = traj.add_parser("segments", help="list task segments with their metric values (in-process)")
    add_common(p)
    p.add_argument("--agent", default=None)
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
