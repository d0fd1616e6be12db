"""Text shapes shared by upload, dedup, search and calibration."""

from __future__ import annotations

from ultron.memory.classify import words_of

MEMORY_TYPES = ("error", "security", "correction", "pattern", "preference", "life")
# An agent's own lessons: stored apart, never inferred for an upload, never merged into the types above.
REFLECTION_TYPE = "reflection"
# What a companion knows about its person: archived after `personal_ttl_days` unused, not `cold_ttl_days`.
PERSONAL_TYPES = ("life", "preference", REFLECTION_TYPE)
STORED_TYPES = (*MEMORY_TYPES, REFLECTION_TYPE)

# Characters of each field that go into the embedding; the head of a field carries its subject.
EMBED_FIELD_CHARS = {"content": 1200, "context": 400, "resolution": 600}


def embedded_fields(fields: dict[str, str], turn: bool) -> dict[str, str]:
    """The fields embedding_text reads. `turn`: the memory is a turn of a thread ("Maya: Lily is allergic
    to peanuts"): its words are embedded without the speaker label, which otherwise dominates a short
    turn's vector (every "Maya: ..." turn lands near every other). The speaker stays in the full-text
    document, where a query naming them still matches (a separate signal), and in the stored content."""
    return {**fields, "content": words_of(fields["content"])} if turn else fields


def embedding_text(content: str, context: str = "", resolution: str = "") -> str:
    """The text a memory is embedded from: content first, then context and resolution, each capped."""
    parts = [content.strip()[: EMBED_FIELD_CHARS["content"]]]
    if context.strip():
        parts.append(context.strip()[: EMBED_FIELD_CHARS["context"]])
    if resolution.strip():
        parts.append(resolution.strip()[: EMBED_FIELD_CHARS["resolution"]])
    return "\n".join(parts)
