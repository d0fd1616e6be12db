"""Fixtures for the adversarial round (issue 16): hubs whose providers are fake servers on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import text

from tests.fakes.servers import FAKE_API_KEY, FakeModelServer


@pytest.fixture()
def fake_chat() -> Iterator[FakeModelServer]:
    """A second OpenAI-compatible fake, for chat only (`fake_openai` serves the embeddings)."""
    with FakeModelServer("openai") as server:
        yield server


def remote_settings(embed: FakeModelServer | None, chat: FakeModelServer | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "llm_timeout": 1.0,
        "llm_max_retries": 1,
        "llm_retry_base_delay": 0.01,
        "provider_deadline_seconds": 2.0,
        "llm_deadline_seconds": 1.5,
        "provider_cooldown_seconds": 0.5,
    }
    if embed is not None:
        out |= {
            "embedding_provider": "openai",
            "embedding_base_url": embed.base_url,
            "embedding_api_key": FAKE_API_KEY,
            "embedding_dimension": 8,
        }
    if chat is not None:
        out |= {
            "llm_provider": "openai",
            "llm_base_url": chat.base_url,
            "llm_api_key": FAKE_API_KEY,
            "llm_model": "fake-chat",
        }
    return out


def row_counts(hub: Any) -> dict[str, int]:
    """Rows an upload writes: a half-written upload would leave some of them behind."""
    tables = ("memories", "memory_contributions", "activity_events")
    with hub.db.session() as s:
        return {t: s.execute(text(f"SELECT count(*) FROM {t}")).scalar_one() for t in tables}
