"""Issue 32: small clusters merged into the cluster they would have formed one with, and clusters named
by the error their members share (ultron/clusters/merge.py, ultron/clusters/signature.py)."""

from __future__ import annotations

import re

import numpy as np
from sqlalchemy import select

from tests.clusters.test_clusters import _basis, _join, _tenant
from tests.data.make_skill_sessions import MAKE, NGINX, RUST
from ultron.clusters.merge import merge_small, refine
from ultron.clusters.signature import error_lines_of, signature, title_of
from ultron.db.models import ClusterMember, KnowledgeCluster


def test_a_signature_keeps_the_tool_kind_and_message_and_drops_what_one_run_has():
    assert signature('nginx: [emerg] unknown directive "proxy_set_headr" in /etc/nginx/site.conf:9') == (
        "nginx: [emerg] unknown directive"
    )
    assert signature("mean.c:(.text+0x8d): undefined reference to `sqrt'") == "undefined reference"
    assert signature("make: *** [Makefile:12: stats] Error 1") == "make: *** Error"
    assert (
        signature("collect2: error: ld returned 1 exit status") == "collect2: error: ld returned exit status"
    )
    assert signature("error[E0502]: cannot borrow `self.entries` as mutable") == (
        "error[E0502]: cannot borrow as mutable"
    )
    assert signature("src/main.c:3:10: fatal error: config.h: No such file or directory") == (
        "fatal error: No such file or directory"
    )


def _errors(variants) -> list[list[str]]:  # type: ignore[no-untyped-def]
    """Each variant's error lines, as ultron/trajectory/evidence.py keeps them."""
    shapes = ("error", "***", "[emerg]", "undefined reference")
    return [
        [" ".join(x.split()) for x in v[2].splitlines() if any(k in x.lower() for k in shapes)]
        for v in variants
    ]


def test_a_title_names_the_error_the_members_share():
    nginx = title_of(_errors(NGINX))
    assert nginx is not None and nginx.startswith("nginx [emerg]: "), nginx
    make = title_of(_errors(MAKE))
    assert make is not None and "make ***" in make and "collect2 error" in make, make
    assert "undefined reference" in make, make  # the commonest message, its symbol stripped
    rust = title_of(_errors(RUST))
    assert rust is not None and rust.startswith("error[E0"), rust
    assert "could not compile" not in rust  # every member's last line says nothing of which error
    for title in (nginx, make, rust):
        assert not re.search(r"/|`|\"|'|:\d|0x|proxy_|sqrt", title), title  # no path, name, number


def test_a_message_most_members_share_titles_them_when_no_tool_or_kind_does():
    # jest setup failures (ultron/trajectory/evidence.py keeps them in this order): no "tool:" or kind to
    # head a title; before, no title at all, and the skill was named from common words ("Clone Find Fresh
    # Module")
    members = [
        [
            f"Cannot find module '{pkg}' from 'src/{where}.ts'",
            "● Test suite failed to run",
            f"FAIL src/{where}.test.ts",
        ]
        for pkg, where in (("msw", "mocks/server"), ("nock", "http"), ("ts-jest", "setup"), ("jsdom", "env"))
    ]
    assert title_of(members) == "Cannot find module; Test suite failed to run"
    assert title_of([["Cannot find module 'a'"], ["Segmentation fault"], ["Killed"]]) is None  # none shared


def test_no_title_without_a_shared_error():
    assert title_of([[], [], ["nginx: [emerg] unknown directive"]]) is None  # most members have none
    assert title_of([["a: x"], ["b: y"], ["c: z"]]) is None  # no head met by half of them
    assert error_lines_of("Task\nErrors met:\nE1\n\nE2") == ["E1", "E2"]
    assert error_lines_of("no errors here") == []


