"""Dashboard endpoints: the single-page app at /dashboard and the JSON it reads under /api/dashboard.

The page and its assets are public (they hold no data); every data endpoint goes through the request's
unit of work (ultron/routing/deps.py), so it takes the same API keys as the rest of the hub, and works
key-less when the hub runs open on loopback.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import date
from importlib import resources
from typing import Annotated, Any, TypeVar
from uuid import UUID

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import BaseModel
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ultron import __version__
from ultron.db.models import Agent
from ultron.errors import NotFound
from ultron.memory import browse
from ultron.memory.schemas import MemoryStats, MemoryType, Scope, Status, Tier
from ultron.providers.base import Embedder
from ultron.routing.deps import SettingsDep, UnitDep, hub_part
from ultron.routing.errors import ERROR_RESPONSES
from ultron.settings_store import RuntimeChange, RuntimeSettings, RuntimeSettingsView
from ultron.skills.service import SkillService
from ultron.tenancy import Actor
from ultron.web import islands, network
from ultron.web import skills as skill_views

# Everything from the hub itself, nothing from anywhere else; style attributes are set from script.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
T = TypeVar("T")
ASSET_TYPES = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
# Optional endpoints other parts of the hub add; the pages for them show an empty state until they exist.
FEATURE_PREFIXES = {
    "skills": ("/skills",),
    "trajectories": ("/trajectories", "/sessions"),
    "import": ("/ingest", "/import", "/imports"),
    "worker": ("/worker",),
}

# The map and the overview's counts scan every memory of the tenant; at 100k that is a noticeable cost for
# a picture that changes slowly, so each agent's answer is reused for this long (`fresh=true` skips it).
SCAN_CACHE_SECONDS = 30.0
MAP_CLUSTERS = 100  # the map's default number of clusters

pages = APIRouter(include_in_schema=False)
api = APIRouter(prefix="/api/dashboard", tags=["dashboard"], responses=ERROR_RESPONSES)


def _static(name: str) -> bytes:
    return resources.files("ultron.web").joinpath("static", name).read_bytes()


@pages.get("/dashboard")
def dashboard_page() -> HTMLResponse:
    headers = {
        "Cache-Control": "no-cache",
        "Content-Security-Policy": CSP,
        "X-Content-Type-Options": "nosniff",
    }
    return HTMLResponse(_static("index.html"), headers=headers)


@pages.get("/dashboard/")
def dashboard_slash() -> RedirectResponse:
    return RedirectResponse("/dashboard")


@pages.get("/dashboard/assets/{name}")
def dashboard_asset(name: str) -> Response:
    suffix = name[name.rfind(".") :] if "." in name else ""
    # Only plain file names of known kinds: no paths, so nothing outside static/ can be read.
    if suffix not in ASSET_TYPES or "/" in name or "\\" in name or name.startswith("."):
        raise NotFound(f"no dashboard asset {name!r}")
    try:
        body = _static(name)
    except (FileNotFoundError, IsADirectoryError):
        raise NotFound(f"no dashboard asset {name!r}") from None
    return Response(body, media_type=ASSET_TYPES[suffix], headers={"Cache-Control": "no-cache"})


class WhoAmI(BaseModel):
    agent: str
    tenant: str
    is_admin: bool
    groups: list[str]
    signed_in: bool
    version: str


class Overview(BaseModel):
    stats: MemoryStats
    days: list[date]
    activity: list[browse.ActivityDay]
    agents: int
    pinned: int
    worker: browse.WorkerSummary | None


class Features(BaseModel):
    skills: bool
    trajectories: bool
    imports: bool
    worker: bool


class ScanCache:
    """Answers of whole-table scans per (agent's view, question), kept for `ttl` seconds."""

    def __init__(self, ttl: float):
        self.ttl = ttl
        self._lock = threading.Lock()
        self._items: dict[tuple[Any, ...], tuple[float, Any]] = {}

    def get(self, key: tuple[Any, ...], compute: Callable[[], T], fresh: bool = False) -> T:
        now = time.monotonic()
        with self._lock:
            hit = self._items.get(key)
        if hit is not None and not fresh and now - hit[0] < self.ttl:
            return hit[1]  # type: ignore[no-any-return]
        value = compute()
        with self._lock:
            self._items = {k: v for k, v in self._items.items() if now - v[0] < self.ttl}
            self._items[key] = (now, value)
        return value


async def _cache(request: Request) -> ScanCache:
    state = request.app.state
    if not hasattr(state, "dashboard_cache"):
        state.dashboard_cache = ScanCache(SCAN_CACHE_SECONDS)
    return state.dashboard_cache  # type: ignore[no-any-return]


CacheDep = Annotated[ScanCache, Depends(_cache)]
SkillsDep = Annotated[SkillService, Depends(hub_part("skills"))]
RuntimeDep = Annotated[RuntimeSettings, Depends(hub_part("runtime"))]
EmbedderDep = Annotated[Embedder, Depends(hub_part("embedder"))]


def _view(actor: Actor) -> tuple[Any, ...]:
    """What decides which memories an agent sees: the cache key of its scans."""
    return (actor.tenant_id, actor.agent_id, tuple(sorted(actor.groups)))


@api.get("/whoami", response_model=WhoAmI)
def whoami(request: Request, unit: UnitDep) -> WhoAmI:
    """Who the key (or the open loopback hub) makes you; the sign-in checks a key with this."""
    actor = unit.write(lambda s, a: a)
    return WhoAmI(
        agent=actor.agent_name,
        tenant=actor.tenant_name,
        is_admin=actor.is_admin,
        groups=list(actor.groups),
        signed_in=bool(request.headers.get("authorization")),
        version=__version__,
    )


@api.get("/features", response_model=Features)
def features(request: Request) -> Features:
    """Which optional parts of the hub are installed, so pages can show data or an honest empty state."""
    # The OpenAPI paths, not app.routes: newer FastAPI nests included routers in the route list.
    paths = list(request.app.openapi().get("paths", {}))

    def has(key: str) -> bool:
        return any(p.startswith(prefix) for p in paths for prefix in FEATURE_PREFIXES[key])

    return Features(
        skills=has("skills"), trajectories=has("trajectories"), imports=has("import"), worker=has("worker")
    )


def _overview(session: Session, actor: Actor, days: int, cache: ScanCache, fresh: bool) -> Overview:
    stats, pinned = cache.get((_view(actor), "stats"), lambda: browse.memory_stats(session, actor), fresh)
    agents = session.execute(
        select(func.count()).select_from(Agent).where(Agent.tenant_id == actor.tenant_id)
    ).scalar_one()
    return Overview(
        stats=stats,
        days=browse.day_range(days),
        activity=browse.activity(session, actor, days=days),
        agents=int(agents),
        pinned=int(pinned),
        worker=browse.worker_summary(session),
    )


@api.get("/overview", response_model=Overview)
def overview(
    unit: UnitDep, cache: CacheDep, days: int = Query(30, ge=1, le=366), fresh: bool = False
) -> Overview:
    """Counts by tier, type, status and scope (reused for 30 s); activity per day; redaction counts."""
    return unit.write(lambda s, a: _overview(s, a, days, cache, fresh))


@api.get("/memories", response_model=browse.MemoryPage)
def list_memories(
    unit: UnitDep,
    memory_type: MemoryType | None = Query(None, alias="type"),
    tier: Tier | None = None,
    status: Status | None = None,
    scope: Scope | None = None,
    agent: str | None = Query(None, max_length=100),
    pinned: bool | None = None,
    q: str | None = Query(None, max_length=500),
    sort: browse.Sort = "created",
    limit: int = Query(50, ge=1, le=browse.MAX_PAGE),
    cursor: str | None = Query(None, max_length=500),
) -> browse.MemoryPage:
    """Filtered memories, one keyset page at a time; browsing counts no hits."""
    f = browse.MemoryFilter(
        memory_type=memory_type, tier=tier, status=status, scope=scope, agent=agent, pinned=pinned, q=q
    )
    return unit.write(lambda s, a: browse.list_memories(s, a, f, sort=sort, limit=limit, cursor=cursor))


@api.get("/memories/{memory_id}/hits", response_model=browse.HitHistory)
def memory_hits(memory_id: UUID, unit: UnitDep, days: int = Query(90, ge=1, le=3650)) -> browse.HitHistory:
    return unit.write(lambda s, a: browse.hit_history(s, a, memory_id, days=days))


@api.get("/map", response_model=browse.MemoryMap)
def memory_map(
    unit: UnitDep,
    cache: CacheDep,
    per_tier: int = Query(300, ge=1, le=browse.MAX_MAP_PER_TIER),
    max_clusters: int = Query(MAP_CLUSTERS, ge=0, le=browse.MAX_MAP_CLUSTERS),
    fresh: bool = False,
) -> browse.MemoryMap:
    """A sample of the most used memories per tier, with the totals it stands for and the knowledge
    clusters of the sampled memories (reused for 30 s)."""
    return unit.write(
        lambda s, a: cache.get(
            (_view(a), "map", per_tier, max_clusters),
            lambda: browse.memory_map(s, a, per_tier=per_tier, max_clusters=max_clusters),
            fresh,
        ),
    )


@api.get("/map/entities", response_model=islands.Islands)
def map_entities(
    unit: UnitDep,
    cache: CacheDep,
    per_tier: int = Query(300, ge=1, le=browse.MAX_MAP_PER_TIER),
    limit: int = Query(30, ge=1, le=islands.MAX_ISLANDS),
    fresh: bool = False,
) -> islands.Islands:
    """Entity islands: the people, places and projects two or more of the map's memories name (the same
    sample as `/map`, reused for 30 s), each with those memories."""

    def compute(session: Session, actor: Actor) -> islands.Islands:
        # The map page's own cache entry (its default max_clusters): the same sample, usually not re-read.
        sample = cache.get(
            (_view(actor), "map", per_tier, MAP_CLUSTERS),
            lambda: browse.memory_map(session, actor, per_tier=per_tier, max_clusters=MAP_CLUSTERS),
            fresh,
        )
        return islands.entity_islands(session, actor, [n.id for n in sample.nodes], limit)

    return unit.write(compute)


@api.get("/skills", response_model=skill_views.SkillList)
def list_skills(unit: UnitDep, settings: SettingsDep) -> skill_views.SkillList:
    """The latest version of each skill (active first), and how far clusters are from crystallizing."""
    return unit.write(
        lambda s, a: skill_views.list_skills(
            s, a, settings.crystallization_threshold, settings.recrystallization_delta
        ),
    )


@api.get("/skills/{slug}", response_model=skill_views.SkillDetail)
def skill_detail(
    unit: UnitDep,
    skills: SkillsDep,
    slug: str = Path(..., max_length=200),
    version: str | None = Query(None, max_length=40, description="MAJOR.MINOR.PATCH; the latest if absent"),
) -> skill_views.SkillDetail:
    """One skill: its versions, the chosen version's SKILL.md, and its cluster's evolution history."""
    return unit.write(lambda s, a: skill_views.skill_detail(s, a, skills, slug, version))


@api.get("/agents", response_model=list[str])
def agent_names(unit: UnitDep) -> list[str]:
    """Names of the tenant's agents (the agent filter's choices)."""

    def names(session: Session, actor: Actor) -> list[str]:
        stmt = select(Agent.name).where(Agent.tenant_id == actor.tenant_id).order_by(Agent.name)
        return list(session.execute(stmt).scalars())

    return unit.write(names)


@api.get("/settings", response_model=dict[str, Any])
def running_settings(unit: UnitDep, settings: SettingsDep) -> dict[str, Any]:
    """The running configuration, every secret and URL credential masked; deployment settings (paths,
    addresses, provider URLs) to admin agents only."""
    admin = unit.write(lambda s, a: a.is_admin)
    return settings.masked(deployment=admin)


@api.get("/settings/runtime", response_model=RuntimeSettingsView)
def runtime_settings(unit: UnitDep, runtime: RuntimeDep) -> RuntimeSettingsView:
    """The settings an admin may change while the hub runs: each one's value in this tenant, its
    configured default, its range, and who changed it when."""
    return unit.write(runtime.view)


@api.patch("/settings/runtime", response_model=RuntimeSettingsView)
def change_runtime_settings(change: RuntimeChange, unit: UnitDep, runtime: RuntimeDep) -> RuntimeSettingsView:
    """Change (or reset) runtime settings for this tenant: admin only; every value is checked first and
    nothing is stored when one is refused; applies in every process within the cache's TTL."""
    return unit.write(lambda s, a: runtime.change(s, a, change))


@api.get("/network", response_model=network.Network)
def similarity_network(
    unit: UnitDep,
    embedder: EmbedderDep,
    limit: int = Query(80, ge=1, le=network.MAX_NODES),
    k: int = Query(4, ge=1, le=10),
) -> network.Network:
    """The most used memories and their nearest neighbours above the model's calibrated similarity."""
    return unit.write(lambda s, a: network.similarity_network(s, a, embedder, limit=limit, k=k))
