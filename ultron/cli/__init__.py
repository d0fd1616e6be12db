"""The `ultron` command line."""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ultron.bench.batch import add_parser as add_batch_bench_parser
from ultron.bench.clusters import add_parser as add_cluster_bench_parser
from ultron.bench.concurrency import add_parser as add_concurrency_bench_parser
from ultron.bench.evaluation.retrieval import add_parser as add_eval_parser
from ultron.bench.peers import add_parser as add_peers_bench_parser
from ultron.bench.progress import progress_bar
from ultron.bench.start import add_parser as add_start_bench_parser
from ultron.cli import layout, memory_edit
from ultron.cli import memory as memory_cli
from ultron.cli.cluster_calibration import add_parser as add_cluster_calibration_parser
from ultron.cli.db import add_parser as add_db_stop_parser  # `ultron db stop`
from ultron.cli.demo import add_parser as add_demo_parser
from ultron.cli.groups import add_parser as add_groups_parser
from ultron.cli.ingestion import add_commands as add_ingestion_commands
from ultron.cli.layout import Routed, UltronParser
from ultron.cli.serving import check_port, claim_data_dir
from ultron.cli.skills import add_commands as add_skills_commands
from ultron.cli.vault import add_commands as add_vault_commands
from ultron.cli.worker import add_parsers as add_worker_parsers
from ultron.errors import Forbidden, UltronError, Unauthorized, ValidationFailed

if TYPE_CHECKING:  # pydantic-settings costs a tenth of a second: only commands that need it load it
    from ultron.config import Settings

log = logging.getLogger("ultron")


def _env(option: str) -> str:
    return f"(env: ULTRON_{option.upper()})"


def _settings(args: argparse.Namespace) -> Settings:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.config import Settings

    overrides = {k: v for k, v in vars(args).items() if k in Settings.model_fields and v is not None}
    return Settings(**overrides)


def _print_json(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2, default=str))


class NoHub(UltronError):
    """No hub to talk to and no explicit choice to open the database."""


HUB_RECORD = "hub.json"  # written by `ultron serve` in its data dir: {"url": ..., "pid": ...}


def _data_dir(args: argparse.Namespace) -> Path:
    raw = getattr(args, "data_dir", None) or os.environ.get("ULTRON_DATA_DIR") or "~/.ultron"
    return Path(raw).expanduser()


def record_hub(data_dir: Path, url: str) -> Path:
    """Write the running hub's URL where the CLI looks for it (removed again at shutdown)."""
    path = data_dir.expanduser() / HUB_RECORD
    path.write_text(json.dumps({"url": url, "pid": os.getpid()}))
    return path


def forget_hub(path: Path) -> None:
    try:
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


