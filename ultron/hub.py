"""Composition root: builds the database, providers and services from one Settings object."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from ultron.clusters.service import ClusterService
from ultron.companion.hooks import MemoryHooks
from ultron.companion.service import CompanionService
from ultron.companion.skills import SkillBriefSource
from ultron.config import DEFAULT_DEDUP_THRESHOLDS, Settings
from ultron.db.engine import Database, open_database
from ultron.db.vectors import Profile, dedup_thresholds, ensure_profile
from ultron.ingestion.service import IngestionService
from ultron.memory import fulltext
from ultron.memory.hits import HitBuffer
from ultron.memory.intelligence import MemoryIntelligence
from ultron.memory.service import MemoryService
from ultron.memory.termstats import TermStatsKeeper
from ultron.providers.base import Embedder
from ultron.providers.bounded import BoundedChat, BoundedEmbedder
from ultron.providers.cache import CachedEmbedder
from ultron.providers.factory import make_chat, make_embedder
from ultron.providers.instrumented import InstrumentedChat, InstrumentedEmbedder
from ultron.settings_store import RuntimeSettings
from ultron.skills.service import SkillService
from ultron.trajectory.pipeline import Steps
from ultron.worker.runner import ItemSteps, Worker

log = logging.getLogger(__name__)

DEFAULT_EMBEDDING_MODELS = {
    "dashscope": "text-embedding-v4",
    "openai": "text-embedding-3-small",
}


def _secret(value: Any) -> str | None:
    return value.get_secret_value() if value is not None else None


def build_embedder(settings: Settings) -> Embedder:
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
        embedder = BoundedEmbedder(
            embedder, provider, settings.provider_deadline_seconds, settings.provider_cooldown_seconds
        )
    # The cache in front: the provider metrics count the calls that reach the model.
    return CachedEmbedder(InstrumentedEmbedder(embedder, provider))  # type: ignore[return-value]


def build_intelligence(settings: Settings) -> Any:
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
    from ultron.privacy.redactor import get_redactor  # here: loads Presidio, not at all when redaction is off

    return get_redactor(settings.redaction_policy())


@dataclass
class Hub:
    """The composition root: every service built once, in dependency order, each given the collaborators
    it uses. The API, the SDK, the CLI and the worker reach the services through it; no service gets it."""

    settings: Settings
    db: Database
    embedder: Embedder
    intelligence: Any
    redactor: Any
    # (HARD, SOFT) dedup thresholds recorded in the database for its embedding model (`open` reads them).
    dedup_band: tuple[float, float] | None = None
    hits: HitBuffer = field(init=False)
    runtime: RuntimeSettings = field(init=False)
    term_stats: TermStatsKeeper = field(init=False)
    clusters: ClusterService = field(init=False)
    memory: MemoryService = field(init=False)
    skills: SkillService = field(init=False)
    companion: CompanionService = field(init=False)
    ingestion: IngestionService = field(init=False)

    def __post_init__(self) -> None:
        settings, db, intelligence = self.settings, self.db, self.intelligence
        self.hits = HitBuffer(
            db, settings.hit_window_hours * 3600.0, flush_seconds=settings.hit_flush_seconds
        )
        self.runtime = RuntimeSettings(settings)  # an admin's changes, per tenant, without a restart
        self.term_stats = TermStatsKeeper(db)
        self.clusters = ClusterService(settings, intelligence)
        # the clusters' walk answer is read from the planner's statistics: read again after an ANALYZE
        self.term_stats.listen(self.clusters.forget_walk)
        # The companion's hooks into memory (emotion, ripples, re-ranking): built before the memory service.
        hooks = MemoryHooks(settings, intelligence, self.embedder, self.runtime)
        self.memory = MemoryService(
            settings,
            self.embedder,
            intelligence,
            self.redactor,
            self.hits,
            companion=hooks,
            clusters=self.clusters,
            term_stats=self.term_stats,
            runtime=self.runtime,
            dedup_band=self.dedup_band,
        )
        self.skills = SkillService(
            settings, db, self.embedder, self.clusters, intelligence, redactor=self.redactor
        )
        skill_source = SkillBriefSource(self.skills, settings.brief_skill_limit)
        self.companion = CompanionService(settings, self.memory, hooks, skill_source=skill_source)
        # The trajectory steps bound to their collaborators: the worker runs them on leased items, and
        # ingestion segments through the same bound step when it segments inline.
        self.steps = Steps(settings, intelligence, self.memory)
        self.ingestion = IngestionService(
            settings, db, intelligence, self.memory, self.redactor, self.steps.segment_session
        )
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
            band = settings.dedup_band(recorded)
            hub = cls(settings, db, embedder, build_intelligence(settings), build_redactor(settings), band)
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


def build_worker(hub: Hub, *, worker_id: str | None = None, steps: ItemSteps | None = None) -> Worker:
    """The worker with the collaborators its steps use (the worker never sees the hub). `steps`: the
    trajectory pipeline's, unless a test wraps them."""
    return Worker(
        hub.db,
        hub.settings,
        steps=steps or hub.steps,
        memory=hub.memory,
        runtime=hub.runtime,
        skills=hub.skills,
        worker_id=worker_id,
    )
