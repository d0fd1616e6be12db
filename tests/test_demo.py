"""`ultron demo`: a fresh store of its own, filled with a mixed set, three confident searches and a brief."""

from __future__ import annotations

import re

from ultron.bench.tour import SEARCHES
from ultron.cli import main
from ultron.db.embedded import pgdata_dir

# What each demo search must find first: one from the coding errors, the session log and the chat.
EXPECTED = {
    SEARCHES[0]: "Postgres connection refused after docker compose up",
    SEARCHES[1]: "test_refund_rounding fails after upgrading to Python 3.12",
    SEARCHES[2]: "nginx returns 413",
}


def test_demo_fills_its_own_store_and_shows_three_searches_and_a_brief(tmp_path, monkeypatch, capsys):
    users_store = tmp_path / "users-store"
    # The user's configured store: the demo must use neither.
    monkeypatch.setenv("ULTRON_DATA_DIR", str(users_store))
    monkeypatch.setenv("ULTRON_DATABASE_URL", "postgresql://nobody@127.0.0.1:9/users-database")
    demo_dir = tmp_path / "demo"

    assert main(["demo", "--data-dir", str(demo_dir), "--embedding-provider", "hash"]) == 0

    out = capsys.readouterr().out
    assert not users_store.exists()
    assert pgdata_dir(demo_dir).is_dir()  # its own embedded database, in the folder it was given
    assert f"a fresh store in {demo_dir}" in out
    stored = re.search(r"(\d+) memories after dedup and extraction", out)
    # 8 coding errors, plus at least one memory extracted from the chat and one from the session log.
    assert stored and int(stored[1]) >= 10, out
    for query, first in EXPECTED.items():
        block = out.split(f'search "{query}"\n', 1)[1]
        first_hit = block.splitlines()[0]
        assert first in first_hit, (query, first_hit)
    brief = out.split("brief for ", 1)[1].splitlines()
    assert any("[pinned]" in line and "staging database is on port 5433" in line for line in brief), out
    assert f"ultron serve --data-dir {demo_dir}" in out


def test_demo_refuses_a_folder_that_holds_data(tmp_path, capsys):
    store = tmp_path / "store"
    store.mkdir()
    (store / "keep.txt").write_text("the user's")
    assert main(["demo", "--data-dir", str(store)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "not empty" in err and len(err.splitlines()) == 1
    assert [p.name for p in store.iterdir()] == ["keep.txt"]
