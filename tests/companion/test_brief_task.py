"""A brief about its task: three tasks on one store. The memory that answers the task is in the brief (first
after the pins), personal items unrelated to it stay out, and no memory is listed twice."""

from __future__ import annotations

import pytest

PINNED = "Always deploy on weekdays before 3pm so someone is around to roll back"
OOM = "pod keeps getting OOMKilled: the JVM heap grows past the container memory limit"
NGINX = "nginx returns 502 bad gateway when the upstream gunicorn worker times out"
WEDDING = "Maya: my sister's wedding is in June and I am giving the speech"
PERSONAL_HOT = [
    "Tom: we adopted a puppy named Biscuit last week",
    "I prefer green tea over coffee in the mornings",
    "Priya: I finally finished the marathon in under four hours",
]
HOT = [
    NGINX,
    "git push rejected as non-fast-forward: pull with rebase first",
    "cargo build fails with linker cc not found: install build-essential",
]
WARM = [
    OOM,
    "Postgres connection refused after the upgrade: listen_addresses was reset to localhost",
    "pytest hangs on CI because a fixture waits for a redis that is not running",
    WEDDING,
]
RESOLUTIONS = {OOM: "set -Xmx below the limit or raise resources.limits.memory"}


@pytest.fixture()
def store(alice):  # type: ignore[no-untyped-def]
    ids = {}
    for text in [PINNED, *PERSONAL_HOT, *HOT, *WARM]:
        ids[text] = alice.upload_memory(text, resolution=RESOLUTIONS.get(text, "")).id
    alice.pin_memory(ids[PINNED])
    for text in PERSONAL_HOT + HOT:
        alice.edit_memory(ids[text], tier="hot")
    return ids


def _check_once_each(brief) -> None:  # type: ignore[no-untyped-def]
    ids = [i.id for i in brief.items]
    assert len(ids) == len(set(ids))
    lines = [i.text.split("] ", 1)[1] for i in brief.items if i.kind == "memory"]
    assert len(lines) == len(set(lines))
    assert brief.items[0].section == "pinned"


def test_three_tasks_one_store(alice, store):
    by_id = {v: k for k, v in store.items()}
    personal = set(PERSONAL_HOT) | {WEDDING}

    oom = alice.brief(task="pod keeps getting OOMKilled")
    _check_once_each(oom)
    texts = [by_id.get(i.id) for i in oom.items]
    assert texts[0] == PINNED and texts[1] == OOM, texts
    first = oom.items[1]
    assert first.section == "relevant" and first.confidence == "high" and 0 < first.relevance <= 1
    assert "resources.limits.memory" in first.text
    assert not personal & set(texts), texts  # no chat line about puppies or tea
    assert {NGINX} <= set(texts)  # HOT team knowledge still follows, after what the task needs
    assert all(i.confidence == "low" for i in oom.items[2:] if by_id.get(i.id) in HOT)

    nginx = alice.brief(task="nginx answers 502 bad gateway")
    _check_once_each(nginx)
    texts = [by_id.get(i.id) for i in nginx.items]
    assert texts[1] == NGINX and nginx.items[1].section == "relevant"
    assert texts.count(NGINX) == 1  # found by the search and HOT: listed once
    assert not personal & set(texts), texts

    june = alice.brief(task="what is Maya doing in June?")
    _check_once_each(june)
    texts = [by_id.get(i.id) for i in june.items]
    assert WEDDING in texts[:3], texts
    assert not set(PERSONAL_HOT) & set(texts), texts  # personal, but not about this task


def test_without_a_task_the_brief_is_unchanged(alice, store):
    brief = alice.brief()
    sections = [i.section for i in brief.items if i.kind == "memory"]
    assert sections[0] == "pinned" and "relevant" not in sections and "personal" in sections
    assert all(i.confidence is None for i in brief.items)
