"""The `ultron` command line, run as a user would, against a real database and a real running hub."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from ultron.cli import build_parser, main
from ultron.hub import build_worker
from ultron.ingestion.schemas import IngestFile
from ultron.memory.schemas import UploadRequest
from ultron.tenancy import authenticate, create_agent

SESSIONS = Path(__file__).parent / "data" / "sessions"


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTRON_")}
    return {**env, "ULTRON_EMBEDDING_PROVIDER": "hash", "ULTRON_REDACTION_ENABLED": "false", **extra}


def ultron(settings, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    env = _clean_env(ULTRON_DATABASE_URL=settings.database_url.get_secret_value())
    proc = subprocess.run(
        [sys.executable, "-m", "ultron.cli", *args], env=env, capture_output=True, text=True, timeout=120
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_help_names_each_options_environment_variable():
    serve = build_parser()._subparsers._group_actions[0].choices["serve"].format_help()  # type: ignore[union-attr]
    for var in (
        "ULTRON_HOST",
        "ULTRON_PORT",
        "ULTRON_DATA_DIR",
        "ULTRON_DATABASE_URL",
        "ULTRON_EMBEDDING_PROVIDER",
    ):
        assert var in serve


def test_agents_memory_and_stats_round_trip_in_process(settings):
    created = ultron(settings, "agents", "create", "ci-bot", "--tenant", "acme")
    key = created.stdout.strip().splitlines()[-1]
    assert key.startswith("ult_")
    assert "ci-bot" in ultron(settings, "agents", "list").stdout

    as_bot = ("--agent", "ci-bot", "--tenant", "acme")
    up = json.loads(
        ultron(
            settings,
            "memory",
            "upload",
            *as_bot,
            "--content",
            "pytest collection error: import file mismatch",
            "--resolution",
            "delete __pycache__ and rerun",
            "--tag",
            "pytest",
            "--json",
        ).stdout
    )
    assert up["decision"] == "created" and up["record"]["memory_type"] == "error"
    found = json.loads(ultron(settings, "memory", "search", *as_bot, "import file mismatch", "--json").stdout)
    assert found[0]["record"]["id"] == up["record"]["id"]
    shown = json.loads(ultron(settings, "memory", "show", *as_bot, up["record"]["id"]).stdout)
    assert shown["resolution"] == "delete __pycache__ and rerun"
    stats = json.loads(ultron(settings, "memory", "stats", *as_bot).stdout)
    assert stats["total"] == 1 and stats["embedding_model"].startswith("hash-v1")
    # The local agent of tenant 'default' does not see acme's memory.
    assert json.loads(ultron(settings, "memory", "stats", "--local").stdout)["total"] == 0

    assert "revoked" in ultron(settings, "agents", "revoke", "ci-bot", "--tenant", "acme").stdout
    ultron(settings, "memory", "delete", *as_bot, up["record"]["id"])


def test_agent_option_never_creates_an_agent_or_a_tenant(settings, hub):
    proc = ultron(
        settings,
        "memory",
        "upload",
        "--agent",
        "ghost",
        "--tenant",
        "nowhere",
        "--content",
        "x y z",
        check=False,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "no agent 'ghost' in tenant 'nowhere'" in proc.stderr
    assert "ultron agents create ghost --tenant nowhere" in proc.stderr
    with hub.db.session() as s:
        assert s.execute(text("SELECT count(*) FROM agents WHERE name = 'ghost'")).scalar_one() == 0
        assert s.execute(text("SELECT count(*) FROM tenants WHERE name = 'nowhere'")).scalar_one() == 0


def test_without_a_hub_the_cli_says_so_and_creates_nothing(tmp_path):
    data_dir = tmp_path / "never-created"
    for args in (
        ["memory", "stats"],
        ["trajectory", "sessions"],
        ["worker", "status"],
        ["memory", "search", "x"],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "ultron.cli", *args],
            env=_clean_env(ULTRON_DATA_DIR=str(data_dir)),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 3, proc.stderr
        assert proc.stderr.startswith("error: no running hub found") and "--local" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    assert not data_dir.exists()


def test_bad_input_gets_a_clear_message_not_a_traceback(settings):
    proc = ultron(settings, "memory", "show", "not-a-uuid", check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "error" in proc.stderr.lower()
    proc = ultron(settings, "memory", "upload", "--content", "   ", check=False)
    assert proc.returncode == 2 and "content must not be empty" in proc.stderr
    assert "pydantic" not in proc.stderr and proc.stderr.strip().splitlines()[-1] == (
        "error: invalid input: content: content must not be empty"
    )
    proc = ultron(settings, "agents", "revoke", "nobody", check=False)
    assert proc.returncode == 1 and "no agent 'nobody'" in proc.stderr


def test_serve_refuses_a_public_address_without_keys(settings):
    proc = ultron(settings, "serve", "--host", "0.0.0.0", check=False)
    assert proc.returncode == 2 and "refusing" in proc.stderr


def test_a_missing_optional_package_is_named_with_its_install_command(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.modules['playwright'] = None; "
            "from ultron.cli import main; sys.exit(main(sys.argv[1:]))",
            "bench",
            "screenshots",
            str(tmp_path / "png"),
            "--demo",
        ],
        env=_clean_env(ULTRON_DATA_DIR=str(tmp_path / "dd")),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "pip install playwright" in proc.stderr
    assert not (tmp_path / "dd").exists()  # it stopped before seeding a demo hub


# --- through a running hub, as a tenant's agent --------------------------------------------------


def _seed(hub, key: str, marker: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        actor = authenticate(s, key)
    with hub.db.session() as s:
        up = hub.memory.upload(
            s,
            actor,
            UploadRequest(
                content=f"{marker}: docker build fails behind the proxy", resolution="set HTTP_PROXY"
            ),
        )
    session_bytes = (SESSIONS / "multi_task.jsonl").read_bytes()
    with hub.db.session() as s:
        hub.ingestion.ingest_files(s, actor, [IngestFile(f"{marker}-run.jsonl", session_bytes)])
    notes = (SESSIONS / "notes.md").read_bytes()
    with hub.db.session() as s:
        job = hub.ingestion.imports.start(s, actor, "markdown", f"{marker}-notes.md", notes)
    hub.ingestion.imports.run(actor, job.id)
    build_worker(hub).run_cycle(("cluster",), quiet=True)  # the worker's tick: the upload's cluster
    return {"tenant_id": str(actor.tenant_id), "memory_id": str(up.record.id)}


@pytest.fixture()
def two_tenants(hub):  # type: ignore[no-untyped-def]
    """A hub served on loopback with keys required, and one agent (and its data) in each of two tenants."""
    from ultron.api.app import create_app
    from ultron.web.serve import LiveServer

    with hub.db.session() as s:
        _, key_a = create_agent(s, "alpha-bot", "alpha")
        _, key_b = create_agent(s, "bravo-bot", "bravo")
    seeded = {"alpha": _seed(hub, key_a, "alpha"), "bravo": _seed(hub, key_b, "bravo")}
    with LiveServer(create_app(hub, allow_open=False)) as url:
        yield {"url": url, "keys": {"alpha": key_a, "bravo": key_b}, **seeded}


def _run(capsys, *argv: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


READ_COMMANDS = [
    ["memory", "stats"],
    ["memory", "search", "docker proxy", "--json"],
    ["trajectory", "sessions", "--json"],
    ["trajectory", "segments", "--json"],
    ["worker", "status", "--json"],
    ["skills", "clusters", "list", "--json"],
    ["skills", "list", "--json"],
    ["skills", "search", "docker build", "--json"],
    ["import", "list"],
]


def test_every_read_command_through_the_hub_shows_only_the_callers_tenant(two_tenants, hub, capsys):
    url, key = two_tenants["url"], two_tenants["keys"]["alpha"]
    alpha, bravo = two_tenants["alpha"], two_tenants["bravo"]
    remote = ["--url", url, "--api-key", key]
    outputs = {}
    for argv in READ_COMMANDS:
        code, out, err = _run(capsys, *argv, *remote)
        assert code == 0, (argv, err)
        assert "bravo" not in out, argv
        outputs[" ".join(argv[:2])] = out

    with hub.db.session() as s:
        alpha_total = s.execute(
            text("SELECT count(*) FROM memories WHERE tenant_id = :t AND status <> 'archived'"),
            {"t": alpha["tenant_id"]},
        ).scalar_one()
        bravo_clusters = {
            str(r)
            for r in s.execute(
                text("SELECT id FROM knowledge_clusters WHERE tenant_id = :t"), {"t": bravo["tenant_id"]}
            ).scalars()
        }
    assert json.loads(outputs["memory stats"])["total"] == alpha_total > 0
    hits = json.loads(outputs["memory search"])
    assert alpha["memory_id"] in {h["record"]["id"] for h in hits}
    assert bravo["memory_id"] not in outputs["memory search"]
    sessions = json.loads(outputs["trajectory sessions"])
    assert "alpha-run.jsonl" in {r["source"].split("/")[-1] for r in sessions}
    segment_sessions = {g["session_id"] for g in json.loads(outputs["trajectory segments"])}
    assert segment_sessions and segment_sessions <= {r["id"] for r in sessions}
    queues = json.loads(outputs["worker status"])["queues"]
    assert {q["tenant_id"] for q in queues} <= {alpha["tenant_id"]}
    clusters = {c["id"] for c in json.loads(outputs["skills clusters"])}
    assert clusters and not clusters & bravo_clusters
    assert "alpha-notes.md" in outputs["import list"]

    code, out, _ = _run(capsys, "skills", "search", "kubernetes operator", *remote)
    assert code == 0 and out.startswith("no skill matches 'kubernetes operator'")
    code, out, _ = _run(capsys, "skills", "clusters", "list", *remote)
    assert out.splitlines()[0].split() == ["cluster", "members", "skill", "next", "topic"]
    assert out.splitlines()[-1].startswith("next: what the worker's next skill pass does")
    code, _, err = _run(capsys, "memory", "show", bravo["memory_id"], *remote)
    assert code == 1 and "not found" in err
    code, out, _ = _run(capsys, "memory", "show", alpha["memory_id"], *remote)
    assert code == 0 and json.loads(out)["id"] == alpha["memory_id"]
    # Through the hub the key is the agent: --agent is refused, not ignored, and nothing is created.
    code, _, err = _run(capsys, "memory", "stats", "--agent", "mallory", *remote)
    assert code == 2 and "the API key is the agent" in err
    with hub.db.session() as s:
        assert s.execute(text("SELECT count(*) FROM agents WHERE name = 'mallory'")).scalar_one() == 0
    assert httpx.get(url + "/", follow_redirects=False).headers["location"] == "/dashboard"


def test_hub_down_bad_key_and_bad_input_are_one_line_and_an_exit_code(two_tenants, capsys):
    down = f"http://127.0.0.1:{_free_port()}"
    url, key = two_tenants["url"], two_tenants["keys"]["alpha"]
    for argv in READ_COMMANDS:
        code, _, err = _run(capsys, *argv, "--url", down, "--api-key", key)
        assert code == 3 and err.startswith(f"error: cannot reach the hub at {down}"), (argv, err)
        assert len(err.strip().splitlines()) == 1
        code, _, err = _run(capsys, *argv, "--url", url, "--api-key", "ult_not-a-key")
        assert code == 4 and "refused the request" in err and "--api-key" in err, (argv, err)
        assert len(err.strip().splitlines()) == 1
    for argv, message in [
        (["memory", "upload", "--content", ""], "content must not be empty"),
        (["memory", "show", "not-a-uuid"], "error:"),
        (["memory", "search", " "], "error:"),
        (["trajectory", "segments", "--session", "nope"], "error:"),
    ]:
        code, _, err = _run(capsys, *argv, "--url", url, "--api-key", key)
        assert code in (1, 2) and message in err and len(err.strip().splitlines()) == 1, (argv, err)


def test_hub_down_in_a_subprocess_prints_no_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "ultron.cli", "memory", "stats"],
        env=_clean_env(ULTRON_URL=f"http://127.0.0.1:{_free_port()}"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 3 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "is `ultron serve` running" in proc.stderr


# --- `ultron serve` is the whole product on one machine -----------------------------------------


def test_serve_with_defaults_turns_an_ingested_session_into_memories(settings, hub, tmp_path):
    port = _free_port()
    data_dir = tmp_path / "hub-home"
    log = tmp_path / "serve.log"
    env = _clean_env(
        ULTRON_DATABASE_URL=settings.database_url.get_secret_value(), ULTRON_DATA_DIR=str(data_dir)
    )
    with log.open("w") as sink:
        server = subprocess.Popen(
            [sys.executable, "-m", "ultron.cli", "serve", "--port", str(port)],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 90
        while not (data_dir / "hub.json").exists() or not _healthy(port):
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        startup = log.read_text().splitlines()
        assert len(startup) <= 15, startup
        assert any("/dashboard" in line for line in startup) and any("worker" in line for line in startup)
        assert not any("Loaded recognizer" in line or "alembic" in line for line in startup)

        # The CLI finds the hub through the data dir (no URL, no database URL in its environment).
        client_env = _clean_env(ULTRON_DATA_DIR=str(data_dir))
        proc = subprocess.run(
            [sys.executable, "-m", "ultron.cli", "ingest", str(SESSIONS / "multi_task.jsonl")],
            env=client_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert "next: the worker turns" in proc.stdout
        while True:  # no other process runs: the hub's own worker extracts the memories
            with hub.db.session() as s:
                extracted = s.execute(text("SELECT count(*) FROM memory_sources")).scalar_one()
            if extracted:
                break
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.3)
        stats = subprocess.run(
            [sys.executable, "-m", "ultron.cli", "memory", "stats"],
            env=client_env,
            capture_output=True,
            text=True,
        )
        assert stats.returncode == 0 and json.loads(stats.stdout)["total"] >= 1, stats.stderr
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert server.returncode == 0
    assert not (data_dir / "hub.json").exists()  # forgotten at shutdown: the CLI will not try it


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.parametrize(
    "argv", [["bench", "core", "--sizes", "300,600", "--queries", "20", "--upload-probe", "10"]]
)
def test_bench_prints_its_figures(settings, pg_server_url, argv):
    proc = subprocess.run(
        [sys.executable, "-m", "ultron.cli", *argv, "--database-url", pg_server_url],
        env={**os.environ, "ULTRON_REDACTION_ENABLED": "false"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "search p95 / raw kNN p95 at 600" in proc.stdout
    assert "upload cost at 600 / at 300" in proc.stdout


def test_privacy_eval_takes_the_corpus_option_the_readme_shows(tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    lines = (Path(__file__).parent / "data" / "redaction_corpus.jsonl").read_text().splitlines()
    corpus.write_text("\n".join(lines[:5]) + "\n")
    code = main(["eval", "privacy", "--corpus", str(corpus), "--repeat", "0"])
    out = capsys.readouterr().out
    assert code == 0 and "corpus: 5 snippets" in out and "precision" in out
    assert main(["eval", "privacy", "--corpus", str(tmp_path / "missing.jsonl")]) == 2
    assert "corpus not found" in capsys.readouterr().err


def test_ingest_of_a_folder_without_sessions_says_why(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / ".hidden.jsonl").write_text("{}")
    code = main(["ingest", str(tmp_path / "empty"), "--url", f"http://127.0.0.1:{_free_port()}"])
    err = capsys.readouterr().err
    assert code == 1 and "no session files (*.jsonl) under" in err and "1 hidden or linked" in err


def test_the_api_reference_says_upload_answers_201_on_create():
    from ultron.api.apidoc import openapi_schema

    responses = openapi_schema()["paths"]["/memories/upload"]["post"]["responses"]
    assert {"200", "201"} <= set(responses)
    docs = (Path(__file__).parents[1] / "docs" / "api.md").read_text(encoding="utf-8")
    upload = docs.split("### `POST /memories/upload`", 1)[1].split("###", 1)[0]
    assert "`201`" in upload and "201 with a new memory" in upload


def test_building_the_parser_loads_no_heavy_module():
    """`ultron --help` stays fast: no subcommand's parser may import the ORM, numpy or the settings (a
    cluster-calibration parser that imported the cluster service once cost every command 0.5 s)."""
    code = (
        "import sys; from ultron.cli import build_parser; build_parser(); "
        "names = ('sqlalchemy', 'numpy', 'pydantic_settings', 'ultron.db.models'); "
        "heavy = [m for m in names if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_a_command_through_the_hub_loads_no_heavy_module():
    """A client command (`ultron memory search` against a hub) builds the HTTP client only: no ORM, no numpy
    (the worker status model imported at the top of the HTTP backend brought SQLAlchemy in: 1.6 s of CPU
    per CLI search on a quiet box, against 0.7 s without it)."""
    code = (
        "import sys; from ultron.cli import main; "
        "main(['memory', 'search', 'x', '--url', 'http://127.0.0.1:9']); "
        "names = ('sqlalchemy', 'numpy', 'ultron.db.models'); "
        "print(','.join(m for m in names if m in sys.modules))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTRON_")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert "cannot reach the hub" in out.stderr, out.stderr  # it did try the hub
    assert out.stdout.strip() == "", out.stdout
