"""The background worker: leased per-item steps, singleton steps under advisory locks, run records."""
