"""Ultron: a Postgres-native memory hub that many AI agents share."""

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Ultron", "UltronClient", "__version__"]

if TYPE_CHECKING:
    from ultron.sdk import Ultron, UltronClient


def __getattr__(name: str) -> Any:
    # Lazy, so `import ultron` stays cheap for the CLI and tools.
    if name in ("Ultron", "UltronClient"):
        from ultron import sdk

        return getattr(sdk, name)
    raise AttributeError(name)
