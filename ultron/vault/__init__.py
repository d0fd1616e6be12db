"""Markdown vault: every memory as a Markdown file with YAML front matter (Obsidian-compatible)."""