def recorded_hub(data_dir: Path) -> str | None:
    """The URL a live `ultron serve` recorded in `data_dir`, or None (none, or its process is gone)."""
    try:
        record = json.loads((data_dir / HUB_RECORD).read_text())
        os.kill(int(record["pid"]), 0)
        return str(record["url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def hub_url(args: argparse.Namespace) -> str | None:
    """Where this command goes: a hub URL, or None to open the database in this process.

    Order: `--local`; `--url` / ULTRON_URL; an explicit database (`--database-url` /
    ULTRON_DATABASE_URL); the hub `ultron serve` recorded in the data dir. Nothing else is guessed:
    with none of them the command stops before it creates a data dir or starts a database.
    """
    if getattr(args, "local", False):
        return None
    if getattr(args, "url", None):
        return str(args.url)
    if getattr(args, "database_url", None) or os.environ.get("ULTRON_DATABASE_URL"):
        return None
    recorded = recorded_hub(_data_dir(args))
    if recorded:
        return recorded
    raise NoHub(
        f"no running hub found (ULTRON_URL is unset and no `ultron serve` is recorded in {_data_dir(args)}): "
        "start one with `.venv/bin/ultron serve`, pass --url URL, or add --local to open the database "
        "in this process"
    )


def _sdk(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.sdk import Ultron

    url = hub_url(args)
    if url is not None:
        args.resolved_url = url
        if getattr(args, "agent", None) or getattr(args, "tenant", None):
            raise ValueError(
                f"--agent and --tenant act in-process (--local); through the hub at {url} the API key "
                "is the agent and its tenant"
            )
        return Ultron(base_url=url, api_key=getattr(args, "api_key", None))
    return Ultron._of(_local_backend(args))


def _local_backend(args: argparse.Namespace) -> Any:
    """The in-process backend acting as `--agent` of `--tenant`, which must exist (never created here)."""
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.hub import Hub
    from ultron.sdk._local import LocalBackend

    hub = Hub.open(_settings(args))
    try:
        return LocalBackend(
            hub,
            agent=getattr(args, "agent", None),
            tenant=getattr(args, "tenant", None) or "default",
            create_agent=False,
        )
    except BaseException:
        hub.close()
        raise


# --- serve ---------------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    import uvicorn

    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.api.app import create_app
    from ultron.hub import Hub, build_worker
    from ultron.observability.logs import configure_logging, logging_config
    from ultron.routing.auth import is_loopback
    from ultron.tenancy import count_issued_keys

    settings = _settings(args)
    configure_logging(settings.log_level, settings.log_json)  # before start-up logs anything
    # Before the database opens (seconds): a clash is the first and only line printed.
    claim = claim_data_dir(settings.data_dir.expanduser())
    check_port(settings.host, settings.port)
    hub = Hub.open(settings)
    worker = None
    record = None
    supervisor = None
    try:
        if hub.db.embedded_dir is not None:
            # start-up: loaded when the command runs, not when the CLI builds its parser
            from ultron.db.embedded import Supervisor

            supervisor = Supervisor(hub.db.embedded_dir).start()  # restarts a killed embedded server
        with hub.db.session() as session:
            keys = count_issued_keys(session)  # revoked keys count: they never reopen the hub
        loopback = is_loopback(settings.host)
        if keys == 0 and not loopback:
            print(
                f"refusing to listen on {settings.host} with no API keys: create one with "
                "`ultron agents create NAME`, or bind to 127.0.0.1",
                file=sys.stderr,
            )
            return 2
        app = create_app(hub, allow_open=loopback)
        # uvicorn shuts down gracefully on SIGTERM, then re-raises the signal to the handler it found:
        # make that handler a normal exit, so the finally below releases the hub (flushes buffered
        # hits, stops the embedded server if this was its last user) and the exit status is 0.
        signal.signal(signal.SIGTERM, _exit_on_signal)
        run_worker = not args.no_worker
        if run_worker:
            # start-up: loaded when the command runs, not when the CLI builds its parser
            from ultron.worker.runner import BackgroundWorker

            worker = BackgroundWorker(build_worker(hub))
        url = f"http://{_client_host(settings.host)}:{settings.port}"
        try:
            settings.data_dir.mkdir(parents=True, exist_ok=True)
            record = record_hub(settings.data_dir, url)
        except OSError as exc:  # a read-only home in a container: clients then use ULTRON_URL
            log.warning(
                "could not record the hub's URL in %s (%s): set ULTRON_URL for the CLI",
                settings.data_dir,
                exc,
            )
        print(banner(settings, url, keys, run_worker, hub.db.display_url()), file=sys.stderr)
        uvicorn.run(
            app,
            host=settings.host,
            port=settings.port,
            log_level=None,  # the levels come from log_config (uvicorn would reset its own loggers)
            log_config=logging_config(settings.log_level, settings.log_json),
        )
    except SystemExit as exc:
        return int(exc.code or 0)
    finally:
        if supervisor is not None:
            supervisor.close()  # before the hub releases the server: it must not start it again
        if record is not None:
            forget_hub(record)
        if worker is not None:
            worker.close()
        hub.close()
        if claim is not None:
            claim.close()
    return 0


def _client_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host


def banner(settings: Settings, url: str, keys: int, worker: bool, database: str) -> str:
    auth = (
        f"API keys required ({keys} active)"
        if keys
        else "the hub runs OPEN on loopback as the local agent (no API keys yet); require keys: "
        "`ultron agents create NAME`"
    )
    model = f" ({settings.embedding_model})" if settings.embedding_model else ""
    external = "" if settings.is_embedded else "  (unused: external database)"
    lines = [
        f"Ultron {url}",
        f"  dashboard  {url}/dashboard",
        f"  data dir   {settings.data_dir}{external}",
        f"  database   {database}",
        f"  auth       {auth}",
        f"  embedder   {settings.embedding_provider}{model}; LLM {settings.llm_provider}",
        "  worker     " + ("in this process" if worker else "not here (--no-worker): run `ultron worker`"),
        "  CLI        `.venv/bin/ultron memory stats` finds this hub; Ctrl+C stops it",
    ]
    return "\n".join(lines)


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(0)


# --- agents --------------------------------------------------------------------------------------


def _with_session(args: argparse.Namespace, fn: Callable[[Any], Any]) -> Any:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.db.engine import open_database

    db = open_database(_settings(args))
    try:
        with db.session() as session:
            return fn(session)
    finally:
        db.dispose()


def cmd_agents_create(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.tenancy import create_agent

    info, key = _with_session(args, lambda s: create_agent(s, args.name, args.tenant, admin=args.admin))
    print(f"agent {info.name} (tenant {info.tenant}{', admin' if info.is_admin else ''}) created.")
    print("API key (shown once, store it now):")
    print(key)
    return 0


def cmd_agents_list(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.tenancy import list_agents

    agents = _with_session(args, lambda s: list_agents(s, args.tenant))
    for a in agents:
        state = "revoked" if a.revoked_at else ("no key" if a.key_prefix is None else "active")
        print(f"{a.tenant:<16} {a.name:<24} {state:<8} {a.key_prefix or '-':<14} admin={a.is_admin}")
    return 0


def cmd_agents_revoke(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.tenancy import revoke_agent

    info = _with_session(args, lambda s: revoke_agent(s, args.name, args.tenant))
    print(f"agent {info.name} (tenant {info.tenant}) revoked")
    return 0


# --- memories ------------------------------------------------------------------------------------


def cmd_memory_upload(args: argparse.Namespace) -> int:
    with _sdk(args) as client:
        result = client.upload(args.content, args.context, args.resolution, args.tag or [])
    if args.json:
        _print_json(result.model_dump(mode="json"))
    else:  # one line, as a search result is shown
        memory_edit.print_record_line(result.record, f"{result.decision:<8}")
    return 0


def cmd_memory_search(args: argparse.Namespace) -> int:
    with _sdk(args) as client:
        results = client.search_memories(
            args.query,
            tier=args.tier,
            limit=args.limit,
            detail_level=args.detail_level,
            explain=args.explain,
            types=args.type,
            tags=args.tag,
            agents=args.by_agent,
            scopes=args.scope,
            thread=args.thread,
            occurred_after=args.after,
            occurred_before=args.before,
            created_after=args.created_after,
            created_before=args.created_before,
        )
    if args.json:
        _print_json([r.model_dump(mode="json") for r in results])
        return 0
    if not results:
        print("nothing found")
    elif all(r.confidence == "low" for r in results):
        # said before the list: a person reads the first line, not the JSON's flags
        print("nothing confident found; closest matches:")
    for r in results:
        rec = r.record
        # relevance is the calibrated 0-1 scale the confidence floor applies to (the score is a ranking
        # number that passes 1 with boosts)
        print(
            f"{r.confidence:<4}  {r.similarity_score:.2f}  {rec.id}  [{rec.memory_type}/{rec.tier}] "
            f"{rec.summary_l0}"
        )
        if args.explain and r.explain:
            e = r.explain
            print(
                f"          score={r.score:.4f} vector={e.vector_similarity:.4f} text={e.text_rank:.4f} "
                f"relevance={e.relevance:.4f} tier_boost={e.tier_boost} hotness={e.hotness:.4f}"
            )
    return 0


def cmd_memory_show(args: argparse.Namespace) -> int:
    with _sdk(args) as client:
        record = client.get_memory(memory_edit.memory_id(client, args.id))
    _print_json(record.model_dump(mode="json"))
    return 0


def cmd_memory_delete(args: argparse.Namespace) -> int:
    with _sdk(args) as client:
        target = memory_edit.memory_id(client, args.id)
        client.delete_memory(target)
    print(f"deleted {target}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with _sdk(args) as client:
        _print_json(client.get_memory_stats().model_dump(mode="json"))
    return 0


# --- agents' tools ------------------------------------------------------------------------------


def cmd_mcp(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.mcp.stdio import serve_stdio

    # stdout is the MCP channel: everything else goes to stderr.
    if hub_url(args) is not None:
        serve_stdio(_sdk(args))
        return 0
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.sdk import Ultron

    # In-process, opening the hub (database, redaction models, embedder) takes seconds: the handshake
    # goes ahead while it opens on a thread, and the first tool call waits for it.
    serve_stdio(Ultron._of(OpeningBackend(lambda: _local_backend(args))))
    return 0


class OpeningBackend:
    """A backend opened on a thread; each call (made off the event loop) waits until it is ready."""

    def __init__(self, open_backend: Callable[[], Any]):
        self._ready = threading.Event()
        self._backend: Any = None
        self._error: BaseException | None = None
        threading.Thread(target=self._open, args=(open_backend,), name="ultron-open", daemon=True).start()

    def _open(self, open_backend: Callable[[], Any]) -> None:
        try:
            self._backend = open_backend()
        except BaseException as exc:  # re-raised by every call, where the MCP client sees it
            self._error = exc
        finally:
            self._ready.set()

    def ready(self) -> Any:
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self._backend

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in ("hub", "actor"):  # skill tools use the backend's calls
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return getattr(self.ready(), name)(*args, **kwargs)

        return call


class MissingExtra(UltronError):
    """An optional dependency a command needs is not installed."""


def require_module(name: str, install: str) -> None:
    try:
        importlib.import_module(name)
    except ImportError:
        raise MissingExtra(f"this command needs the optional package {name!r}: {install}") from None


# --- maintenance ---------------------------------------------------------------------------------


def cmd_backup(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.ops.backup import backup

    print(backup(_settings(args), Path(args.file)).describe("backed up to"))
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.ops.backup import restore, upgrade_hint

    report = restore(_settings(args), Path(args.file), clean=args.clean)
    print(report.describe("restored from"))
    hint = upgrade_hint(report.revision)
    if hint:
        print(hint)
    return 0


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.db.engine import open_database
    from ultron.db.migrate import current_revision

    db = open_database(_settings(args))
    try:
        print(f"database at revision {current_revision(db.engine)}")
    finally:
        db.dispose()
    return 0


def cmd_dashboard_screenshots(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.bench.screenshots import main as take_screenshots

    require_module("playwright", "pip install playwright (or `.venv/bin/pip install -e '.[test]'`)")

    return take_screenshots(args, _settings(args))


def cmd_dashboard_bench(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.bench.dashboard import run

    require_module("playwright", "pip install playwright (or `.venv/bin/pip install -e '.[test]'`)")

    return run(args, _settings(args))


def cmd_reembed(args: argparse.Namespace) -> int:
    # start-up: numpy, SQLAlchemy and the providers load only for this command
    from ultron.cli.reembed import reembed

    settings = _settings(args)
    with progress_bar() as bar:
        moved = reembed(settings, batch_size=args.batch_size, progress=bar)
    print(
        f"re-embedded {moved.memories} memories and {moved.skills} skill versions with "
        f"{settings.embedding_provider}; {moved.clusters} clusters kept with recomputed centroids. "
        "Next: start the hub (`ultron serve`) with the same embedding settings."
    )
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.bench import dedup_calibration as calibration
    from ultron.bench import dedup_hard
    from ultron.hub import build_embedder
    from ultron.memory import faithful

    settings = _settings(args)
    hard, soft = settings.dedup_thresholds
    split = None if args.split == "all" else args.split
    embedder = build_embedder(settings)
    report = calibration.run(
        embedder, dedup_hard.judge, hard, soft, split=split, gate=faithful.may_merge_automatically
    )
    print(report.format())
    print()
    hard_report = dedup_hard.run(embedder, hard, soft, split=args.split)
    print(hard_report.format())
    refused = hard_report.failures()
    if report.merge_precision("auto") < dedup_hard.SHIP_AUTO_PRECISION:
        refused.append(f"shipped set: automatic-merge precision {report.merge_precision('auto'):.3f}")
    if refused:
        print(f"REFUSED: HARD {hard} / SOFT {soft} merge different facts on the {args.split} pairs")
        return 1
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.bench.core import run_benchmark

    return run_benchmark(args)


def cmd_privacy_eval(args: argparse.Namespace) -> int:
    # start-up: loaded when the command runs, not when the CLI builds its parser
    from ultron.bench.privacy_eval import main as privacy_main

    argv = ["--repeat", str(args.repeat)] + (["--corpus", args.corpus] if args.corpus else [])
    argv += ["--faith", args.faith]
    return privacy_main(argv + (["--redact-uuids"] if args.redact_uuids else []))


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


def _add_admin(p: argparse.ArgumentParser) -> None:
    """Options of a command that always opens the database (agents, backup, restore, reembed, db)."""
    _add_common(p)
    p.add_argument(
        "--local",
        action="store_true",
        help="accepted for symmetry: this command always opens the database itself, never the hub",
    )


def _add_remote(p: argparse.ArgumentParser) -> None:
    """Options of a command that talks to the hub: by default the running one, `--local` in-process."""
    p.add_argument(
        "--url",
        default=os.environ.get("ULTRON_URL"),
        help="the hub's URL (env: ULTRON_URL; default: the hub `ultron serve` recorded in the data dir)",
    )
    p.add_argument(
        "--api-key", default=os.environ.get("ULTRON_API_KEY"), help="API key (env: ULTRON_API_KEY)"
    )
    p.add_argument(
        "--local",
        action="store_true",
        help="open the database in this process instead of talking to a hub (also implied by "
        "--database-url / ULTRON_DATABASE_URL without --url)",
    )
    p.add_argument(
        "--agent", default=None, help="in-process: act as this existing agent (default: the local agent)"
    )
    p.add_argument("--tenant", default=None, help="in-process: the --agent's tenant (default 'default')")


def build_parser() -> argparse.ArgumentParser:
    parser = UltronParser(prog="ultron", description="Ultron: a shared memory hub for AI agents")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    top = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    sub = Routed(top, {})  # commands added under an old name (`bench-start`) land in their group

    p = sub.add_parser("serve", help="run the HTTP hub and its background worker")
    _add_common(p)
    p.add_argument("--host", help=f"bind address {_env('host')}, default 127.0.0.1")
    p.add_argument("--port", type=int, help=f"port {_env('port')}, default 8765")
    p.add_argument(
        "--no-worker",
        dest="no_worker",
        action="store_true",
        help="do not run the background worker here (deployments that run `ultron worker` apart)",
    )
    p.add_argument("--with-worker", action="store_true", help=argparse.SUPPRESS)  # the default now
    p.set_defaults(func=cmd_serve)

    agents = sub.add_parser("agents", help="manage agents and their API keys").add_subparsers(
        dest="agents_command", required=True
    )
    p = agents.add_parser("create", help="create an agent and print its API key (opens the database)")
    _add_admin(p)
    p.add_argument("name")
    p.add_argument("--tenant", default="default", help="tenant (created if needed), default 'default'")
    p.add_argument("--admin", action="store_true", help="may edit and delete any memory of its tenant")
    p.set_defaults(func=cmd_agents_create)
    p = agents.add_parser("list", help="list agents (opens the database)")
    _add_admin(p)
    p.add_argument("--tenant", default=None)
    p.set_defaults(func=cmd_agents_list)
    p = agents.add_parser("revoke", help="revoke an agent's key (opens the database)")
    _add_admin(p)
    p.add_argument("name")
    p.add_argument("--tenant", default="default")
    p.set_defaults(func=cmd_agents_revoke)

    memory = layout.group(sub, "memory", "upload, search, show, edit and pin memories; stats")
    p = memory.add_parser("upload", help="upload one memory")
    _add_common(p)
    _add_remote(p)
    p.add_argument("--content", required=True)
    p.add_argument("--context", default="")
    p.add_argument("--resolution", default="")
    p.add_argument("--tag", action="append", help="repeatable")
    p.add_argument("--json", action="store_true", help="print the whole result as JSON")
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
    p.add_argument("--type", action="append", help="only this memory type (repeatable: any of them)")
    p.add_argument("--tag", action="append", help="only memories with this tag (repeatable: any of them)")
    # --agent already names who acts (in-process): the filter has its own flag
    p.add_argument(
        "--by-agent", dest="by_agent", action="append", help="only memories this agent uploaded (repeatable)"
    )
    p.add_argument("--scope", action="append", help="only this scope: shared, private, group (repeatable)")
    p.add_argument("--thread", help="only the memories of this conversation or session")
    p.add_argument("--after", help="happened at or after this time (ISO 8601; UTC if no zone)")
    p.add_argument("--before", help="happened before this time")
    p.add_argument("--created-after", dest="created_after", help="stored at or after this time")
    p.add_argument("--created-before", dest="created_before", help="stored before this time")
    p.set_defaults(func=cmd_memory_search)
    p = memory.add_parser("show", help="show one memory in full (no hit counted)")
    _add_common(p)
    _add_remote(p)
    p.add_argument("id", help="the memory's id, or its first 6+ characters")
    p.set_defaults(func=cmd_memory_show)
    p = memory.add_parser("delete", help="delete one memory for good")
    _add_common(p)
    _add_remote(p)
    p.add_argument("id", help="the memory's id, or its first 6+ characters")
    p.set_defaults(func=cmd_memory_delete)
    memory_edit.add_parsers(memory, _add_common, _add_remote)  # edit, pin, unpin, resolve, contributions
    memory_cli.add_parser(memory, _add_common, _add_remote)  # memory split, memory repair-merges

    p = memory.add_parser("stats", help="memory counts by tier, type, status and scope")
    _add_common(p)
    _add_remote(p)
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("mcp", help="MCP server over stdio (Claude Desktop, Claude Code, any MCP client)")
    _add_common(p)
    _add_remote(p)
    p.set_defaults(func=cmd_mcp)

    add_demo_parser(sub)  # `ultron demo`: ultron/cli/demo.py

    db = layout.group(sub, "db", "database maintenance: upgrade, backup, restore, reembed, stop")
    p = db.add_parser("upgrade", help="migrate the database to the newest schema")
    _add_admin(p)
    p.set_defaults(func=cmd_db_upgrade)

    add_db_stop_parser(db)

    p = db.add_parser("backup", help="dump the whole database to FILE (pg_dump, custom format)")
    _add_admin(p)
    p.add_argument("file")
    p.set_defaults(func=cmd_backup)
    p = db.add_parser("restore", help="restore a backup in one transaction (stop the API and workers first)")
    _add_admin(p)
    p.add_argument("file")
    p.add_argument("--clean", action="store_true", help="replace an existing Ultron database's contents")
    p.set_defaults(func=cmd_restore)

    p = db.add_parser("reembed", help="move every memory to the configured embedding model")
    _add_admin(p)
    p.add_argument("--batch-size", type=int, default=128)
    p.set_defaults(func=cmd_reembed)

    bench = layout.group(sub, "bench", "benchmarks: core upload/search, start-up, batch, peers, ...")
    evals = layout.group(sub, "eval", "quality: retrieval, redaction, dedup and cluster calibration")
    p = bench.add_parser("screenshots", help="a PNG of every dashboard page, via headless Chromium")
    _add_common(p)
    _add_remote(p)
    p.add_argument("dir", help="folder for the PNG files")
    p.add_argument("--demo", action="store_true", help="photograph a throw-away hub filled with demo data")
    p.add_argument("--query", default="postgres connection refused", help="the search page's query")
    p.set_defaults(func=cmd_dashboard_screenshots)
    p = bench.add_parser("dashboard", help="dashboard API and page-load times at N memories")
    _add_common(p)
    p.add_argument("--size", type=int, default=100_000, help="memories to load, default 100000")
    p.add_argument("--repeat", type=int, default=20, help="calls per API endpoint")
    p.add_argument("--page-repeat", dest="page_repeat", type=int, default=5, help="loads per page")
    p.add_argument("--screenshots", help="also save a PNG of each timed page at that size in this folder")
    p.set_defaults(func=cmd_dashboard_bench)

    p = evals.add_parser("dedup", help="dedup precision/recall of the active model at its thresholds")
    _add_common(p)
    p.add_argument("--split", choices=("heldout", "dev", "all"), default="heldout", help="pairs to report on")
    p.set_defaults(func=cmd_calibrate)

    p = bench.add_parser("core", help="upload and search benchmark (hash embedder, embedded Postgres)")
    p.add_argument(
        "--database-url", dest="database_url", help="benchmark on this server instead (a new database)"
    )
    p.add_argument("--sizes", default="1000,10000,100000", help="stored-memory sizes to measure at")
    p.add_argument(
        "--queries",
        type=int,
        default=1000,
        help="searches per size (a p95 of 200 is the 10th worst: too noisy)",
    )
    p.add_argument("--upload-probe", type=int, default=200, help="single uploads timed at each size")
    p.add_argument("--dimension", type=int, default=256, help="hash embedding dimension")
    p.set_defaults(func=cmd_bench)

    add_batch_bench_parser(sub)
    add_concurrency_bench_parser(sub)
    add_start_bench_parser(sub)
    add_peers_bench_parser(sub)  # `ultron bench peers`
    add_cluster_bench_parser(sub)
    add_cluster_calibration_parser(sub)
    add_worker_parsers(sub, _add_common, _settings)
    add_ingestion_commands(sub, _add_common, _add_remote)
    add_vault_commands(sub, _add_common, _add_remote)
    add_skills_commands(sub, _add_common, _add_remote)
    add_eval_parser(Routed(top, {"eval": evals}, {"eval": ("eval", "retrieval")}))
    add_groups_parser(sub)

    p = evals.add_parser("privacy", help="precision/recall of redaction on the labelled corpus")
    p.add_argument("--corpus", help="JSONL corpus (default: the labelled one in the source tree)")
    p.add_argument("--repeat", type=int, default=3, help="timed passes over the corpus (0 skips timing)")
    p.add_argument(
        "--redact-uuids", action="store_true", help="also redact UUIDs, to measure what that costs"
    )
    p.add_argument(
        "--faith",
        choices=("auto", "only", "no"),
        default="auto",
        help="the issue-31 corpora (technical snippets, name sentences): after the default corpus (auto), "
        "alone (only) or not at all (no)",
    )
    p.set_defaults(func=cmd_privacy_eval)
    return parser


EXIT_ERROR, EXIT_INPUT, EXIT_NO_HUB, EXIT_AUTH = 1, 2, 3, 4


def describe_error(exc: BaseException, args: argparse.Namespace) -> tuple[int, str]:
    """One line and an exit code for whatever stopped a command (the traceback is for `-v`)."""
    # start-up: pydantic loads only when a command failed
    from pydantic import ValidationError

    url = getattr(args, "resolved_url", None) or getattr(args, "url", None) or "the hub"
    if isinstance(exc, ValidationError):
        parts = [
            f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        ]
        return EXIT_INPUT, "invalid input: " + "; ".join(parts)
    if isinstance(exc, NoHub):
        return EXIT_NO_HUB, exc.detail
    if isinstance(exc, Forbidden):  # a valid key that may not do this (not an admin, not its memory)
        return EXIT_ERROR, f"{url} refused the request: {exc.detail}"
    if isinstance(exc, Unauthorized):
        return EXIT_AUTH, (
            f"{url} refused the request ({exc.detail}): pass a valid key with --api-key or ULTRON_API_KEY "
            "(create one with `ultron agents create NAME`)"
        )
    if isinstance(exc, ValidationFailed):  # the hub's 422: the input was bad, as the README's codes say
        return EXIT_INPUT, exc.detail
    if isinstance(exc, UltronError):
        return EXIT_ERROR, exc.detail
    if type(exc).__module__.startswith("httpx"):
        if type(exc).__name__ in ("ConnectError", "ConnectTimeout"):
            return EXIT_NO_HUB, (
                f"cannot reach the hub at {url}: is `ultron serve` running there? "
                "(or unset ULTRON_URL / drop --url, or add --local)"
            )
        return EXIT_NO_HUB, f"talking to {url} failed: {type(exc).__name__}: {exc}"
    if isinstance(exc, ModuleNotFoundError):
        return EXIT_INPUT, f"missing optional package {exc.name!r}: pip install {exc.name}"
    if isinstance(exc, ValueError | OSError):
        return EXIT_INPUT, str(exc)
    return EXIT_ERROR, f"unexpected {type(exc).__name__}: {exc} (run `ultron -v ...` for the traceback)"


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(layout.rewrite_legacy(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(message)s"
    )
    try:
        code = int(args.func(args) or 0)
        if not sys.stdout.closed:  # MCP's stdio transport closes it on its way out
            sys.stdout.flush()  # here, where a closed pipe is handled, not at exit
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`ultron ... | head`): what it wanted was printed. Point stdout at
        # /dev/null so the interpreter's own flush at exit does not complain either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:
        if args.verbose:
            raise
        code, message = describe_error(exc, args)
        print("error: " + " ".join(message.split()), file=sys.stderr)
        return code
