"""The recognizer set the analyzer runs: format-specific secrets here, context credentials and PII in their
own modules. All are Presidio recognizers, so the analyzer runs them like any of its own."""

from __future__ import annotations

import regex as re
from presidio_analyzer import EntityRecognizer
from presidio_analyzer.predefined_recognizers import IbanRecognizer

from ultron.privacy import validators as v
from ultron.privacy.credentials import CredentialRecognizer, UrlPasswordRecognizer
from ultron.privacy.pii import (
    CN_RESIDENT_ID_PATTERNS,
    CnMobileRecognizer,
    ContextualPhoneRecognizer,
    CryptoWalletRecognizer,
    HomePathRecognizer,
    OfflineEmailRecognizer,
    StrictCreditCardRecognizer,
    TechnicalIpRecognizer,
)
from ultron.privacy.spans import FLAGS, SpanRecognizer

LLM_API_KEY_PATTERNS = (
    # OpenAI (legacy, sk-proj-, sk-svcacct-, sk-admin-), Anthropic sk-ant-, OpenRouter sk-or-,
    # DashScope sk-<hex>; then Google AI Studio, Groq, Hugging Face and xAI.
    r"(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]{20,}",
    r"(?<![A-Za-z0-9_-])(?:AIza[0-9A-Za-z_-]{35}|gsk_[A-Za-z0-9]{40,}|hf_[A-Za-z0-9]{30,}|xai-[A-Za-z0-9]{40,})",
)
GITHUB_TOKEN_PATTERNS = (
    r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{50,255})",
)
# Real key ids are base32, but tools and docs paste look-alikes with 0/1/8/9: catch any uppercase
# alphanumeric tail (as gitleaks does); nothing else in technical text starts with these prefixes.
AWS_ACCESS_KEY_PATTERNS = (r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])",)
_AWS_SECRET_VALUE = r"(?<![A-Za-z0-9/+])(?P<value>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
AWS_SECRET_KEY_PATTERNS = (
    r"(?i:secret[ _.-]?(?:access[ _.-]?)?key|aws[ _.-]?secret)[^\n]{0,40}?" + _AWS_SECRET_VALUE,
    # A 40-character secret on the same line as an access key id (credentials.csv, `aws configure list`).
    r"(?:AKIA|ASIA)[A-Z0-9]{16}[^\n]{0,60}?" + _AWS_SECRET_VALUE,
)
AUTH_TOKEN_PATTERNS = (
    r"(?<![A-Za-z0-9])(?i:bearer|basic)[ \t]+(?P<value>[A-Za-z0-9._~+/-]+=*)(?![A-Za-z0-9._~+/=-])",
    r"(?i:authorization)[\"']?[ \t]*[:=][ \t]*[\"']?(?i:token)[ \t]+(?P<value>[A-Za-z0-9._~+/-]+=*)",
)
_PEM = r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"
PRIVATE_KEY_PATTERNS = (
    _PEM + r".*?-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----",
    # Truncated in a log: the header and whatever base64 lines follow it.
    _PEM + r"(?:(?:\r?\n|\\n|[ \t])+(?:[A-Za-z0-9+/=:,-]+[ \t]*)+)+",
)
JWT_PATTERNS = (r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*",)


def _cn_id_accept(value: str) -> bool:
    return v.cn_resident_id_valid(value)


def build_recognizers(language: str) -> list[EntityRecognizer]:
    """All built-in recognizers for one analyzer language."""
    return [
        SpanRecognizer("LLM_API_KEY", LLM_API_KEY_PATTERNS, language, accept=_llm_key_accept),
        SpanRecognizer("GITHUB_TOKEN", GITHUB_TOKEN_PATTERNS, language),
        SpanRecognizer("AWS_ACCESS_KEY", AWS_ACCESS_KEY_PATTERNS, language),
        SpanRecognizer("AWS_SECRET_KEY", AWS_SECRET_KEY_PATTERNS, language, accept=v.mixed_case_secret),
        SpanRecognizer("REDACTED_TOKEN", AUTH_TOKEN_PATTERNS, language, accept=v.looks_like_token),
        SpanRecognizer("PRIVATE_KEY", PRIVATE_KEY_PATTERNS, language, flags=FLAGS | re.DOTALL),
        SpanRecognizer("JWT", JWT_PATTERNS, language),
        SpanRecognizer("CN_RESIDENT_ID", CN_RESIDENT_ID_PATTERNS, language, accept=_cn_id_accept),
        CredentialRecognizer(language),
        UrlPasswordRecognizer(language),
        HomePathRecognizer(language),
        CnMobileRecognizer(language),
        ContextualPhoneRecognizer(language),
        OfflineEmailRecognizer(language),
        TechnicalIpRecognizer(language),
        StrictCreditCardRecognizer(language),
        IbanRecognizer(supported_language=language),
        CryptoWalletRecognizer(language),
    ]


def _llm_key_accept(value: str) -> bool:
    """`sk-` also starts prose (`sk-learn-compatible`); a key has a long random run. Other prefixes are
    distinctive enough on their own."""
    return not value.startswith("sk-") or v.looks_like_key_body(value[3:])
