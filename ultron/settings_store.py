"""Settings an admin may change while the hub runs, stored per tenant in `runtime_settings`.

Only the tunables in `EDITABLE` can change: ranking weights, serendipity, decay and emotion weights, tier
shares and TTLs, the brief's limits. Never a secret, a URL, a provider or a pool size (those are read once
when the process is composed). A change is validated against the field's own type and range in `Settings`
(and the cross-field rules), written with who made it, and logged as a `settings` activity event.

Every process reads a tenant's changes through a small cache: a change made through one process applies
there at once (its cache entry is dropped when the transaction commits) and in every other process (the
other API workers, the worker) within `RUNTIME_SETTINGS_TTL_SECONDS`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from sqlalchemy import delete, event, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from ultron.config import EDITABLE, RUNTIME_SETTINGS_TTL_SECONDS, Settings
from ultron.db.models import ActivityEvent, Agent, RuntimeSetting
from ultron.errors import Forbidden, ValidationFailed
from ultron.tenancy import Actor


class RuntimeValue(BaseModel):
    name: str
    part: str
    description: str
    kind: str = Field(description="number, integer, boolean; nullable when it may be unset")
    nullable: bool
    minimum: float | None
    maximum: float | None
    value: Any = Field(description="What applies now in this tenant")
    default: Any = Field(description="The process's configuration (environment, command line)")
    changed: bool
    updated_at: datetime | None
    updated_by: str | None


class RuntimeSettingsView(BaseModel):
    editable: bool = Field(description="Whether the caller may change them (an admin agent)")
    ttl_seconds: float
    settings: list[RuntimeValue]


class RuntimeChange(BaseModel):
    model_config = ConfigDict(extra="forbid")

    values: dict[str, Any] = Field(default_factory=dict, description="Setting name -> new value")
    reset: list[str] = Field(default_factory=list, description="Settings going back to the configuration")


def _adapter(name: str) -> TypeAdapter[Any]:
    # The field's annotation with its constraints (ge=, le=, ...) as Annotated metadata, as declared.
    return TypeAdapter(Settings.model_fields[name].rebuild_annotation())


_ADAPTERS = {name: _adapter(name) for name in EDITABLE}


def _describe(name: str) -> tuple[str, bool, float | None, float | None]:
    info = Settings.model_fields[name]
    schema = _ADAPTERS[name].json_schema()
    options = schema.get("anyOf", [schema])
    kinds = [o.get("type") for o in options if o.get("type") != "null"]
    kind = kinds[0] if kinds else "number"
    low = next((o.get("minimum", o.get("exclusiveMinimum")) for o in options if "type" in o), None)
    high = next((o.get("maximum", o.get("exclusiveMaximum")) for o in options if "type" in o), None)
    nullable = info.is_required() is False and info.default is None
    return kind, nullable, low, high


def validate_value(name: str, value: Any) -> Any:
    """The value as the setting holds it; ValidationFailed with the reason when it does not fit."""
    if name not in EDITABLE:
        if name in Settings.model_fields:
            raise ValidationFailed(f"{name} cannot be changed at run time (only: {', '.join(EDITABLE)})")
        raise ValidationFailed(f"unknown setting {name!r}")
    try:
        # Strict: a JSON string is never read as a number, nor 1 as true; a whole number is a valid float.
        return _ADAPTERS[name].validate_python(value, strict=True)
    except ValidationError as exc:
        reason = "; ".join(e["msg"] for e in exc.errors())
        raise ValidationFailed(f"{name}: {reason} (got {value!r})") from None


class RuntimeSettings:
    """A process's view of every tenant's runtime changes over its configured `base`."""

    def __init__(
        self,
        base: Settings,
        ttl: float = RUNTIME_SETTINGS_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.base = base
        self.ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: dict[UUID, tuple[float, Settings]] = {}

    def _stored(self, session: Session, tenant_id: UUID) -> list[RuntimeSetting]:
        stmt = (
            select(RuntimeSetting)
            .where(RuntimeSetting.tenant_id == tenant_id)
            .execution_options(populate_existing=True)
        )
        return [row for row in session.execute(stmt).scalars() if row.name in EDITABLE]

    def for_tenant(self, session: Session, tenant_id: UUID) -> Settings:
        """The settings that apply to this tenant now (read at most once per `ttl` seconds)."""
        now = self._clock()
        with self._lock:
            hit = self._cache.get(tenant_id)
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1]
        changes = {row.name: row.value for row in self._stored(session, tenant_id)}
        effective = self.base.model_copy(update=changes) if changes else self.base
        with self._lock:
            self._cache[tenant_id] = (now, effective)
        return effective

    def invalidate(self, tenant_id: UUID) -> None:
        with self._lock:
            self._cache.pop(tenant_id, None)

    def view(self, session: Session, actor: Actor) -> RuntimeSettingsView:
        rows = {row.name: row for row in self._stored(session, actor.tenant_id)}
        agents = dict(
            session.execute(
                select(Agent.id, Agent.name).where(
                    Agent.tenant_id == actor.tenant_id,
                    Agent.id.in_([r.updated_by for r in rows.values() if r.updated_by]),
                )
            ).all()
        )
        out = []
        for name, part in EDITABLE.items():
            kind, nullable, low, high = _describe(name)
            row = rows.get(name)
            out.append(
                RuntimeValue(
                    name=name,
                    part=part,
                    description=Settings.model_fields[name].description or "",
                    kind=kind,
                    nullable=nullable,
                    minimum=low,
                    maximum=high,
                    value=row.value if row is not None else getattr(self.base, name),
                    default=getattr(self.base, name),
                    changed=row is not None,
                    updated_at=row.updated_at if row is not None else None,
                    updated_by=agents.get(row.updated_by) if row is not None and row.updated_by else None,
                )
            )
        return RuntimeSettingsView(editable=actor.is_admin, ttl_seconds=self.ttl, settings=out)

    def change(self, session: Session, actor: Actor, change: RuntimeChange) -> RuntimeSettingsView:
        """Validate every value first, then store them all (or nothing), audited as one activity event."""
        if not actor.is_admin:
            raise Forbidden("only an admin agent may change settings")
        if not change.values and not change.reset:
            raise ValidationFailed("nothing to change: give values or names to reset")
        both = set(change.values) & set(change.reset)
        if both:
            raise ValidationFailed(f"set and reset at once: {', '.join(sorted(both))}")
        values = {name: validate_value(name, value) for name, value in change.values.items()}
        for name in change.reset:
            validate_value(name, getattr(self.base, name, None))
        stored = {row.name: row.value for row in self._stored(session, actor.tenant_id)}
        after = {k: v for k, v in stored.items() if k not in change.reset} | values
        try:
            self.base.model_copy(update=after).check_bands()
        except ValueError as exc:
            raise ValidationFailed(str(exc)) from None
        before = {name: stored.get(name, getattr(self.base, name)) for name in [*values, *change.reset]}
        if change.reset:
            session.execute(
                delete(RuntimeSetting).where(
                    RuntimeSetting.tenant_id == actor.tenant_id, RuntimeSetting.name.in_(change.reset)
                )
            )
        for name, value in values.items():
            stmt = insert(RuntimeSetting).values(
                tenant_id=actor.tenant_id, name=name, value=value, updated_by=actor.agent_id
            )
            session.execute(
                stmt.on_conflict_do_update(
                    index_elements=["tenant_id", "name"],
                    set_={"value": stmt.excluded.value, "updated_by": actor.agent_id, "updated_at": _now()},
                )
            )
        detail = {
            "changed": {name: {"from": before[name], "to": value} for name, value in values.items()},
            "reset": {name: {"from": before[name], "to": getattr(self.base, name)} for name in change.reset},
        }
        session.add(
            ActivityEvent(tenant_id=actor.tenant_id, agent_id=actor.agent_id, kind="settings", detail=detail)
        )
        session.flush()
        self.invalidate(actor.tenant_id)
        # Other requests of this process may re-read the old values before the commit: drop them again then.
        event.listen(session, "after_commit", lambda _s: self.invalidate(actor.tenant_id), once=True)
        return self.view(session, actor)


def _now() -> Any:
    return func.now()
