"""An installed wheel carries sql/ and alembic/ and migrates without a checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_ships_sql_and_migrations_and_migrates_from_them(tmp_path, db_url):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            str(ROOT),
            "-w",
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
    )
    wheel = next(tmp_path.glob("ultron-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "ultron/_resources/sql/memory.sql" in names
    assert "ultron/_resources/alembic/env.py" in names
    assert any(n.startswith("ultron/_resources/alembic/versions/0001_core") for n in names)
    # The API explorers' bundles, so /docs and /redoc render with no internet.
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js"):
        assert f"ultron/api/static/{asset}" in names

    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    script = (
        "import ultron, ultron.db.resources as r;"
        "from ultron.db.engine import Database, ensure_vector_extension;"
        "from ultron.db.migrate import upgrade_to_head, is_at_head;"
        "from ultron.db.queries import all_queries;"
        f"assert ultron.__file__.startswith({str(site)!r}), ultron.__file__;"
        "assert '_resources' in str(r.resource_dir('sql'));"
        "assert 'search_memories' in all_queries();"
        f"db = Database({db_url!r}); ensure_vector_extension(db.engine); upgrade_to_head(db.engine);"
        "assert is_at_head(db.engine); print('ok')"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
