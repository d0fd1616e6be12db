"""The redactor every memory, session and outbound prompt passes through before it is stored or sent."""

from __future__ import annotations

import bisect
import re as std_re
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import regex as re
from presidio_analyzer import AnalyzerEngine, EntityRecognizer, RecognizerRegistry, RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts
from presidio_analyzer.predefined_recognizers import SpacyRecognizer

from ultron.lru import Lru
from ultron.privacy import validators
from ultron.privacy.credentials import is_credential_key
from ultron.privacy.entities import BUILTIN_ENTITIES, placeholder, rank, tie_break
from ultron.privacy.nlp import LANGUAGES, NoContextEnhancer, OfflineSpacyNlpEngine
from ultron.privacy.personal import ChineseNameRecognizer, personal_recognizers
from ultron.privacy.policy import RedactionPolicy
from ultron.privacy.recognizers import build_recognizers
from ultron.privacy.spans import SpanRecognizer

# Cheap pre-check: text none of these can match holds no entity, and Presidio is skipped. Each entry is a
# superset of what its recognizers accept: a phone number has seven digits with at most one separator
# between two of them (`+33 5 69 40 01 42`); cards, IBANs and id numbers have three digits in a row.
_TRIGGERS = {
    "EMAIL_ADDRESS": r"@",
    "PHONE_NUMBER": r"\d(?:[ ().-]?\d){6}",
    "CREDIT_CARD": r"\d{3}",
    "IBAN_CODE": r"\d{3}",
    "CN_RESIDENT_ID": r"\d{3}",
    "IP_ADDRESS": r"\d\.\d|::|[0-9A-Fa-f]:[0-9A-Fa-f]",
    "CRYPTO": r"bc1|[13][1-9A-HJ-NP-Za-km-z]{25}|0x[0-9a-fA-F]{40}",
    "LLM_API_KEY": r"sk-|AIza|gsk_|hf_|xai-",
    "GITHUB_TOKEN": r"gh[pousr]_|github_pat_",
    "AWS_ACCESS_KEY": r"AKIA|ASIA|ABIA|ACCA",
    "AWS_SECRET_KEY": r"(?i:secret)|AKIA|ASIA",
    "REDACTED_TOKEN": r"(?i:bearer|basic|authorization)",
    # `auth` alone names no secret (is_credential_key wants a secret word, `token`, or a qualified `key`):
    # it counts only in `auth=(…)` and `…Auth(…)` (requests' basic auth); Slack tokens are `xox?-`.
    "REDACTED_CREDENTIAL": (
        r"(?i:pass|pwd|pw|secret|token|key|credential|identified|auth[ \t]*[=(]|://)|密码|口令|密钥|秘钥|私钥|令牌"
        r"|-[pu]|xox[abposr]-|[sr]k_|glpat-|npm_|pypi-|shpat_|SG\.|ya29\.|redis-cli"
    ),
    "PRIVATE_KEY": r"PRIVATE KEY",
    "JWT": r"eyJ",
    "DB_URL_PASSWORD": r"://",
    "USER": r"/home/|/Users/|(?i:users)[\\/]",
    "STREET_ADDRESS": r"\d[A-Za-z]?,?[ \t]+[A-Z]|[路街道巷弄胡同里][ \t]*\d",
    "QQ_NUMBER": r"(?i:qq)|扣扣",
    # English names need a capitalised word, Chinese ones two Chinese characters.
    "PERSON": r"[A-Z][a-z]|[\u4e00-\u9fff]{2}",
}
_CJK = re.compile(r"[\u4e00-\u9fff]")
# The per-text cache's mark of a text `warm` found no trigger in (its key's third part).
_PLAIN = "plain"
# Findings of recent texts, per policy: agents re-send the same text (retries, re-uploads, a context shared
# by a batch's items) and the recognizers are most of an upload's redaction cost. Texts longer than
# CACHE_MAX_CHARS are not kept, so the cache holds at most CACHE_SIZE * CACHE_MAX_CHARS characters.
CACHE_SIZE = 4096
CACHE_MAX_CHARS = 4000
# Texts per spaCy `pipe` call when a batch is redacted (`Redactor.warm`).
NER_BATCH = 64


@dataclass(frozen=True)
class Redaction:
    """Redacted text and how many of each entity type were replaced (never the values)."""

    text: str
    entities: dict[str, int]


@dataclass(frozen=True)
class Finding:
    entity_type: str
    start: int
    end: int


