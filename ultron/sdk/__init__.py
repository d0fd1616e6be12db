"""The Python SDK: `Ultron()` in-process on the embedded default, or over HTTP with `base_url`."""

from ultron.sdk._client import Ultron, UltronClient

__all__ = ["Ultron", "UltronClient"]
