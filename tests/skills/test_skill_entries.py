"""Offline skill entries read like skills (issue 32): the symptom is an error line, the fix the diff and
its check; the verifier rejects a fix that is not concrete and a skill whose members share no problem."""

from __future__ import annotations

from ultron.skills import evolve

NGINX = {
    "id": "0a000000-0000-0000-0000-000000000000",
    "content": "Requests to /api/ return 502 after the proxy change\nErrors met:\n"
    'nginx: [emerg] "proxy_pass" cannot have URI part in location given by regular expression',
    "context": "Task: Requests to /api/ return 502 after the proxy change",
    "resolution": "--- a/etc/nginx/conf.d/app.conf\n+++ b/etc/nginx/conf.d/app.conf\n@@\n"
    "-        proxy_pass http://backend/api/;\n+        proxy_pass http://backend;\n"
    "Verified with: `nginx -t`",
}


def _member(n: int, content: str, resolution: str) -> dict:  # type: ignore[type-arg]
    return {
        "id": f"{n:08x}-0000-0000-0000-000000000000",
        "content": content,
        "context": "",
        "resolution": resolution,
    }


def test_an_entry_is_the_error_line_with_the_compact_diff_and_its_check():
    doc = evolve.synthesize("nginx emerg proxy_pass", [NGINX])
    (entry,) = evolve.entries_of(doc.body)
    symptom, fix = entry.split(evolve.FIX)
    assert symptom.strip().endswith(
        'nginx: [emerg] "proxy_pass" cannot have URI part in location given by regular expression'
    )
    assert "502" not in symptom
    assert "in `conf.d/app.conf`: `- proxy_pass http://backend/api/;` `+ proxy_pass http://backend;`" in fix
    assert "(verified with: `nginx -t`)" in fix
    assert evolve.quality_problems(doc) == [] and evolve.grounding(doc, [NGINX]).passed
    # the hunks trajectory extraction writes: headed by the file, no ---/+++ pair
    hunk = {**NGINX, "resolution": "@@ conf.d/app.conf @@\n-    listen 80 default_server;\n+    listen 80;"}
    (entry,) = evolve.entries_of(evolve.synthesize("nginx", [hunk]).body)
    assert "in `conf.d/app.conf`: `- listen 80 default_server;` `+ listen 80;`" in entry


def test_the_verifier_rejects_a_vague_fix():
    members = [
        _member(1, "nginx reload fails with an unknown directive", "proxy_set_header, not proxy_set_headr"),
        _member(2, "nginx reload fails after the TLS change", "I fixed it and it works now."),
    ]
    doc = evolve.synthesize("nginx reload", members)
    problems = evolve.quality_problems(doc)
    # entries of equal weight in their symptoms' order: "... after the TLS change" is the first
    assert problems == ["entries [1] have no concrete fix (a diff, a command, a file or a setting)"], problems


def test_the_verifier_rejects_members_that_share_no_problem():
    unrelated = [
        _member(1, "Django admin shows the wrong timezone for orders", "set USE_TZ = True in settings.py"),
        _member(2, "matplotlib legend overlaps the plot area", "pass bbox_to_anchor=(1, 1) to legend()"),
        _member(3, "pytest fixture teardown never runs", "yield instead of return in the fixture"),
    ]
    verdict = evolve.grounding(evolve.synthesize("bash consider description", unrelated), unrelated)
    assert not verdict.passed and verdict.detail == "its memories share no problem"
    related = [_member(n, f"nginx: [emerg] problem {n}", f"edit nginx.conf line {n}") for n in range(1, 4)]
    assert evolve.grounding(evolve.synthesize("nginx emerg", related), related).passed


def test_the_same_members_give_the_same_skill_in_any_order():
    """The sample comes closest to the centroid first, and the same memories arriving in another order
    round the mean differently: the skill must not change with it (docs/skills.md quotes one verbatim)."""
    contexts = ["nginx: [emerg] a", "nginx: [emerg] b", "nginx: [emerg] b", "x", "y", "z"]
    members = [
        {**_member(n, f"nginx: [emerg] problem {n % 3}", f"edit `nginx.conf` line {n % 4}"), "context": c}
        for n, c in enumerate(contexts, 1)
    ]
    body = evolve.synthesize("nginx [emerg]: problem", members).body
    reordered = evolve.synthesize("nginx [emerg]: problem", members[::-1]).body
    assert evolve.CITE.sub("", reordered) == evolve.CITE.sub("", body)  # which member is cited aside
    when = body.split("## When to use")[1].split("##")[0].strip().splitlines()
    assert when[0].startswith("- nginx: [emerg] b")  # the context most members share comes first