class Redactor:
    """Presidio analyzer plus Ultron's recognizers; build once per process and share across threads."""

    def __init__(self, policy: RedactionPolicy | None = None):
        self.policy = policy or RedactionPolicy()
        self._lock = threading.Lock()
        self._engines: dict[str | None, tuple[AnalyzerEngine, frozenset[str]]] = {}
        self._plans: dict[RedactionPolicy, _Plan] = {}
        self._merged: dict[RedactionPolicy, RedactionPolicy] = {}
        self._counts: Counter[str] = Counter()
        self._counts_lock = threading.Lock()
        self._cache: Lru[tuple[int, str] | tuple[int, str, str], tuple[Finding, ...]] = Lru(CACHE_SIZE)
        self._plan(self.policy)
        # Presidio compiles its recognizers' patterns on first use: do that now, for both languages.
        self.redact("warm-up: alice@example.com 13800138000 password=hunter2 /home/alice 10.0.0.1")
        self.redact("预热：手机13800138000，邮箱alice@example.com，密码：hunter2")
        self._counts.clear()
        self._cache.clear()

    # --- public API -------------------------------------------------------------------------------------

    def redact(self, text: str, policy: RedactionPolicy | None = None) -> Redaction:
        findings = self.detect(text, policy)
        if not findings:
            return Redaction(text, {})
        parts, pos = [], 0
        for f in findings:
            parts += [text[pos : f.start], placeholder(f.entity_type)]
            pos = f.end
        parts.append(text[pos:])
        return Redaction("".join(parts), dict(Counter(f.entity_type for f in findings)))

    def redact_fields(
        self, fields: Mapping[str, str | None], policy: RedactionPolicy | None = None
    ) -> tuple[dict[str, str | None], dict[str, int]]:
        """Redact each field; counts are summed over the fields. None stays None. The fields the NER model
        must read go through it in one `pipe` pass (`warm`): an upload's three fields cost ~0.6x three
        calls."""
        values = [v for v in fields.values() if v]
        if len(set(values)) > 1:
            self.warm(values, policy)
        out: dict[str, str | None] = {}
        total: Counter[str] = Counter()
        for name, value in fields.items():
            if value is None:
                out[name] = None
                continue
            result = self.redact(value, policy)
            out[name] = result.text
            total.update(result.entities)
        return out, dict(total)

    def redact_json(self, value: Any, policy: RedactionPolicy | None = None) -> tuple[Any, dict[str, int]]:
        """Redact every string in nested dicts and lists (session messages, tool calls). Keys are kept; the
        value of a credential-named key (`"password": "…"`) is redacted whole even with nothing else in it."""
        total: Counter[str] = Counter()
        return self._walk(value, self._effective(policy), total, key=None), dict(total)

    def detect(self, text: str, policy: RedactionPolicy | None = None) -> list[Finding]:
        """Non-overlapping findings in text order; what `redact` replaces."""
        plan = self._plan(self._effective(policy))
        language = "zh" if _is_chinese(text) else "en"
        if (
            not text
            or not plan.entities[language]
            or self._plain(plan, text)
            or not any(t.search(text) for t in plan.triggers)
        ):
            self._count({"calls": 1, "chars": len(text), "fast_path": 1})
            return []
        cached = self._cached(plan, text)
        if cached is not None:
            self._count(Counter(calls=1, chars=len(text), cached=1) + Counter(f.entity_type for f in cached))
            return list(cached)
        findings = self._analyze(plan, text, language)
        self._count(Counter(calls=1, chars=len(text)) + Counter(f.entity_type for f in findings))
        self._keep(plan, text, findings)
        return findings

    def warm(self, texts: list[str], policy: RedactionPolicy | None = None) -> None:
        """Analyze many texts at once, so that redacting each of them next is a cache hit: a batch upload
        runs the NER model over its texts in a few `pipe` calls instead of one call per text."""
        plan = self._plan(self._effective(policy))
        wanted: dict[str, list[str]] = {lang: [] for lang in LANGUAGES}
        for text in dict.fromkeys(texts):
            language = "zh" if _is_chinese(text) else "en"
            # The cache first: a batch upload's fields were warmed with the batch, and the trigger
            # patterns cost more than the lookup.
            if (
                not text
                or len(text) > CACHE_MAX_CHARS
                or not plan.entities[language]
                or self._cached(plan, text) is not None
                or self._plain(plan, text)
            ):
                continue
            if any(t.search(text) for t in plan.triggers):
                wanted[language].append(text)
            else:  # `detect` takes its fast path on it without reading it for the triggers again
                self._cache.put((id(plan), text, _PLAIN), ())
        for language, batch in wanted.items():
            nlp = _nlp(plan.engine)
            artifacts: Sequence[NlpArtifacts | None]
            if "PERSON" not in plan.entities[language] or language not in nlp.person_languages:
                artifacts = [None] * len(batch)  # no NER wanted: analyze() alone is cheap
            else:
                artifacts = nlp.process_many(batch, language, NER_BATCH)
            for text, artifact in zip(batch, artifacts, strict=True):
                self._keep(plan, text, self._analyze(plan, text, language, artifact))

    def forget(self) -> None:
        """Empty the per-text cache (benchmarks: each timed call pays its own analysis)."""
        self._cache.clear()

    def _cached(self, plan: _Plan, text: str) -> tuple[Finding, ...] | None:
        if len(text) > CACHE_MAX_CHARS:
            return None
        return self._cache.get((id(plan), text))

    def _plain(self, plan: _Plan, text: str) -> bool:
        """`warm` found none of the plan's triggers in this text (an upload's fields are warmed, then
        redacted one by one: each was read for the triggers twice, ~40 us an upload of plain text)."""
        return len(text) <= CACHE_MAX_CHARS and self._cache.get((id(plan), text, _PLAIN)) is not None

    def _keep(self, plan: _Plan, text: str, findings: list[Finding]) -> None:
        if len(text) > CACHE_MAX_CHARS:
            return
        self._cache.put((id(plan), text), tuple(findings))

    def _analyze(self, plan: _Plan, text: str, language: str, artifacts: Any = None) -> list[Finding]:
        # NER runs only when this policy wants names in this language (private memories keep them).
        skip_ner = "PERSON" not in plan.entities[language]
        results = plan.engine.analyze(
            text=text,
            language=language,
            entities=plan.entities[language],
            allow_list=list(plan.policy.allow_list) or None,
            ad_hoc_recognizers=plan.extra[language] or None,
            nlp_artifacts=_nlp(plan.engine).empty_artifacts(language) if skip_ner else artifacts,
        )
        return _resolve([r for r in results if r.entity_type != "PERSON" or _whole_words(text, r)])

    def stats(self) -> dict[str, int]:
        """Calls, characters, fast-path calls and per-entity counts since construction."""
        with self._counts_lock:
            return dict(self._counts)

    def _count(self, counts: Mapping[str, int]) -> None:
        with self._counts_lock:
            self._counts.update(counts)

    # --- internals --------------------------------------------------------------------------------------

    def _effective(self, policy: RedactionPolicy | None) -> RedactionPolicy:
        """The global policy, or a tenant's merged over it (cached: tenants are few, calls many)."""
        if policy is None:
            return self.policy
        merged = self._merged.get(policy)
        if merged is None:
            merged = self._merged[policy] = self.policy.merged(policy)
        return merged

    def _walk(self, value: Any, policy: RedactionPolicy, total: Counter[str], key: str | None) -> Any:
        if isinstance(value, str):
            result = self.redact(value, policy)
            if not result.entities and key is not None and _credential_value(key, value, policy):
                total["REDACTED_CREDENTIAL"] += 1
                return placeholder("REDACTED_CREDENTIAL")
            total.update(result.entities)
            return result.text
        if isinstance(value, Mapping):
            return {
                k: self._walk(v, policy, total, key=k if isinstance(k, str) else None)
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            items = [self._walk(v, policy, total, key=None) for v in value]
            return type(value)(items) if isinstance(value, tuple) else items
        return value

    def _plan(self, policy: RedactionPolicy) -> _Plan:
        plan = self._plans.get(policy)
        if plan is None:
            with self._lock:
                plan = self._plans.get(policy)
                if plan is None:
                    plan = self._build_plan(policy)
                    self._plans[policy] = plan
        return plan

    def _build_plan(self, policy: RedactionPolicy) -> _Plan:
        engine, person_languages = self._engine(policy.spacy_model)
        extra_names = {name for name, _ in policy.extra_patterns}
        entities: dict[str, list[str]] = {}
        extra: dict[str, list[EntityRecognizer]] = {}
        for lang in LANGUAGES:
            builtin = BUILTIN_ENTITIES - {"PERSON"} | ({"PERSON"} if lang in person_languages else set())
            entities[lang] = sorted(e for e in builtin | extra_names if policy.enabled(e))
            extra[lang] = [
                SpanRecognizer(name, (regex,), lang, flags=re.MULTILINE)
                for name, regex in policy.extra_patterns
                if policy.enabled(name)
            ]
        person = any("PERSON" in entities[lang] for lang in LANGUAGES)
        builtin_triggers = "|".join(
            _TRIGGERS[e] for e in sorted(_TRIGGERS) if policy.enabled(e) and (e != "PERSON" or person)
        )
        # Tenant patterns are their own pre-check, each apart: joined, their group numbers would shift.
        tenant_triggers = [regex for name, regex in policy.extra_patterns if policy.enabled(name)]
        # The built-in pre-check by Python's own `re`: a third cheaper than `regex` over text that holds none
        # of them (36 -> 24 us a field of the synthetic corpus), where it reads every position; tenant
        # patterns keep `regex`, whose syntax they were written in.
        triggers: list[Any] = [std_re.compile(builtin_triggers, std_re.MULTILINE)] if builtin_triggers else []
        triggers += [re.compile(t, re.MULTILINE) for t in tenant_triggers]
        return _Plan(policy, engine, entities, extra, triggers)

    def _engine(self, model: str | None) -> tuple[AnalyzerEngine, frozenset[str]]:
        if model not in self._engines:
            nlp = OfflineSpacyNlpEngine(model)
            nlp.load()
            registry = RecognizerRegistry(supported_languages=list(LANGUAGES))
            for lang in LANGUAGES:
                for recognizer in [*build_recognizers(lang), *personal_recognizers(lang)]:
                    registry.add_recognizer(recognizer)
                registry.add_recognizer(ChineseNameRecognizer(lang))  # Chinese names in either pipeline
            for lang in nlp.person_languages:
                registry.add_recognizer(
                    SpacyRecognizer(supported_language=lang, supported_entities=["PERSON"])
                )
            engine = AnalyzerEngine(
                registry=registry,
                nlp_engine=nlp,
                supported_languages=list(LANGUAGES),
                context_aware_enhancer=NoContextEnhancer(),
            )
            # Rules find names without a model (kin words in English, jieba's tagger in Chinese); the model
            # adds English NER.
            self._engines[model] = (engine, frozenset(LANGUAGES))
        return self._engines[model]


@dataclass(frozen=True)
class _Plan:
    """Everything one policy needs at call time, computed once."""

    policy: RedactionPolicy
    engine: AnalyzerEngine
    entities: dict[str, list[str]]
    extra: dict[str, list[EntityRecognizer]]
    triggers: list[Any]  # compiled patterns (re's and regex's), asked `search` only


def _nlp(engine: AnalyzerEngine) -> OfflineSpacyNlpEngine:
    """The analyzer's NLP engine, typed as what `_engine` always builds it with."""
    return cast(OfflineSpacyNlpEngine, engine.nlp_engine)


def _is_chinese(text: str) -> bool:
    """Chinese when at least one character in ten is a CJK ideograph; it picks the spaCy pipeline."""
    return len(_CJK.findall(text)) * 10 >= len(text.strip())


def _whole_words(text: str, r: RecognizerResult) -> bool:
    """A name never starts or ends inside a word: `a package called PyYAML` must not become
    `<PERSON>YAML`. Only Latin letters and digits count, since Chinese text has no spaces between words."""
    before = text[r.start - 1 : r.start]
    after = text[r.end : r.end + 1]
    return not (before.isascii() and before.isalnum()) and not (after.isascii() and after.isalnum())


def _resolve(results: list[RecognizerResult]) -> list[Finding]:
    """Keep non-overlapping findings: lower rank first (specific formats beat generic context beat shapes),
    then the longer span, then the type order, then the earlier span."""
    ordered = sorted(
        results, key=lambda r: (rank(r.entity_type), -(r.end - r.start), tie_break(r.entity_type), r.start)
    )
    starts: list[int] = []  # taken spans, sorted and disjoint
    taken: list[Finding] = []
    for r in ordered:
        i = bisect.bisect_right(starts, r.start)
        if (
            r.end <= r.start
            or (i and taken[i - 1].end > r.start)
            or (i < len(taken) and taken[i].start < r.end)
        ):
            continue
        starts.insert(i, r.start)
        taken.insert(i, Finding(r.entity_type, r.start, r.end))
    return taken


def _credential_value(key: str, value: str, policy: RedactionPolicy) -> bool:
    return (
        policy.enabled("REDACTED_CREDENTIAL")
        and is_credential_key(key)
        and value not in policy.allow_list
        and not validators.is_placeholder_value(value)
        and not validators.is_path_like(value)
    )


_default: Redactor | None = None
_default_lock = threading.Lock()
_by_policy: dict[RedactionPolicy, Redactor] = {}


def get_redactor(policy: RedactionPolicy) -> Redactor:
    """The process-wide redactor for a global policy (the default one for the default policy)."""
    if policy == RedactionPolicy():
        return get_default_redactor()
    with _default_lock:
        if policy not in _by_policy:
            _by_policy[policy] = Redactor(policy)
        return _by_policy[policy]


def get_default_redactor() -> Redactor:
    """The process-wide redactor with the default policy, built on first use."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Redactor()
    return _default
