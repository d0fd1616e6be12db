"""A hub with published skills: three topics in the default tenant, one in tenant "acme".

The default tenant's thirty memories are those of tests/skills/test_skills.py; one evolution cycle
crystallizes each topic into a skill (offline synthesis, hash embedder).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from tests.skills.conftest import DOCKER, POSTGRES, PYTEST
from ultron.db.models import Skill, Tenant
from ultron.sdk import Ultron
from ultron.worker.evolution import run_evolution_cycle

KUBERNETES = [
    "kubernetes pod stuck in CrashLoopBackOff; read the previous container logs with kubectl logs -p",
    "kubernetes pod OOMKilled: raise the container memory limit in the deployment resources",
    "kubernetes pod pending forever: no node has enough cpu requests left; scale the node pool",
    "kubernetes pod ImagePullBackOff: the image pull secret is missing from the pod's namespace",
    "kubernetes pod readiness probe fails during slow startup; add a startupProbe to the pod spec",
    "kubernetes pod evicted for disk pressure; set ephemeral-storage limits on the pod containers",
    "kubernetes pod cannot resolve service names: check the CoreDNS pods in kube-system",
    "kubernetes pod restarts when the liveness probe times out; raise timeoutSeconds on the probe",
    "kubernetes pod keeps the old config: a ConfigMap change needs a rollout restart of the pod",
    "kubernetes pod terminated before draining requests; add a preStop sleep to the pod lifecycle",
]
OTHER_TENANT = "acme"
TOPICS = {"docker": DOCKER, "postgres": POSTGRES, "pytest": PYTEST}


def stock_skills(hub: Any) -> dict[str, Any]:
    """Upload the memories (as carol, and as dave in tenant acme), publish their skills; returns the
    agents and the memory ids by topic."""
    carol = Ultron(hub=hub, agent="carol")
    ids = {topic: [carol.upload_memory(t).id for t in texts] for topic, texts in TOPICS.items()}
    dave = Ultron(hub=hub, agent="dave", tenant=OTHER_TENANT)
    ids["kubernetes"] = [dave.upload_memory(t).id for t in KUBERNETES]
    counts = run_evolution_cycle(hub.db, hub.skills)
    assert counts["published"] == 4, counts
    return {"carol": carol, "dave": dave, "ids": ids}


def slugs_of(hub: Any, tenant: str = "default") -> dict[str, str]:
    """The tenant's skill slugs by topic ("docker" -> "docker-cache-pip-build")."""
    with hub.db.session() as s:
        slugs = s.scalars(
            select(Skill.slug).join(Tenant, Tenant.id == Skill.tenant_id).where(Tenant.name == tenant)
        ).all()
    topics = [*TOPICS, "kubernetes"]
    return {topic: slug for slug in slugs for topic in topics if topic in slug}
