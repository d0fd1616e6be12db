"""Entities (people, places, projects) extracted offline, linked to memories, a recall signal shown in
explain, and a vault page per entity (issue 19)."""

from __future__ import annotations

from sqlalchemy import select

from tests.companion.conftest import agent
from ultron.companion.entities import extract
from ultron.db.models import MemoryEntity
from ultron.tenancy import local_actor
from ultron.vault.markdown import Vault, safe_name


def test_extract_people_places_projects_in_english_and_chinese():
    found = extract("Maria Garcia moved the Atlas project from Berlin to Frankfurt with Google")
    assert ("person", "Maria Garcia") in found
    assert {("place", "Berlin"), ("place", "Frankfurt")} <= found
    assert ("project", "Google") in found
    zh = extract("张伟在北京负责支付宝的迁移")
    assert ("person", "张伟") in zh and ("place", "北京") in zh
    assert extract("<PERSON> fixed the config.json loader") == set()  # placeholders and code are not names


def test_entities_link_memories_rank_search_and_get_vault_pages(hub, tmp_path):
    alice = agent(hub, "alice")
    lily = alice.upload_memory("Lily Chen starts piano lessons in Berlin next month", scope="private")
    other = alice.upload_memory(
        "the piano tuner comes every spring, lessons pause that week", scope="private"
    )
    assert other.id != lily.id
    with hub.db.session() as s:
        links = set(
            s.execute(select(MemoryEntity.kind, MemoryEntity.name).where(MemoryEntity.memory_id == lily.id))
        )
    assert ("person", "Lily Chen") in links and ("place", "Berlin") in links
    results = alice.search_memories("when does Lily Chen have piano lessons", explain=True, serendipity=False)
    top = {r.record.id: r for r in results}
    assert top[lily.id].explain.entity > 1 and top[lily.id].explain.entities == ["Lily Chen"]
    assert top[other.id].explain.entity is None
    assert results[0].record.id == lily.id

    with hub.db.session() as s:
        Vault(hub.memory).export(
            s, local_actor(s), tmp_path / "admin"
        )  # local agent: cannot see alice's private
    assert not (tmp_path / "admin" / "entities").exists()
    with hub.db.session() as s:
        actor = alice._backend.actor
        Vault(hub.memory).export(s, actor, tmp_path / "alice")
        report = Vault(hub.memory).import_(s, actor, tmp_path / "alice")
    page = (tmp_path / "alice" / "entities" / "person" / f"{safe_name('Lily Chen')}.md").read_text()
    assert page.startswith("# Lily Chen") and str(lily.id) in page
    assert (tmp_path / "alice" / "entities" / "place" / f"{safe_name('Berlin')}.md").exists()
    assert not report.skipped  # entity pages are not read back as memories


def test_a_new_memory_links_what_it_names_and_lowercase_text_links_nothing(hub):
    """Links of a new memory are inserted straight away (a new id has none to replace); a merge replaces
    them from the merged text."""
    alice = agent(hub, "alice")
    named = alice.upload_memory("Maria Garcia moved the Atlas project to Frankfurt", scope="private")
    plain = alice.upload_memory("the nightly backup job needs a longer timeout", scope="private")
    again = alice.upload_memory("Maria Garcia moved the Atlas project to Frankfurt", scope="private")
    assert again.id == named.id
    with hub.db.session() as s:
        links = {
            memory_id: sorted((kind, name) for _, kind, name in rows)
            for memory_id, rows in _by_memory(
                s.execute(select(MemoryEntity.memory_id, MemoryEntity.kind, MemoryEntity.name)).all()
            ).items()
        }
    assert ("person", "Maria Garcia") in links[named.id] and ("place", "Frankfurt") in links[named.id]
    assert len(links[named.id]) == len(set(links[named.id]))  # the merge replaced them, no duplicates
    assert plain.id not in links


def _by_memory(rows):  # type: ignore[no-untyped-def]
    out: dict = {}
    for row in rows:
        out.setdefault(row[0], []).append(row)
    return out


def test_entity_signal_takes_whole_names_only_and_a_shared_name_for_every_memory(hub):
    """The signal over given links: a name counts as a whole word of the query, case aside, however many
    results share it and however often it is asked; a name inside a longer word does not count."""
    alice = agent(hub, "alice")
    ids = [
        alice.upload_memory(text).id
        for text in (
            "the Berlin office moves to a new floor in May",
            "Bern and Berlin trade the quarterly planning",
            "Berliner Dom tickets for the team outing",
        )
    ]
    results = alice.search_memories("office floor planning tickets", explain=True, serendipity=False)
    assert {r.record.id for r in results} >= set(ids)
    links = {ids[0]: ["Berlin"], ids[1]: ["Bern", "Berlin"], ids[2]: ["Berliner Dom", "Ber"]}
    hooks = hub.companion.hooks
    for _ in range(2):  # the second search finds each name's pattern already made
        with hub.db.session() as s:
            out = hooks._entity_signal(s, "Who moves from BERLIN to bern?", results, True, links)
        by_id = {r.record.id: r for r in out}
        assert by_id[ids[0]].explain.entities == ["Berlin"]
        assert by_id[ids[1]].explain.entities == ["Berlin", "Bern"]
        assert by_id[ids[1]].explain.entity > by_id[ids[0]].explain.entity  # two names weigh more than one
        assert by_id[ids[2]].explain.entities is None and by_id[ids[2]].score == next(
            r.score for r in results if r.record.id == ids[2]
        )


