"""Valence/arousal: given on upload, or inferred by the configured LLM; resonance between two moods.

Valence runs from -1 (negative) to 1 (positive), arousal from 0 (calm) to 1 (intense): Russell's
circumplex, as in the Ombre Brain seed.
"""

from __future__ import annotations

import math
from typing import Any

from ultron.providers.tokens import truncate_to_tokens

EMOTION_SYSTEM = (
    "You rate the emotional tone of one memory an AI agent stored. Answer only JSON: "
    '{"valence": number from -1 (very negative) to 1 (very positive), '
    '"arousal": number from 0 (calm) to 1 (intense)}. A neutral technical note is about 0 and 0.2.'
)
EMOTION_INPUT_TOKENS = 1024
EMOTION_REPLY_TOKENS = 48
# Largest distance in the (valence/2, arousal) unit square.
_MAX_DISTANCE = math.sqrt(2.0)


def _number(value: Any, low: float, high: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return min(max(float(value), low), high)


def infer_emotion(
    intelligence: Any, content: str, context: str, resolution: str
) -> tuple[float, float] | None:
    """Ask the LLM (when one is configured) for valence and arousal; None when none or no usable answer."""
    if not getattr(intelligence, "llm_available", False):
        return None
    text = truncate_to_tokens("\n".join(p for p in (content, context, resolution) if p), EMOTION_INPUT_TOKENS)
    # MemoryIntelligence._ask handles provider errors, JSON parsing and the failure counters.
    answer = intelligence._ask("emotion", EMOTION_SYSTEM, text, EMOTION_REPLY_TOKENS, fallback=False)
    if not isinstance(answer, dict):
        return None
    valence = _number(answer.get("valence"), -1.0, 1.0)
    arousal = _number(answer.get("arousal"), 0.0, 1.0)
    if valence is None or arousal is None:
        return None
    return round(valence, 3), round(arousal, 3)


def resonance(
    valence: float | None, arousal: float | None, mem_valence: float | None, mem_arousal: float | None
) -> float | None:
    """Closeness of a memory's mood to the asked one, 0..1 (1 = same); None when nothing to compare."""
    parts: list[float] = []
    if valence is not None and mem_valence is not None:
        parts.append((valence - mem_valence) / 2.0)
    if arousal is not None and mem_arousal is not None:
        parts.append(arousal - mem_arousal)
    if not parts:
        return None
    distance = math.sqrt(sum(p * p for p in parts))
    return max(0.0, 1.0 - distance / (_MAX_DISTANCE if len(parts) == 2 else 1.0))