def _x_y_z(dim: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x, then z at cosine 0.75 from it (below the 0.8 join: its own cluster), then y halfway (cosine
    0.935 to both): it joins one of the two, and the two clusters' members are 0.84 apart on average."""
    x = _basis(dim, 0)
    z = 0.75 * _basis(dim, 0) + np.sqrt(1 - 0.75**2) * _basis(dim, 1)
    y = (x + z) / np.linalg.norm(x + z)
    return x, y, z


def test_a_small_cluster_merges_into_the_one_it_would_have_formed_with(make_hub):  # type: ignore[no-untyped-def]
    chub = make_hub(cluster_similarity_threshold=0.8)
    dim = chub.embedder.dimension
    with chub.db.session() as s:
        tenant = _tenant(s)
        x, y, z = _x_y_z(dim)
        far = _basis(dim, 2)
        ids = {_join(chub, s, tenant, v)[1] for v in (x, z, y, far)}
        assert len(ids) == 3  # x and z apart, y with one of them, far alone
        assert merge_small(s, tenant, 0.8, 5) == 1
        live = s.scalars(
            select(KnowledgeCluster).where(
                KnowledgeCluster.tenant_id == tenant, KnowledgeCluster.member_count > 0
            )
        ).all()
        assert sorted(c.member_count for c in live) == [1, 3]
        merged = next(c for c in live if c.member_count == 3)
        assert np.allclose(np.asarray(merged.mean, dtype=np.float64), (x + y + z) / 3, atol=1e-5)
        members = s.scalars(select(ClusterMember.cluster_id).where(ClusterMember.tenant_id == tenant)).all()
        assert sorted(members.count(c.id) for c in live) == [1, 3]
        emptied = s.scalars(
            select(KnowledgeCluster).where(
                KnowledgeCluster.tenant_id == tenant, KnowledgeCluster.member_count == 0
            )
        ).all()
        assert len(emptied) == 1 and emptied[0].mean is None and emptied[0].centroid is None
        assert merge_small(s, tenant, 0.8, 5) == 0  # far is 0 from everything: it stays alone


def test_no_merge_below_the_threshold_or_out_of_a_skill(make_hub):  # type: ignore[no-untyped-def]
    hub = make_hub(cluster_similarity_threshold=0.85)  # the two clusters' 0.84 is below it
    dim = hub.embedder.dimension
    with hub.db.session() as s:
        tenant = _tenant(s)
        x, y, z = _x_y_z(dim)
        for v in (x, z, y):
            _join(hub, s, tenant, v)
        assert merge_small(s, tenant, 0.85, 5) == 0
        assert merge_small(s, tenant, 0.8, 1) == 0  # ready at one member: no cluster is small
        for c in s.scalars(select(KnowledgeCluster).where(KnowledgeCluster.tenant_id == tenant)):
            c.skill_slug = "has-a-skill"
        assert merge_small(s, tenant, 0.8, 5) == 0  # a cluster with a skill keeps its members


def _a_b_c(dim: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """a; b at 0.82 from it (joins a at 0.8); c at 0.65 from a and 0.93 from b: 0.79 from the pair on
    average, so it starts its own cluster, though b is closer to c (0.93) than to the rest of its own
    (0.82)."""
    a = _basis(dim, 0)
    b = 0.82 * a + np.sqrt(1 - 0.82**2) * _basis(dim, 1)
    beta = (0.93 - 0.65 * 0.82) / np.sqrt(1 - 0.82**2)
    c = 0.65 * a + beta * _basis(dim, 1) + np.sqrt(1 - 0.65**2 - beta**2) * _basis(dim, 2)
    return a, b, c


def test_a_member_closer_to_another_cluster_moves_there(make_hub):  # type: ignore[no-untyped-def]
    hub = make_hub(cluster_similarity_threshold=0.8)
    dim = hub.embedder.dimension
    with hub.db.session() as s:
        tenant = _tenant(s)
        a, b, c = _a_b_c(dim)
        (ma, ca), (mb, cb), (mc, cc) = (_join(hub, s, tenant, v) for v in (a, b, c))
        assert ca == cb != cc  # arrival order put b with a
        assert refine(s, hub.clusters, tenant, 0.8) == 1
        where = dict(s.execute(select(ClusterMember.memory_id, ClusterMember.cluster_id)).all())
        assert where[mb.id] == where[mc.id] == cc and where[ma.id] == ca
        joined = s.get(KnowledgeCluster, (cc, tenant), populate_existing=True)
        assert joined.member_count == 2
        assert np.allclose(np.asarray(joined.mean, dtype=np.float64), (b + c) / 2, atol=1e-5)
        alone = s.get(KnowledgeCluster, (ca, tenant), populate_existing=True)
        assert alone.member_count == 1
        assert np.allclose(np.asarray(alone.mean, dtype=np.float64), a, atol=1e-5)
        assert refine(s, hub.clusters, tenant, 0.8) == 0  # settled: b is now where it is closest


def test_no_move_below_the_threshold_or_out_of_a_skill(make_hub):  # type: ignore[no-untyped-def]
    hub = make_hub(cluster_similarity_threshold=0.8)
    dim = hub.embedder.dimension
    with hub.db.session() as s:
        tenant = _tenant(s)
        a, b, c = _a_b_c(dim)
        for v in (a, b, c):
            _join(hub, s, tenant, v)
        assert refine(s, hub.clusters, tenant, 0.95) == 0  # 0.93 would not have joined c at 0.95
        for k in s.scalars(select(KnowledgeCluster).where(KnowledgeCluster.tenant_id == tenant)):
            k.skill_slug = "has-a-skill"
        assert refine(s, hub.clusters, tenant, 0.8) == 0  # a cluster with a skill keeps its members
