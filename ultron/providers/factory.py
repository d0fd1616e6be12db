"""Build providers from settings by name; the only place that knows every implementation."""

from __future__ import annotations

from ultron.providers import local
from ultron.providers.base import ChatModel, Embedder
from ultron.providers.dashscope_api import DashScopeChat, DashScopeEmbedder
from ultron.providers.hashing import DEFAULT_DIMENSION, HashEmbedder
from ultron.providers.local import LocalEmbedder
from ultron.providers.openai_compat import DEFAULT_BASE_URL, OpenAIChat, OpenAIEmbedder

EMBEDDING_PROVIDERS = ("hash", "local", "openai", "dashscope")
CHAT_PROVIDERS = ("heuristic", "openai", "dashscope")
DEFAULT_MODELS = {
    ("embedding", "openai"): "text-embedding-3-small",
    ("embedding", "dashscope"): "text-embedding-v4",
    ("chat", "dashscope"): "qwen3.6-flash",
}
DASHSCOPE_DEFAULT_DIMENSION = 1024


class ProviderConfigError(ValueError):
    """A provider name, model, key or dimension that cannot work; raised at start-up, not mid-request."""


def _normalized(provider: str, known: tuple[str, ...], what: str) -> str:
    name = provider.strip().lower()
    if name not in known:
        raise ProviderConfigError(f"unknown {what} provider {provider!r}; expected one of {', '.join(known)}")
    return name


def _require_key(api_key: str | None, provider: str, what: str) -> str:
    if not api_key:
        hint = " (DASHSCOPE_API_KEY)" if provider == "dashscope" else ""
        raise ProviderConfigError(f"the {provider} {what} provider needs an API key{hint}")
    return api_key


def make_embedder(
    provider: str,
    *,
    model: str | None = None,
    dimension: int | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = 30.0,
    max_retries: int = 2,
    retry_base_delay: float = 0.5,
    document_prefix: str = "query",
) -> Embedder:
    """An embedder for provider "hash", "local", "openai" or "dashscope" (document_prefix: local only)."""
    name = _normalized(provider, EMBEDDING_PROVIDERS, "embedding")
    if name == "hash":
        return HashEmbedder(dimension or DEFAULT_DIMENSION)
    if name == "local":
        if dimension not in (None, local.DIMENSION):
            raise ProviderConfigError(f"the local embedder has dimension {local.DIMENSION}, not {dimension}")
        return LocalEmbedder(document_prefix)
    key = _require_key(api_key, name, "embedding")
    if name == "openai":
        return OpenAIEmbedder(
            base_url or DEFAULT_BASE_URL,
            key,
            model or DEFAULT_MODELS[("embedding", "openai")],
            dimension,
            timeout=timeout,
            max_retries=max_retries,
            retry_base_delay=retry_base_delay,
        )
    return DashScopeEmbedder(
        key,
        model or DEFAULT_MODELS[("embedding", "dashscope")],
        dimension or DASHSCOPE_DEFAULT_DIMENSION,
        base_url,
        timeout=timeout,
        max_retries=max_retries,
        retry_base_delay=retry_base_delay,
    )


def make_chat(
    provider: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = 60.0,
    max_retries: int = 2,
    retry_base_delay: float = 0.5,
) -> ChatModel | None:
    """A chat model for "openai" or "dashscope"; None for "heuristic" (no LLM)."""
    name = _normalized(provider, CHAT_PROVIDERS, "chat")
    if name == "heuristic":
        return None
    key = _require_key(api_key, name, "chat")
    if name == "openai":
        if not model:
            raise ProviderConfigError("the openai chat provider needs a model name")
        return OpenAIChat(
            base_url or DEFAULT_BASE_URL,
            key,
            model,
            timeout=timeout,
            max_retries=max_retries,
            retry_base_delay=retry_base_delay,
        )
    return DashScopeChat(
        key,
        model or DEFAULT_MODELS[("chat", "dashscope")],
        base_url,
        timeout=timeout,
        max_retries=max_retries,
        retry_base_delay=retry_base_delay,
    )
