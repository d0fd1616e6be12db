"""The command line's layout: a short `ultron --help`, groups, old names as hidden aliases, "did you mean"."""

from __future__ import annotations

import re

import pytest

from ultron.cli import build_parser, main
from ultron.cli.layout import LEGACY, rewrite_legacy, visible_commands

# `ultron demo` (added by its own module) takes one slot of the fifteen
MAX_LISTED = 15


def _help(capsys, *argv: str) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--help"])
    assert stop.value.code == 0
    return str(capsys.readouterr().out)


def test_help_lists_at_most_fifteen_commands_and_no_old_name(capsys):
    text = _help(capsys)
    listed = re.findall(r"^    (\S+)", text, flags=re.M)
    assert listed == visible_commands(build_parser())
    assert len(listed) <= MAX_LISTED - ("demo" not in listed)
    assert not set(listed) & set(LEGACY)
    assert "bench-start" not in text and "dedup-calibration" not in text
    bench = _help(capsys, "bench")
    for name in ("core", "start", "batch", "concurrency", "peers", "clusters", "rebalance", "ingest"):
        assert re.search(rf"^    {name}\b", bench, flags=re.M), name
    evals = _help(capsys, "eval")
    for name in ("retrieval", "privacy", "dedup", "clusters"):
        assert re.search(rf"^    {name}\b", evals, flags=re.M), name
    db = _help(capsys, "db")
    for name in ("upgrade", "backup", "restore", "reembed", "stop"):
        assert re.search(rf"^    {name}\b", db, flags=re.M), name


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (["bench-start", "--repeat", "1"], ["bench", "start", "--repeat", "1"]),
        (["-v", "backup", "x.dump"], ["-v", "db", "backup", "x.dump"]),
        (["stats", "--local"], ["memory", "stats", "--local"]),
        (["clusters", "list"], ["skills", "clusters", "list"]),
        (["privacy", "eval", "--repeat", "0"], ["eval", "privacy", "--repeat", "0"]),
        (["bench", "--sizes", "10"], ["bench", "core", "--sizes", "10"]),
        (["eval", "--suite", "sweep"], ["eval", "retrieval", "--suite", "sweep"]),
        (["dedup-calibration"], ["eval", "dedup"]),
    ],
)
def test_old_names_still_run_the_same_command(old, new):
    assert rewrite_legacy(old) == new
    parser = build_parser()
    assert parser.parse_args(rewrite_legacy(old)).func is parser.parse_args(new).func


def test_a_group_alone_lists_its_commands(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["bench"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "start" in err and "core" in err and err.rstrip().endswith("choose a command")


@pytest.mark.parametrize(
    ("argv", "typo", "suggested"),
    [
        (["serv"], "serv", "serve"),
        (["bnech"], "bnech", "bench"),
        (["bench-strat"], "bench-strat", "bench start"),
        (["memory", "serch", "x"], "serch", "search"),
        (["skils", "list"], "skils", "skills"),
        (["bench", "strat"], "strat", "start"),
    ],
)
def test_a_mistyped_command_suggests_the_nearest_one(capsys, argv, typo, suggested):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"unknown command '{typo}'" in err
    assert f"did you mean '{suggested}'?" in err
    assert "Traceback" not in err


def test_an_unknown_command_with_nothing_near_lists_the_commands(capsys):
    with pytest.raises(SystemExit):
        main(["xyzzy"])
    err = capsys.readouterr().err
    assert "unknown command 'xyzzy' (commands: serve, agents, memory" in err
