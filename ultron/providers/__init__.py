"""Embedding and chat providers behind two small protocols: adapters only (the memory rules built on them
are ultron.memory.intelligence and ultron.memory.heuristic)."""

from ultron.providers.base import ChatModel, Embedder, ProviderError
from ultron.providers.dashscope_api import DashScopeChat, DashScopeEmbedder
from ultron.providers.factory import ProviderConfigError, make_chat, make_embedder
from ultron.providers.hashing import HashEmbedder
from ultron.providers.local import LocalEmbedder
from ultron.providers.openai_compat import OpenAIChat, OpenAIEmbedder
from ultron.providers.tokens import count_tokens, truncate_to_tokens

__all__ = [
    "ChatModel",
    "DashScopeChat",
    "DashScopeEmbedder",
    "Embedder",
    "HashEmbedder",
    "LocalEmbedder",
    "OpenAIChat",
    "OpenAIEmbedder",
    "ProviderConfigError",
    "ProviderError",
    "count_tokens",
    "make_chat",
    "make_embedder",
    "truncate_to_tokens",
]
