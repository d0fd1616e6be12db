"""The dashboard's similarity network: the most used memories and, for each, its nearest neighbours among
them above the embedding model's calibrated similarity (ultron/companion/serendipity.py)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from ultron.companion.serendipity import calibration_for
from ultron.db.queries import q
from ultron.tenancy import Actor

MAX_NODES = 200


class NetworkNode(BaseModel):
    id: UUID
    memory_type: str
    tier: str
    summary: str
    hit_count: int


class NetworkEdge(BaseModel):
    source: UUID
    target: UUID
    similarity: float


class Network(BaseModel):
    nodes: list[NetworkNode]
    edges: list[NetworkEdge] = Field(description="Undirected, each pair once")
    min_similarity: float = Field(description="The model's calibrated threshold an edge must reach")


def similarity_network(session: Session, actor: Actor, embedder: Any, limit: int = 80, k: int = 4) -> Network:
    params = actor.visibility()
    rows = session.execute(q("similarity_network_nodes"), {**params, "limit": min(limit, MAX_NODES)}).all()
    nodes = [
        NetworkNode(
            id=r.id, memory_type=r.memory_type, tier=r.tier, summary=r.summary_l0, hit_count=r.hit_count
        )
        for r in rows
    ]
    threshold = calibration_for(embedder).cosine_threshold
    edges: dict[tuple[UUID, UUID], float] = {}
    if nodes:
        found = session.execute(
            q("similarity_network_edges"),
            {"tenant_id": actor.tenant_id, "ids": [n.id for n in nodes], "k": k, "min_similarity": threshold},
        )
        for r in found:
            key = (min(r.source, r.target), max(r.source, r.target))
            edges[key] = round(float(r.similarity), 4)
    return Network(
        nodes=nodes,
        edges=[NetworkEdge(source=a, target=b, similarity=s) for (a, b), s in sorted(edges.items())],
        min_similarity=threshold,
    )
