"""What `ultron serve` checks before it opens anything: one hub per data dir, and a free port.

Both are checked before the database starts (seconds), so a clash is the first and only line printed.
The data dir is claimed with an advisory lock the kernel drops when the process dies, so a killed hub
never leaves a stale claim behind (hub.json may, and the CLI checks its pid).
"""

from __future__ import annotations

import errno
import json
import os
import socket
from pathlib import Path
from typing import IO

from ultron.errors import UltronError

try:  # not on Windows: there the data dir is not claimed (the port check still runs)
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

LOCK = "hub.lock"


class HubClash(UltronError):
    """Another hub already serves this data dir, or the port is taken."""


def claim_data_dir(data_dir: Path) -> IO[str] | None:
    """Hold the data dir's lock for this process's life; HubClash when a live hub holds it.

    None when the dir cannot be written (a read-only home: nothing is recorded there either)."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        handle = (data_dir / LOCK).open("a+")
    except OSError:
        return None
    if fcntl is None:  # pragma: no cover
        return handle
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        handle.close()
        if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return None
        raise HubClash(
            f"a hub already serves {data_dir}{_who(data_dir)}: stop it first, or start this one with "
            "another --data-dir"
        ) from None
    return handle


def _who(data_dir: Path) -> str:
    try:
        record = json.loads((data_dir / "hub.json").read_text())
        return f" at {record['url']} (pid {int(record['pid'])})"
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def check_port(host: str, port: int) -> None:
    """HubClash when nothing could listen on host:port now (bound the way uvicorn binds it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        if os.name != "nt":
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            reason = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc.strerror})"
            raise HubClash(
                f"port {port} on {host} {reason}: stop what listens there, or pass --port N "
                "(env: ULTRON_PORT)"
            ) from None
