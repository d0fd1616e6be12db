"""Embedding and chat providers behind two small protocols, and the intelligence built on them."""

from ultron.providers.base import ChatModel, Embedder, ProviderError
from ultron.providers.dashscope_api import DashScopeChat, DashScopeEmbedder
from ultron.providers.factory import ProviderConfigError, make_chat, make_embedder
from ultron.providers.hashing import HashEmbedder
from ultron.providers.intelligence import MemoryIntelligence
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
    "MemoryIntelligence",
    "OpenAIChat",
    "OpenAIEmbedder",
    "ProviderConfigError",
    "ProviderError",
    "count_tokens",
    "make_chat",
    "make_embedder",
    "truncate_to_tokens",
]
