"""Composition root: builds the database, providers and services from one Settings object."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from ultron.config import DEFAULT_DEDUP_THRESHOLDS, Settings
from ultron.db.engine import Database, open_database
from ultron.db.vectors import Profile, dedup_thresholds, ensure_profile
from ultron.memory import fulltext
from ultron.memory.hits import HitBuffer
from ultron.memory.service import MemoryService
from ultron.providers.base import Embedder
from ultron.providers.instrumented import InstrumentedChat, InstrumentedEmbedder

log = logging.getLogger(__name__)

DEFAULT_EMBEDDING_MODELS = {
    "dashscope": "text-embedding-v4",
    "openai": "text-embedding-3-small",
}


def _secret(value: Any) -> str | None:
    return value.get_secret_value() if value is not None else None


def build_embedder(settings: Settings) -> Embedder:
    from ultron.providers.factory import make_embedder

    provider = settings.embedding_provider
    api_key = _secret(settings.embedding_api_key)
    if provider == "dashscope":
        api_key = api_key or _secret(settings.dashscope_api_key)
    embedder = make_embedder(
        provider,
        model=settings.embedding_model or DEFAULT_EMBEDDING_MODELS.get(provider),
        dimension=settings.embedding_dimension,
        base_url=settings.dashscope_base_url if provider == "dashscope" else settings.embedding_base_url,
        api_key=api_key,
        timeout=settings.llm_timeout,
        max_retries=settings.llm_max_retries,
        retry_base_delay=settings.llm_retry_base_delay,
        document_prefix=settings.local_document_prefix,
    )
    if provider in ("openai", "dashscope"):  # remote: bound each call by a deadline and a breaker
        from ultron.providers.bounded import BoundedEmbedder

        embedder = BoundedEmbedder(
            embedder, provider, settings.provider_deadline_seconds, settings.provider_cooldown_seconds
        )
    from ultron.providers.cache import CachedEmbedder

    # The cache in front: the provider metrics count the calls that reach the model.
    return CachedEmbedder(InstrumentedEmbedder(embedder, provider))  # type: ignore[return-value]


def build_intelligence(settings: Settings) -> Any:
    from ultron.memory.intelligence import MemoryIntelligence
    from ultron.providers.factory import make_chat

    provider = settings.llm_provider
    api_key = _secret(settings.llm_api_key)
    if provider == "dashscope":
        api_key = api_key or _secret(settings.dashscope_api_key)
    chat = make_chat(
        provider,
        model=settings.llm_model,
        base_url=settings.dashscope_base_url if provider == "dashscope" else settings.llm_base_url,
        api_key=api_key,
        timeout=settings.llm_timeout,
        max_retries=settings.llm_max_retries,
        retry_base_delay=settings.llm_retry_base_delay,
    )
    if chat is not None:  # remote: bound each call by a deadline and a breaker (then the heuristic answers)
        from ultron.providers.bounded import BoundedChat

        chat = BoundedChat(chat, provider, settings.llm_deadline_seconds, settings.provider_cooldown_seconds)
    return MemoryIntelligence(
        None if chat is None else InstrumentedChat(chat, provider),
        l0_max_tokens=settings.l0_max_tokens,
        l1_max_tokens=settings.l1_max_tokens,
        max_input_tokens=settings.llm_max_input_tokens - settings.llm_prompt_reserve_tokens,
    )


def build_redactor(settings: Settings) -> Any:
    if not settings.redaction_enabled:
        log.warning("redaction is disabled: secrets and personal data will be stored as sent")
        return None
    from ultron.privacy.redactor import get_redactor

    return get_redactor(settings.redaction_policy())


@dataclass
class Hub:
    settings: Settings
    db: Database
    embedder: Embedder
    intelligence: Any
    redactor: Any
    memory: MemoryService = field(init=False)

    def __post_init__(self) -> None:
        self.hits = HitBuffer(
            self.db, self.settings.hit_window_hours * 3600.0, flush_seconds=self.settings.hit_flush_seconds
        )
        self.memory = MemoryService(self.settings, self.embedder, self.intelligence, self.redactor, self.hits)
        from ultron.settings_store import RuntimeSettings

        self.runtime = RuntimeSettings(self.settings)  # an admin's changes, per tenant, without a restart
        self.memory.runtime = self.runtime
        from ultron.memory.termstats import TermStatsKeeper

        self.term_stats = TermStatsKeeper(self.db)
        self.memory.term_stats = self.term_stats
        from ultron.ingestion.service import IngestionService

        self.ingestion = IngestionService(self)
        from ultron.companion.service import CompanionService

        self.companion = CompanionService(self.settings, self.memory)
        self.companion.runtime = self.runtime
        self.memory.companion = self.companion
        from ultron.clusters.service import ClusterService

        self.clusters = ClusterService(self.settings, self.intelligence)
        self.memory.clusters = self.clusters
        from ultron.skills.service import SkillService

        self.skills = SkillService(self.settings, self.db, self.embedder, self.clusters, self.intelligence)
        self.skills.redactor = self.redactor
        from ultron.companion.skills import SkillBriefSource

        self.companion.skill_source = SkillBriefSource(self.skills, self.settings.brief_skill_limit)
        self.hits.start()
        self.term_stats.start()

    @classmethod
    def open(cls, settings: Settings, *, migrate: bool = True) -> Hub:
        """Connect, migrate, check the embedding profile and build the services."""
        embedder = build_embedder(settings)
        db = open_database(settings, migrate=migrate)
        try:
            ensure_profile(
                db.engine, Profile(settings.embedding_provider, embedder.model_name, embedder.dimension)
            )
            recorded = dedup_thresholds(db.engine, DEFAULT_DEDUP_THRESHOLDS[settings.embedding_provider])
            hub = cls(settings, db, embedder, build_intelligence(settings), build_redactor(settings))
            hub.memory.hard_threshold, hub.memory.soft_threshold = settings.dedup_band(recorded)
        except BaseException:
            db.dispose()
            raise
        fulltext.warm_up()
        return hub

    def close(self) -> None:
        self.term_stats.stop()
        self.hits.stop()
        self.db.dispose()
        # The remote providers' deadline pools (ultron/providers/bounded.py): drop what is queued.
        for provider in (self.embedder, getattr(self.intelligence, "_chat", None)):
            bounded = getattr(provider, "bounded", None)
            if bounded is not None:
                bounded.close()
