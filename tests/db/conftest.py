"""Fixtures shared by the migration tests: a store filled through every path, at head, its hub closed."""

from __future__ import annotations

import pytest

from tests.db.test_tenant_keys_migration import _fill


@pytest.fixture()
def filled(hub, db_url):  # type: ignore[no-untyped-def]
    _fill(hub)
    hub.close()
    return db_url
