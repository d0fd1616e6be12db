"""Locate sql/ and alembic/ both in a checkout and inside an installed wheel."""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent.parent


def resource_dir(name: str) -> Path:
    installed = _PKG / "_resources" / name
    if installed.exists():
        return installed
    checkout = _PKG.parent / name
    if checkout.exists():
        return checkout
    raise FileNotFoundError(f"ultron resource {name!r} not found in {installed} or {checkout}")
