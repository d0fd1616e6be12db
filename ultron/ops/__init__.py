"""Operations: structured logs with request ids, Prometheus metrics, readiness, backup and restore."""
