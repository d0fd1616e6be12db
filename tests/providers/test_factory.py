"""Building providers by name, and the package's public surface."""

from __future__ import annotations

import pytest

import ultron.providers
from ultron.providers import (
    ChatModel,
    DashScopeChat,
    DashScopeEmbedder,
    Embedder,
    HashEmbedder,
    LocalEmbedder,
    OpenAIChat,
    OpenAIEmbedder,
    ProviderConfigError,
    make_chat,
    make_embedder,
)


def test_hash_and_local_need_no_key() -> None:
    hashed = make_embedder("hash")
    assert isinstance(hashed, HashEmbedder) and hashed.dimension == 256
    assert make_embedder(" HASH ", dimension=64).model_name == "hash-v1:64"
    local = make_embedder("local", dimension=384)
    assert isinstance(local, LocalEmbedder) and isinstance(local, Embedder)


def test_remote_embedders_get_their_defaults() -> None:
    openai = make_embedder("openai", api_key="k", dimension=512)
    assert isinstance(openai, OpenAIEmbedder) and openai.model_name == "openai:text-embedding-3-small"
    assert openai.dimension == 512  # configured, so no probe request
    dashscope = make_embedder("dashscope", api_key="k")
    assert isinstance(dashscope, DashScopeEmbedder)
    assert (dashscope.model_name, dashscope.dimension) == ("dashscope:text-embedding-v4", 1024)


def test_chat_providers() -> None:
    assert make_chat("heuristic") is None
    dashscope = make_chat("dashscope", api_key="k")
    assert isinstance(dashscope, DashScopeChat) and dashscope.model_name == "dashscope:qwen3.6-flash"
    openai = make_chat("openai", api_key="k", model="gpt-4o-mini", base_url="http://127.0.0.1:1/v1")
    assert isinstance(openai, OpenAIChat) and isinstance(openai, ChatModel)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: make_embedder("sentence-transformers"), "unknown embedding provider"),
        (lambda: make_embedder("openai"), "needs an API key"),
        (lambda: make_embedder("dashscope", api_key=""), "DASHSCOPE_API_KEY"),
        (lambda: make_embedder("local", dimension=1024), "dimension 384"),
        (lambda: make_chat("gpt"), "unknown chat provider"),
        (lambda: make_chat("dashscope"), "needs an API key"),
        (lambda: make_chat("openai", api_key="k"), "needs a model"),
    ],
)
def test_bad_configuration_fails_clearly(build: object, message: str) -> None:
    with pytest.raises(ProviderConfigError, match=message) as caught:
        build()  # type: ignore[operator]
    assert isinstance(caught.value, ValueError)


def test_public_names_are_exported() -> None:
    for name in ultron.providers.__all__:
        assert hasattr(ultron.providers, name), name
