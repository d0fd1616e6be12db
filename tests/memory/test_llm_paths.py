"""Upload with a real (fake-served) LLM: the judge band, an LLM merge, and a merge with the LLM down."""

from __future__ import annotations

import json

import numpy as np
from sqlalchemy import text

from tests.fakes.servers import FAKE_API_KEY
from ultron.memory.schemas import UploadRequest
from ultron.tenancy import local_actor

FIRST = UploadRequest(
    content="ModuleNotFoundError: No module named 'pandas' in the nightly report job",
    context="Docker image python:3.12-slim",
    resolution="add pandas to requirements.txt",
)
SECOND = FIRST.model_copy(update={"content": "ModuleNotFoundError: No module named 'pandas' in the ETL job"})


def llm_hub(make_hub, server, **overrides):  # type: ignore[no-untyped-def]
    return make_hub(
        llm_provider="openai",
        llm_base_url=server.base_url,
        llm_api_key=FAKE_API_KEY,
        llm_model="fake-chat",
        **overrides,
    )


def answer_by_prompt(replies: dict[str, str]):  # type: ignore[no-untyped-def]
    """Reply according to which system prompt is asking; anything else gets garbage."""

    def reply(messages):  # type: ignore[no-untyped-def]
        system = messages[0]["content"]
        for marker, body in replies.items():
            if marker in system:
                return body
        return "not json"

    return reply


def upload(hub, req):  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return hub.memory.upload(s, local_actor(s), req)


def stored_embedding(hub, memory_id) -> np.ndarray:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        value = s.execute(
            text("SELECT embedding FROM memories WHERE id = :id"), {"id": memory_id}
        ).scalar_one()
        return value.to_numpy()


def test_llm_judge_decides_the_soft_band(make_hub, fake_openai):
    fake_openai.reply_fn = answer_by_prompt({"same core subject": json.dumps({"same": False})})
    hub = llm_hub(make_hub, fake_openai, dedup_similarity_threshold=0.9999, dedup_soft_threshold=0.0)
    first = upload(hub, FIRST).record
    assert first.memory_type == "error"  # classification answer was garbage: the heuristic decided
    assert upload(hub, SECOND).decision == "created"  # the LLM said: different subjects

    fake_openai.reply_fn = answer_by_prompt({"same core subject": json.dumps({"same": True})})
    third = upload(hub, SECOND.model_copy(update={"content": SECOND.content + " (again)"}))
    assert third.decision == "merged_judge"
    assert any("same core subject" in body for body in fake_openai.bodies())


def test_llm_merge_rewrites_text_reembeds_and_resummarizes(make_hub, fake_openai):
    merged = {
        "content": "ModuleNotFoundError for pandas in scheduled Python jobs",
        "context": "slim Docker images without the scientific stack",
        "resolution": "declare pandas in requirements.txt and rebuild the image",
    }
    fake_openai.reply_fn = answer_by_prompt(
        {"consolidation expert": json.dumps(merged), "same core subject": json.dumps({"same": True})}
    )
    hub = llm_hub(make_hub, fake_openai, dedup_similarity_threshold=0.9999, dedup_soft_threshold=0.0)
    first = upload(hub, FIRST).record
    before = stored_embedding(hub, first.id)
    # the same fact again: another job (SECOND) would be vetoed before the LLM is asked (faithful.py)
    result = upload(hub, FIRST.model_copy(update={"content": FIRST.content + " (again)"}))
    assert result.decision == "merged_judge" and result.merged_text
    rec = result.record
    assert (rec.content, rec.context, rec.resolution) == (
        merged["content"],
        merged["context"],
        merged["resolution"],
    )
    assert rec.summary_l0.startswith("ModuleNotFoundError for pandas")  # summary follows the new text
    assert not np.allclose(before, stored_embedding(hub, first.id))
    assert rec.hit_count == 1 and rec.contributions == 2


def test_merge_with_the_llm_down_keeps_the_text_and_counts_the_hit(make_hub, fake_openai):
    fake_openai.mode = "500"
    hub = llm_hub(make_hub, fake_openai)
    first = upload(hub, FIRST).record
    before = stored_embedding(hub, first.id)
    again = upload(hub, FIRST.model_copy(update={"tags": ["nightly"]}))
    assert again.decision == "merged" and not again.merged_text
    rec = again.record
    assert (rec.content, rec.context, rec.resolution) == (FIRST.content, FIRST.context, FIRST.resolution)
    assert rec.hit_count == 1 and rec.contributions == 2 and rec.tags == ["nightly"]
    assert np.allclose(before, stored_embedding(hub, first.id))
    assert len(fake_openai.requests) > 0  # it did try the LLM


def test_the_dedup_probe_runs_twice_only_when_a_chat_model_judges(make_hub, fake_openai, monkeypatch):
    """With an LLM judge the neighbours are probed before the lock (the judge is asked outside it) and
    again under it; offline the judge is local, and one probe under the lock is enough. Counted at the
    driver (the probe under the lock goes to psycopg directly, in a pipeline with the lock)."""
    import psycopg

    PROBE_MARKS = ("The nearest active memories of one type", "A single upload's dedup")

    def probes_per_upload(hub) -> int:  # type: ignore[no-untyped-def]
        seen: list[str] = []
        execute = psycopg.Cursor.execute

        def count(cursor, query, *args, **kwargs):  # type: ignore[no-untyped-def]
            # the probe alone, or inside probe_or_create_memory (a single upload's one round trip)
            if any(m in str(query) for m in PROBE_MARKS):
                seen.append(str(query))
            return execute(cursor, query, *args, **kwargs)

        with monkeypatch.context() as patched:
            patched.setattr(psycopg.Cursor, "execute", count)
            upload(hub, FIRST)
        return len(seen)

    assert probes_per_upload(make_hub()) == 1
    fake_openai.reply_fn = answer_by_prompt({})
    assert probes_per_upload(llm_hub(make_hub, fake_openai)) == 2
