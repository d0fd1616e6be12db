"""The brief's skill section: the skill hub's latest active skills, as brief items.

Built by the hub (ultron/hub.py) and given to `CompanionService` as its `skill_source`. With a task hint
the skills nearest to it come first (the brief's own query vector, HNSW via `search_skills`); without one
the skills whose memories agents use most, then the newest (`brief_skills`). Skills are tenant-wide: every
agent of the tenant sees the same ones, no other tenant's. The brief places them after pinned and HOT
memories and cuts them first when the budget runs out.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from ultron.companion.schemas import BriefItem
from ultron.db.queries import q
from ultron.providers.tokens import count_tokens, truncate_to_tokens
from ultron.skills.service import SkillService, skill_hit
from ultron.tenancy import Actor

# Longest skill description a brief line carries.
BRIEF_DESCRIPTION_TOKENS = 48


class SkillBriefSource:
    def __init__(self, skills: SkillService, limit: int):
        self.skills = skills
        self.limit = limit

    def __call__(self, session: Session, actor: Actor, task: str | None, vector: Any) -> list[BriefItem]:
        if self.limit == 0:
            return []
        if vector is not None:
            hits = self.skills.nearest(session, actor.tenant_id, vector, self.limit)
        else:
            rows = session.execute(q("brief_skills"), {"tenant_id": actor.tenant_id, "limit": self.limit})
            hits = [skill_hit(r) for r in rows]
        return [_item(hit) for hit in hits]


def _item(hit: dict[str, Any]) -> BriefItem:
    description = truncate_to_tokens(" ".join(hit["description"].split()), BRIEF_DESCRIPTION_TOKENS)
    line = f"- [skill] {hit['name']} ({hit['slug']} {hit['version']})"
    line += f": {description}" if description else ""
    line += f' -> get_skill("{hit["slug"]}")'
    similarity = hit.get("similarity")
    if similarity is not None:
        reason = f"skill, similarity {similarity:.2f} to the task"
    else:
        reason = f"skill; no task given, most used first ({hit['hits']} hits on its memories)"
    return BriefItem(
        kind="skill",
        id=hit["slug"],
        section="skill",
        reason=reason,
        text=line,
        tokens=count_tokens(line),
        similarity=None if similarity is None else float(similarity),
        slug=hit["slug"],
        version=hit["version"],
        name=hit["name"],
        description=hit["description"],
    )
