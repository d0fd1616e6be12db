"""The chat-history import kinds, apart from the schemas so the CLI's parser can name them cheaply."""

IMPORT_KINDS: tuple[str, ...] = ("chatgpt", "claude", "deepseek", "markdown", "text")
