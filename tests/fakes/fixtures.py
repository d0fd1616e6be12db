"""Pytest fixtures for the fake model servers; import them into a conftest.py to use them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.servers import FakeModelServer


@pytest.fixture
def fake_openai() -> Iterator[FakeModelServer]:
    """An OpenAI-compatible server; `.base_url` ends in /v1."""
    with FakeModelServer("openai") as server:
        yield server


@pytest.fixture
def fake_dashscope() -> Iterator[FakeModelServer]:
    """A DashScope native-API server; `.base_url` ends in /api/v1, as the SDK's base_address expects."""
    with FakeModelServer("dashscope") as server:
        yield server
