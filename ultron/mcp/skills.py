"""The skill tools' backend: the hub's SkillService, scoped to the calling agent's tenant.

The memory tools run on the SDK's backends; skills are read in-process here (stdio with `--agent`, and
the hub's own `/mcp`, both of which hold the hub). Skills are tenant-wide: any agent of the tenant may
search and load them, no agent of another tenant can.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ultron.errors import ValidationFailed

if TYPE_CHECKING:
    from ultron.hub import Hub
    from ultron.tenancy import Actor

SLUG_INPUT_MAX = 200
SEARCH_FIELDS = ("slug", "name", "description", "version", "similarity", "categories")


def _slug(slug: str) -> str:
    slug = slug.strip()
    if not slug or len(slug) > SLUG_INPUT_MAX:
        raise ValidationFailed(f"slug must be 1-{SLUG_INPUT_MAX} characters")
    return slug


class HubSkills:
    def __init__(self, hub: Hub, actor: Actor):
        self.hub = hub
        self.actor = actor

    def search_skills(self, query: str, limit: int) -> list[dict[str, Any]]:
        with self.hub.db.session() as session:
            hits = self.hub.skills.find(session, self.actor.tenant_id, query, limit, self.hub.redactor)
        return [
            {**{k: hit[k] for k in SEARCH_FIELDS}, "similarity": round(float(hit["similarity"]), 4)}
            for hit in hits
        ]

    def get_skill(self, slug: str, version: str | None) -> dict[str, Any]:
        slug = _slug(slug)
        skills, tenant_id = self.hub.skills, self.actor.tenant_id
        with self.hub.db.session() as session:
            skill = skills.latest(session, tenant_id, slug, version)
            versions = skills.versions(session, tenant_id, slug)
            successor = skills.successor(session, tenant_id, slug) if skill.status == "superseded" else None
            return {
                "slug": skill.slug,
                "name": skill.name,
                "description": skill.description,
                "version": f"{skill.version_major}.{skill.version_minor}.{skill.version_patch}",
                "latest_version": versions[0],
                "versions": versions,
                "status": skill.status,
                "superseded_by": successor,
                "skill_md": skills.skill_md(skill),
            }


class RemoteSkills:
    """The same two tools against a remote hub, through the SDK's HTTP backend (`ultron mcp --url`)."""

    def __init__(self, backend: Any):
        self.backend = backend

    def search_skills(self, query: str, limit: int) -> list[dict[str, Any]]:
        hits = self.backend.search_skills(query, limit)  # the hub validates, as SkillService.find does
        return [
            {
                **{k: getattr(hit, k) for k in SEARCH_FIELDS},
                "similarity": round(float(hit.similarity), 4),
            }
            for hit in hits
        ]

    def get_skill(self, slug: str, version: str | None) -> dict[str, Any]:
        slug = _slug(slug)
        detail = self.backend.get_skill(slug, version)
        return {
            "slug": detail.slug,
            "name": detail.name,
            "description": detail.description,
            "version": detail.version,
            "latest_version": detail.versions[0],
            "versions": detail.versions,
            "status": detail.status,
            "superseded_by": None,  # the HTTP API does not name a successor
            "skill_md": self.backend.skill_md(slug, detail.version),
        }


def skills_of(backend: Any) -> HubSkills | RemoteSkills | None:
    """Skill tools for a backend: in-process when it holds the hub, else through its HTTP skill methods."""
    hub, actor = getattr(backend, "hub", None), getattr(backend, "actor", None)
    if hub is not None and actor is not None:
        return HubSkills(hub, actor)
    if hasattr(backend, "skill_md") and hasattr(backend, "search_skills"):
        return RemoteSkills(backend)
    return None
