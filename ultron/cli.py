"""The `ultron` command line."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ultron.config import Settings
from ultron.errors import UltronError

log = logging.getLogger("ultron")


def _env(option: str) -> str:
    return f"(env: ULTRON_{option.upper()})"


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {k: v for k, v in vars(args).items() if k in Settings.model_fields and v is not None}
    return Settings(**overrides)


def _print_json(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2, default=str))


def _sdk(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from ultron.sdk import Ultron

    if args.url:
        return Ultron(base_url=args.url, api_key=args.api_key)
    return Ultron(settings=_settings(args), agent=args.agent)


# --- serve ---------------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from ultron.api.app import create_app
    from ultron.api.auth import is_loopback
    from ultron.hub import Hub
    from ultron.tenancy import count_active_keys

    settings = _settings(args)
    from ultron.ops.logs import configure_logging

    configure_logging(settings.log_level, settings.log_json)  # before start-up logs anything
    hub = Hub.open(settings)
    worker = None
    try:
        with hub.db.session() as session:
            keys = count_active_keys(session)
        loopback = is_loopback(settings.host)
        if keys == 0 and not loopback:
            print(
                f"refusing to listen on {settings.host} with no API keys: create one with "
                "`ultron agents create NAME`, or bind to 127.0.0.1",
                file=sys.stderr,
            )
            return 2
        if keys == 0:
            print(
                "WARNING: no API keys exist, so the hub runs OPEN on loopback as the local agent. "
                "Create a key with `ultron agents create NAME` to require keys.",
                file=sys.stderr,
            )
        print(
            f"Ultron on http://{settings.host}:{settings.port}  database: {hub.db.display_url()}",
            file=sys.stderr,
        )
        app = create_app(hub, allow_open=loopback)
        # uvicorn shuts down gracefully on SIGTERM, then re-raises the signal to the handler it found:
        # make that handler a normal exit, so the finally below releases the hub (flushes buffered
        # hits, stops the embedded server if this was its last user) and the exit status is 0.
        signal.signal(signal.SIGTERM, _exit_on_signal)
        from ultron.ops.logs import logging_config

        if args.with_worker:
            from ultron.worker.runner import BackgroundWorker

            worker = BackgroundWorker(hub)
        uvicorn.run(
            app,
            host=settings.host,
            port=settings.port,
            log_level=settings.log_level.lower(),
            log_config=logging_config(settings.log_level, settings.log_json),
        )
    except SystemExit as exc:
        return int(exc.code or 0)
    finally:
        if worker is not None:
            worker.close()
        hub.close()
    return 0


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(0)


# --- agents --------------------------------------------------------------------------------------


def _with_session(args: argparse.Namespace, fn: Callable[[Any], Any]) -> Any:
    from ultron.db.engine import open_database

    db = open_database(_settings(args))
    try:
        with db.session() as session:
            return fn(session)
    finally:
        db.dispose()


def cmd_agents_create(args: argparse.Namespace) -> int:
    from ultron.tenancy import create_agent

    info, key = _with_session(args, lambda s: create_agent(s, args.name, args.tenant, admin=args.admin))
    print(f"agent {info.name} (tenant {info.tenant}{', admin' if info.is_admin else ''}) created.")
    print("API key (shown once, store it now):")
    print(key)
    return 0


def cmd_agents_list(args: argparse.Namespace) -> int:
    from ultron.tenancy import list_agents

    agents = _with_session(args, lambda s: list_agents(s, args.tenant))
    for a in agents:
        state = "revoked" if a.revoked_at else ("no key" if a.key_prefix is None else "active")
        print(f"{a.tenant:<16} {a.name:<24} {state:<8} {a.key_prefix or '-':<14} admin={a.is_admin}")
    return 0


def cmd_agents_revoke(args: argparse.Namespace) -> int:
    from ultron.tenancy import revoke_agent

    info = _with_session(args, lambda s: revoke_agent(s, args.name, args.tenant))
    print(f"agent {info.name} (tenant {info.tenant}) revoked")
    return 0


# --- memories ------------------------------------------------------------------------------------


def cmd_memory_upload(args: argparse.Namespace) -> int:
    with _sdk(args) as client:
        result = client.upload(args.content, args.context, args.resolution, args.tag or [])
    _print_json(result.model_dump(mode="json"))
    return 0


def cmd_memory_search(args: argparse.Namespace) -> int:
    with _sdk(args) as client:
        results = client.search_memories(
            args.query,
            tier=args.tier,
            limit=args.limit,
            detail_level=args.detail_level,
            explain=args.explain,
        )
    if args.json:
        _print_json([r.model_dump(mode="json") for r in results])
        return 0
    for r in results:
        rec = r.record
        print(f"{r.score:.4f}  {rec.id}  [{rec.memory_type}/{rec.tier}] {rec.summary_l0}")
        if args.explain and r.explain:
            e = r.explain
            print(
                f"          vector={e.vector_similarity:.4f} text={e.text_rank:.4f} "
                f"relevance={e.relevance:.4f} tier_boost={e.tier_boost} hotness={e.hotness:.4f}"
            )
    return 0


def cmd_memory_show(args: argparse.Namespace) -> int:
    with _sdk(args) as client:
        record = client.get_memory(args.id)
    _print_json(record.model_dump(mode="json"))
    return 0


def cmd_memory_delete(args: argparse.Namespace) -> int:
    with _sdk(args) as client:
        client.delete_memory(args.id)
    print(f"deleted {args.id}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with _sdk(args) as client:
        _print_json(client.get_memory_stats().model_dump(mode="json"))
    return 0


# --- agents' tools ------------------------------------------------------------------------------


def cmd_mcp(args: argparse.Namespace) -> int:
    from ultron.mcp.stdio import serve_stdio

    # stdout is the MCP channel: everything else goes to stderr.
    serve_stdio(_sdk(args))
    return 0


# --- maintenance ---------------------------------------------------------------------------------


def cmd_backup(args: argparse.Namespace) -> int:
    from ultron.ops.backup import backup

    print(backup(_settings(args), Path(args.file)).describe("backed up to"))
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    from ultron.ops.backup import restore, upgrade_hint

    report = restore(_settings(args), Path(args.file), clean=args.clean)
    print(report.describe("restored from"))
    hint = upgrade_hint(report.revision)
    if hint:
        print(hint)
    return 0


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    from ultron.db.engine import open_database
    from ultron.db.migrate import current_revision

    db = open_database(_settings(args))
    try:
        print(f"database at revision {current_revision(db.engine)}")
    finally:
        db.dispose()
    return 0


def cmd_dashboard_screenshots(args: argparse.Namespace) -> int:
    from ultron.web.screenshots import main as take_screenshots

    return take_screenshots(args, _settings(args))


def cmd_dashboard_bench(args: argparse.Namespace) -> int:
    from ultron.web.bench import run

    return run(args, _settings(args))


def cmd_reembed(args: argparse.Namespace) -> int:
    from ultron.memory.reembed import reembed

    settings = _settings(args)
    moved = reembed(settings, batch_size=args.batch_size, progress=_progress)
    print(
        f"re-embedded {moved.memories} memories and {moved.skills} skill versions with "
        f"{settings.embedding_provider}; {moved.clusters} clusters kept with recomputed centroids"
    )
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from ultron.hub import build_embedder
    from ultron.memory import calibration
    from ultron.providers import heuristic

    settings = _settings(args)
    hard, soft = settings.dedup_thresholds
    report = calibration.run(build_embedder(settings), heuristic.same_subject, hard, soft)
    print(report.format())
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from ultron.bench import run_benchmark

    return run_benchmark(args)


def cmd_privacy_eval(args: argparse.Namespace) -> int:
    from ultron.privacy.evaluate import main as privacy_main

    return privacy_main(args.rest)


def _progress(done: int, total: int, what: str) -> None:
    width = 30
    filled = int(width * done / total) if total else width
    print(f"\r{what}: [{'#' * filled}{'.' * (width - filled)}] {done}/{total}", end="", file=sys.stderr)
    if done >= total:
        print(file=sys.stderr)


# --- parser --------------------------------------------------------------------------------------


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data-dir", dest="data_dir", help=f"data directory {_env('data_dir')}, default ~/.ultron"
    )
    p.add_argument("--database-url", dest="database_url", help=f"postgresql:// URL {_env('database_url')}")
    p.add_argument(
        "--embedding-provider",
        dest="embedding_provider",
        choices=["local", "hash", "dashscope", "openai"],
        help=f"embedding provider {_env('embedding_provider')}, default local",
    )
    p.add_argument(
        "--llm-provider",
        dest="llm_provider",
        choices=["heuristic", "dashscope", "openai"],
        help=f"LLM provider {_env('llm_provider')}, default heuristic",
    )


def _add_remote(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--url", default=os.environ.get("ULTRON_URL"), help="talk to a running hub (env: ULTRON_URL)"
    )
    p.add_argument(
        "--api-key", default=os.environ.get("ULTRON_API_KEY"), help="API key (env: ULTRON_API_KEY)"
    )
    p.add_argument("--agent", default=None, help="in-process: act as this agent (default: the local agent)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ultron", description="Ultron: a shared memory hub for AI agents")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("serve", help="run the HTTP hub")
    _add_common(p)
    p.add_argument("--host", help=f"bind address {_env('host')}, default 127.0.0.1")
    p.add_argument("--port", type=int, help=f"port {_env('port')}, default 8765")
    p.add_argument("--with-worker", action="store_true", help="also run the background worker (in a thread)")
    p.set_defaults(func=cmd_serve)

    agents = sub.add_parser("agents", help="manage agents and their API keys").add_subparsers(
        dest="agents_command", required=True
    )
    p = agents.add_parser("create", help="create an agent and print its API key")
    _add_common(p)
    p.add_argument("name")
    p.add_argument("--tenant", default="default", help="tenant (created if needed), default 'default'")
    p.add_argument("--admin", action="store_true", help="may edit and delete any memory of its tenant")
    p.set_defaults(func=cmd_agents_create)
    p = agents.add_parser("list", help="list agents")
    _add_common(p)
    p.add_argument("--tenant", default=None)
    p.set_defaults(func=cmd_agents_list)
    p = agents.add_parser("revoke", help="revoke an agent's key")
    _add_common(p)
    p.add_argument("name")
    p.add_argument("--tenant", default="default")
    p.set_defaults(func=cmd_agents_revoke)

    memory = sub.add_parser("memory", help="upload, search, show and delete memories").add_subparsers(
        dest="memory_command", required=True
    )
    p = memory.add_parser("upload", help="upload one memory")
    _add_common(p)
    _add_remote(p)
    p.add_argument("--content", required=True)
    p.add_argument("--context", default="")
    p.add_argument("--resolution", default="")
    p.add_argument("--tag", action="append", help="repeatable")
    p.set_defaults(func=cmd_memory_upload)
    p = memory.add_parser("search", help="search memories")
    _add_common(p)
    _add_remote(p)
    p.add_argument("query")
    p.add_argument("--tier", choices=["hot", "warm", "cold"])
    p.add_argument("--limit", type=int)
    p.add_argument("--detail-level", dest="detail_level", choices=["l0", "l1"], default="l0")
    p.add_argument("--explain", action="store_true", help="show every score component")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_memory_search)
    p = memory.add_parser("show", help="show one memory in full (no hit counted)")
    _add_common(p)
    _add_remote(p)
    p.add_argument("id")
    p.set_defaults(func=cmd_memory_show)
    p = memory.add_parser("delete", help="delete one memory for good")
    _add_common(p)
    _add_remote(p)
    p.add_argument("id")
    p.set_defaults(func=cmd_memory_delete)

    p = sub.add_parser("stats", help="memory counts by tier, type, status and scope")
    _add_common(p)
    _add_remote(p)
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("mcp", help="MCP server over stdio (Claude Desktop, Claude Code, any MCP client)")
    _add_common(p)
    _add_remote(p)
    p.set_defaults(func=cmd_mcp)

    db = sub.add_parser("db", help="database maintenance").add_subparsers(dest="db_command", required=True)
    p = db.add_parser("upgrade", help="migrate the database to the newest schema")
    _add_common(p)
    p.set_defaults(func=cmd_db_upgrade)

    p = sub.add_parser("backup", help="dump the whole database to FILE (pg_dump, custom format)")
    _add_common(p)
    p.add_argument("file")
    p.set_defaults(func=cmd_backup)
    p = sub.add_parser("restore", help="restore a backup in one transaction (stop the API and workers first)")
    _add_common(p)
    p.add_argument("file")
    p.add_argument("--clean", action="store_true", help="replace an existing Ultron database's contents")
    p.set_defaults(func=cmd_restore)

    p = sub.add_parser("reembed", help="move every memory to the configured embedding model")
    _add_common(p)
    p.add_argument("--batch-size", type=int, default=128)
    p.set_defaults(func=cmd_reembed)

    p = sub.add_parser("dashboard-screenshots", help="a PNG of every dashboard page, via headless Chromium")
    _add_common(p)
    _add_remote(p)
    p.add_argument("dir", help="folder for the PNG files")
    p.add_argument("--demo", action="store_true", help="photograph a throw-away hub filled with demo data")
    p.add_argument("--query", default="postgres connection refused", help="the search page's query")
    p.set_defaults(func=cmd_dashboard_screenshots)
    p = sub.add_parser("dashboard-bench", help="dashboard API and page-load times at N memories")
    _add_common(p)
    p.add_argument("--size", type=int, default=100_000, help="memories to load, default 100000")
    p.add_argument("--repeat", type=int, default=20, help="calls per API endpoint")
    p.add_argument("--page-repeat", dest="page_repeat", type=int, default=5, help="loads per page")
    p.add_argument("--screenshots", help="also save a PNG of each timed page at that size in this folder")
    p.set_defaults(func=cmd_dashboard_bench)

    p = sub.add_parser(
        "dedup-calibration", help="dedup precision/recall of the active model at its thresholds"
    )
    _add_common(p)
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("bench", help="upload and search benchmark (hash embedder, embedded Postgres)")
    p.add_argument(
        "--database-url", dest="database_url", help="benchmark on this server instead (a new database)"
    )
    p.add_argument("--sizes", default="1000,10000,100000", help="stored-memory sizes to measure at")
    p.add_argument("--queries", type=int, default=200, help="searches per size")
    p.add_argument("--upload-probe", type=int, default=200, help="single uploads timed at each size")
    p.add_argument("--dimension", type=int, default=256, help="hash embedding dimension")
    p.set_defaults(func=cmd_bench)

    from ultron.clusters.bench import add_parser as add_cluster_bench_parser

    add_cluster_bench_parser(sub)

    from ultron.worker.cli import add_parsers as add_worker_parsers

    add_worker_parsers(sub, _add_common, _settings)

    from ultron.ingestion.cli import add_commands as add_ingestion_commands

    add_ingestion_commands(sub, _add_common, _add_remote)
    from ultron.vault.cli import add_commands as add_vault_commands

    add_vault_commands(sub, _add_common)
    from ultron.skills.cli import add_commands as add_skills_commands

    add_skills_commands(sub, _add_common, _add_remote)
    from ultron.evaluation.retrieval import add_parser as add_eval_parser

    add_eval_parser(sub)
    from ultron.groups.cli import add_parser as add_groups_parser

    add_groups_parser(sub)

    privacy = sub.add_parser("privacy", help="redaction tools").add_subparsers(
        dest="privacy_command", required=True
    )
    p = privacy.add_parser("eval", help="precision/recall of redaction on the labelled corpus")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="options passed to the evaluator (--corpus PATH)")
    p.set_defaults(func=cmd_privacy_eval)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(message)s"
    )
    try:
        return int(args.func(args) or 0)
    except ValidationError as exc:
        print(f"error: invalid configuration or input:\n{exc}", file=sys.stderr)
        return 2
    except UltronError as exc:
        print(f"error: {exc.detail}", file=sys.stderr)
        return 1
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
