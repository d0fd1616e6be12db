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
        slug = slug.strip()
        if not slug or len(slug) > SLUG_INPUT_MAX:
            raise ValidationFailed(f"slug must be 1-{SLUG_INPUT_MAX} characters")
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


def skills_of(backend: Any) -> HubSkills | None:
    """Skill tools for a backend that holds the hub (in-process SDK backend, or the hub's /mcp)."""
    hub, actor = getattr(backend, "hub", None), getattr(backend, "actor", None)
    return HubSkills(hub, actor) if hub is not None and actor is not None else None
