"""Ultron: a Postgres-native memory hub that many AI agents share."""

__version__ = "0.1.0"
