"""Entity types the redactor knows, their placeholders, groups and overlap ranks."""

from __future__ import annotations

# Secrets: anything that grants access. Recall target 0.98.
SECRET_ENTITIES = (
    "LLM_API_KEY",
    "GITHUB_TOKEN",
    "AWS_ACCESS_KEY",
    "AWS_SECRET_KEY",
    "REDACTED_TOKEN",
    "REDACTED_CREDENTIAL",
    "PRIVATE_KEY",
    "JWT",
    "DB_URL_PASSWORD",
)

# Personal data. Recall target 0.95 per type. English PERSON needs a spaCy NER model (the default ships in a
# package); Chinese PERSON comes from jieba's tagger.
PII_ENTITIES = (
    "EMAIL_ADDRESS",
    "PHONE_NUMBER",
    "CREDIT_CARD",
    "IP_ADDRESS",
    "IBAN_CODE",
    "CRYPTO",
    "CN_RESIDENT_ID",
    "USER",
    "PERSON",
    "STREET_ADDRESS",
    "QQ_NUMBER",
)

BUILTIN_ENTITIES = frozenset(SECRET_ENTITIES + PII_ENTITIES)

# Overlap resolution: a lower rank wins over any overlapping candidate of a higher rank; within a rank the
# longer span wins. Format-specific detectors beat context-only ones, which beat shape-only PII, so
# `password=sk-...` becomes `password=<LLM_API_KEY>` and `postgres://u:pw@db.example.com` never turns
# into an email.
_RANKS = {
    "PRIVATE_KEY": 0,
    "JWT": 1,
    "LLM_API_KEY": 1,
    "GITHUB_TOKEN": 1,
    "AWS_ACCESS_KEY": 1,
    "AWS_SECRET_KEY": 1,
    "DB_URL_PASSWORD": 1,
    "CN_RESIDENT_ID": 1,
    "CREDIT_CARD": 1,
    "IBAN_CODE": 1,
    "CRYPTO": 1,
    "REDACTED_TOKEN": 2,
    "REDACTED_CREDENTIAL": 2,
    "EMAIL_ADDRESS": 3,
    "PHONE_NUMBER": 3,
    "IP_ADDRESS": 3,
    "USER": 3,
    "PERSON": 4,
    "STREET_ADDRESS": 3,
    "QQ_NUMBER": 1,
}
EXTRA_PATTERN_RANK = 1


_ORDER = {name: i for i, name in enumerate(SECRET_ENTITIES + PII_ENTITIES)}


def rank(entity_type: str) -> int:
    """Overlap rank of an entity type; tenant-defined extra patterns rank with the specific formats."""
    return _RANKS.get(entity_type, EXTRA_PATTERN_RANK)


def tie_break(entity_type: str) -> int:
    """Order between types of one rank on the very same span: a Bearer value is a token before it is a
    credential. Extra patterns come after the built-in types."""
    return _ORDER.get(entity_type, len(_ORDER))


def placeholder(entity_type: str) -> str:
    return f"<{entity_type}>"