def test_a_field_the_redactor_read_is_not_read_by_the_model_again(hub, monkeypatch):
    """A shared upload whose text keeps its words (no one named in it): the redactor's NER pass over each
    field is the only one; the entity links read its entities (ENTITY_MEMO). A field the redactor changed
    (a name taken out) is read again, as stored. The links are what a pass of their own finds."""
    from ultron.companion import entities

    entities._english()  # loaded before the counter goes in
    calls: list[str] = []
    real = entities._nlp

    def counting(text):  # type: ignore[no-untyped-def]
        calls.append(text)
        return real(text)

    monkeypatch.setattr(entities, "_nlp", counting)
    alice = agent(hub, "alice")
    kept = alice.upload_memory(
        "Deploys to the Frankfurt cluster failed after the Kubernetes upgrade",
        context="Hetzner machines in Germany, rolled out from Berlin",
        resolution="Pinned the Calico version the Helm charts of Google expect",
        scope="shared",
    )
    assert calls == []  # every field: the redactor's entities
    named = alice.upload_memory("Maria Garcia rolled back the Frankfurt deploy of Quartzline", scope="shared")
    assert len(calls) == 1 and "<PERSON>" in calls[0]  # the stored text, the name taken out: read again
    with hub.db.session() as s:
        links = {
            m: {
                (k, n)
                for mid, k, n in s.execute(
                    select(MemoryEntity.memory_id, MemoryEntity.kind, MemoryEntity.name)
                )
                if mid == m
            }
            for m in (kept.id, named.id)
        }
    monkeypatch.setattr(entities, "ENTITY_MEMO", entities.ENTITY_MEMO.__class__())  # empty: a pass of its own
    monkeypatch.setattr(entities, "_nlp", real)
    assert links[kept.id] == extract(kept.content) | extract(kept.context) | extract(kept.resolution)
    assert ("place", "Frankfurt") in links[kept.id]
    assert links[named.id] == extract(named.content) and not any(k == "person" for k, _ in links[named.id])


def test_the_redactors_entities_are_the_ones_a_pass_of_its_own_finds():
    """Over the labelled redaction corpus: the entity links found from the memo the redactor filled equal
    those found by the model run again (same model, same text, the same view of long runs)."""
    import json
    from pathlib import Path

    from ultron.companion import entities
    from ultron.privacy.nlp import EntityMemo
    from ultron.privacy.redactor import Redactor

    corpus = Path(__file__).parent.parent / "data" / "redaction_corpus.jsonl"
    texts = [json.loads(line)["text"] for line in corpus.read_text(encoding="utf-8").splitlines() if line]
    texts = [t for t in texts if not any("\u4e00" <= c <= "\u9fff" for c in t)][:150]
    redactor = Redactor()
    for t in texts:
        redactor.redact(t)
    filled = entities.ENTITY_MEMO
    hits_before = filled.hits
    from_memo = [extract(t) for t in texts]
    assert filled.hits - hits_before >= 50  # the redactor's passes are read, not repeated
    entities.ENTITY_MEMO = EntityMemo()
    try:
        assert [extract(t) for t in texts] == from_memo
    finally:
        entities.ENTITY_MEMO = filled


def test_a_batch_reads_its_new_memories_names_in_one_pass(hub, monkeypatch):
    """A batch of private memories (the redactor keeps names there, so it runs no NER): the entity links
    of all its new memories come from one `pipe` pass, not one model call per field."""
    from ultron.companion import entities

    real = entities._english()

    class Counting:
        def __init__(self) -> None:
            self.calls = 0
            self.piped: list[str] = []

        def __call__(self, text):  # type: ignore[no-untyped-def]
            self.calls += 1
            return real(text)

        def pipe(self, texts, batch_size):  # type: ignore[no-untyped-def]
            texts = list(texts)
            self.piped += texts
            return real.pipe(texts, batch_size=batch_size)

    counting = Counting()
    monkeypatch.setattr(entities, "_nlp", counting)
    alice = agent(hub, "alice")
    result = alice.upload_batch(
        [
            {"content": "Lena Park flies to Lisbon on Friday", "scope": "private"},
            {
                "content": "Tomas starts at Spotify in March",
                "context": "He moved from Oslo",
                "scope": "private",
            },
            {"content": "the dentist moved my appointment to next week", "scope": "private"},
        ]
    )
    assert result.created == 3
    assert counting.calls == 0 and len(counting.piped) == 3  # lowercase text is not read at all
    with hub.db.session() as s:
        names = set(s.execute(select(MemoryEntity.kind, MemoryEntity.name)))
    assert {("place", "Lisbon"), ("place", "Oslo")} <= names
    assert ("person", "Lena Park") in names


def test_a_chinese_field_the_redactor_tagged_is_not_tagged_again(hub, monkeypatch):
    """jieba's tags, like the English model's entities: a shared Chinese upload with no name in it is
    tagged once (by the redactor) and linked from those tags."""
    from ultron.privacy.personal import ChineseNameRecognizer

    tokenizer = ChineseNameRecognizer._posseg()
    cut: list[str] = []

    class Counting:
        def cut(self, text):  # type: ignore[no-untyped-def]
            cut.append(text)
            return tokenizer.cut(text)

    monkeypatch.setattr(ChineseNameRecognizer, "_tokenizer", Counting())
    monkeypatch.setattr(ChineseNameRecognizer, "_tagged", type(ChineseNameRecognizer._tagged)(16))
    alice = agent(hub, "alice")
    text = "上海机房的数据库迁移到北京以后，支付宝回调全部超时"
    memory = alice.upload_memory(text, scope="shared")
    assert cut == [text]  # the redactor's pass only
    with hub.db.session() as s:
        links = set(
            s.execute(select(MemoryEntity.kind, MemoryEntity.name).where(MemoryEntity.memory_id == memory.id))
        )
    assert ("place", "北京") in links and ("place", "上海") in links
