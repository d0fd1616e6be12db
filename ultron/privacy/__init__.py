"""Redaction of secrets and personal data before anything is stored, embedded, archived or sent out."""

from ultron.privacy.policy import UUID_PATTERN, RedactionPolicy
from ultron.privacy.redactor import Finding, Redaction, Redactor, get_default_redactor

__all__ = ["UUID_PATTERN", "Finding", "Redaction", "RedactionPolicy", "Redactor", "get_default_redactor"]
