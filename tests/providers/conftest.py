"""Provider-test fixtures: the fake model servers, and `remote`, which runs a test against both."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.fakes.fixtures import fake_dashscope, fake_openai
from tests.fakes.servers import (
    DASHSCOPE_EMBEDDINGS,
    DASHSCOPE_GENERATION,
    FAKE_API_KEY,
    OPENAI_CHAT,
    OPENAI_EMBEDDINGS,
    FakeModelServer,
)
from ultron.providers.base import ChatModel, Embedder
from ultron.providers.factory import make_chat, make_embedder

__all__ = ["fake_dashscope", "fake_openai", "remote"]

# Short enough that retry tests finish in well under a second each.
RETRY_BASE_DELAY = 0.01
TEST_DIMENSION = 8


@dataclass
class Remote:
    """One remote provider under test and the fake server it talks to."""

    name: str
    server: FakeModelServer

    @property
    def embed_path(self) -> str:
        return OPENAI_EMBEDDINGS if self.name == "openai" else DASHSCOPE_EMBEDDINGS

    @property
    def chat_path(self) -> str:
        return OPENAI_CHAT if self.name == "openai" else DASHSCOPE_GENERATION

    def embedder(
        self, *, timeout: float = 2.0, max_retries: int = 2, dimension: int = TEST_DIMENSION
    ) -> Embedder:
        return make_embedder(
            self.name,
            model=None,
            dimension=dimension,
            base_url=self.server.base_url,
            api_key=FAKE_API_KEY,
            timeout=timeout,
            max_retries=max_retries,
            retry_base_delay=RETRY_BASE_DELAY,
        )

    def chat(self, *, timeout: float = 2.0, max_retries: int = 2) -> ChatModel:
        chat = make_chat(
            self.name,
            model="fake-chat-model",
            base_url=self.server.base_url,
            api_key=FAKE_API_KEY,
            timeout=timeout,
            max_retries=max_retries,
            retry_base_delay=RETRY_BASE_DELAY,
        )
        assert chat is not None
        return chat


@pytest.fixture(params=["openai", "dashscope"])
def remote(request: pytest.FixtureRequest) -> Remote:
    return Remote(request.param, request.getfixturevalue(f"fake_{request.param}"))
