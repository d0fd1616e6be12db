"""Typed errors: each carries its HTTP status; one handler renders `{error, detail}`."""

from __future__ import annotations


class UltronError(Exception):
    status_code = 400
    error = "bad_request"

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail


class ValidationFailed(UltronError):
    status_code = 422
    error = "validation_error"


class NotFound(UltronError):
    status_code = 404
    error = "not_found"


class Unauthorized(UltronError):
    status_code = 401
    error = "unauthorized"


class Forbidden(UltronError):
    status_code = 403
    error = "forbidden"


class Conflict(UltronError):
    status_code = 409
    error = "conflict"


class PayloadTooLarge(UltronError):
    status_code = 413
    error = "payload_too_large"


class DatabaseSetupError(UltronError):
    """The database cannot be used as configured (no pgvector, wrong embedding model, ...)."""

    status_code = 503
    error = "database_setup"


class EmbeddingModelMismatch(DatabaseSetupError):
    error = "embedding_model_mismatch"


class ServiceUnavailable(UltronError):
    """Try again later: sent with a Retry-After header of `retry_after` seconds."""

    status_code = 503
    error = "service_unavailable"

    def __init__(self, detail: str, retry_after: int = 5):
        super().__init__(detail)
        self.retry_after = max(1, int(retry_after))


class ProviderUnavailable(ServiceUnavailable):
    """The embedding (or chat) provider failed, timed out or answered garbage; nothing was written."""

    error = "provider_unavailable"


class DatabaseBusy(ServiceUnavailable):
    """Every pooled database connection is in use."""

    error = "database_busy"
