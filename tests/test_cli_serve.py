"""`ultron serve` refuses a second hub on one data dir and a taken port, before it opens anything."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from tests.test_cli import _clean_env, _free_port, _healthy


def _serve(env: dict[str, str], port: int, **kwargs):  # type: ignore[no-untyped-def]
    return subprocess.Popen(
        [sys.executable, "-m", "ultron.cli", "serve", "--port", str(port)], env=env, text=True, **kwargs
    )


def test_a_second_hub_on_one_data_dir_and_a_taken_port_are_refused_before_the_banner(settings, tmp_path):
    data_dir = tmp_path / "home"
    env = _clean_env(
        ULTRON_DATABASE_URL=settings.database_url.get_secret_value(), ULTRON_DATA_DIR=str(data_dir)
    )
    port = _free_port()
    log = tmp_path / "first.log"
    with log.open("w") as sink:
        first = _serve(env, port, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while not (data_dir / "hub.json").exists() or not _healthy(port):
            assert first.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        record = (data_dir / "hub.json").read_text()

        second = _serve(env, _free_port(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = second.communicate(timeout=60)
        assert second.returncode == 1, err
        assert err.startswith(f"error: a hub already serves {data_dir} at http://127.0.0.1:{port}"), err
        assert f"(pid {first.pid})" in err and len(err.strip().splitlines()) == 1 and not out
        assert (data_dir / "hub.json").read_text() == record  # untouched: the CLI still finds the first
        assert _healthy(port)

        other = _clean_env(
            ULTRON_DATABASE_URL=settings.database_url.get_secret_value(),
            ULTRON_DATA_DIR=str(tmp_path / "other"),
        )
        clash = _serve(other, port, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = clash.communicate(timeout=60)
        assert clash.returncode == 1, err
        assert err.strip() == (
            f"error: port {port} on 127.0.0.1 is in use: stop what listens there, or pass --port N "
            "(env: ULTRON_PORT)"
        )
        assert not (tmp_path / "other" / "hub.json").exists()
        assert json.loads((data_dir / "hub.json").read_text())["pid"] == first.pid
    finally:
        first.terminate()
        first.wait(timeout=60)
    assert first.returncode == 0
    assert not (data_dir / "hub.json").exists()
    # the claim went with the process: the data dir serves again
    again = _serve(env, _free_port(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 90
        while not (data_dir / "hub.json").exists():
            assert again.poll() is None and time.monotonic() < deadline, again.stderr
            time.sleep(0.2)
    finally:
        again.terminate()
        again.wait(timeout=60)
