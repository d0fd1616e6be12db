"""Companion memory: the session-start brief, pins, emotion and resonance, reflections, time ripple,
serendipity."""
