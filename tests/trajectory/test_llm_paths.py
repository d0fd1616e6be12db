"""Segmentation, judging and extraction with an LLM, against the fake OpenAI-compatible server."""

from __future__ import annotations

import json
import re

from sqlalchemy import select

from tests.fakes.servers import FAKE_API_KEY
from tests.ingestion.conftest import fixture_file
from ultron.db.models import MemorySource, TaskSegment
from ultron.hub import build_worker
from ultron.ingestion.schemas import IngestFile
from ultron.tenancy import local_actor
from ultron.trajectory.segmentation import SEGMENT_PROMPT

LINE = re.compile(r"^\[(\d+)\] \[", re.MULTILINE)


def llm_hub(make_hub, server, **overrides):  # type: ignore[no-untyped-def]
    return make_hub(
        llm_provider="openai",
        llm_base_url=server.base_url,
        llm_api_key=FAKE_API_KEY,
        llm_model="fake-chat",
        **overrides,
    )


def _segment_in_fives(user: str) -> str:
    n = len(LINE.findall(user))
    segments = [{"start": s, "end": min(s + 4, n), "topic": f"task at {s}"} for s in range(1, n + 1, 5)]
    return json.dumps({"segments": segments})


def replies(segment=_segment_in_fives, judge=None, extract=None):  # type: ignore[no-untyped-def]
    def reply(messages):  # type: ignore[no-untyped-def]
        system, user = messages[0]["content"], messages[-1]["content"]
        if system == SEGMENT_PROMPT:
            return segment(user)
        if "You judge how well" in system:
            return judge or json.dumps(
                {"score": 0.9, "task_type": "debugging", "rationale": "fixed and verified"}
            )
        if "You extract reusable experience" in system:
            return extract or json.dumps(
                {
                    "memories": [
                        {"content": "Decimal rounding changed", "resolution": "use quantize", "tags": ["py"]}
                    ]
                }
            )
        return "not json"

    return reply


def _ingest(hub, *files):  # type: ignore[no-untyped-def]
    with hub.db.session() as session:
        return hub.ingestion.ingest_files(session, local_actor(session), list(files))


def _long_session(n: int) -> bytes:
    lines = []
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        lines.append(json.dumps({"role": role, "content": f"message {i} " + "about the build pipeline " * 8}))
    return "\n".join(lines).encode()


def test_long_sessions_are_segmented_in_token_budgeted_windows(make_hub, fake_openai):
    fake_openai.reply_fn = replies()
    hub = llm_hub(make_hub, fake_openai, llm_max_input_tokens=1024, llm_prompt_reserve_tokens=0)
    result = _ingest(hub, IngestFile("long.jsonl", _long_session(60)))
    assert result.new_segments == 0  # with an LLM, segmentation belongs to the worker step
    counts = build_worker(hub).process_due()
    assert counts["failed"] == 0 and counts["sessions"] == 1
    calls = [r for r in fake_openai.requests if r.json and r.json["messages"][0]["content"] == SEGMENT_PROMPT]
    assert len(calls) > 1  # more than one window
    for call in calls:
        assert len(call.body) < 1024 * 6  # each window within the token budget (estimates over-count)
    with hub.db.session() as session:
        spans = session.execute(
            select(TaskSegment.start_seq, TaskSegment.end_seq, TaskSegment.segmenter).order_by(
                TaskSegment.start_seq
            )
        ).all()
    assert spans[0].start_seq == 0 and spans[-1].end_seq == 59
    assert all(a.end_seq + 1 == b.start_seq for a, b in zip(spans, spans[1:], strict=False))
    assert {s.segmenter for s in spans} == {"llm"}


def test_an_invalid_segmentation_answer_falls_back_to_the_heuristic(make_hub, fake_openai):
    fake_openai.reply_fn = replies(segment=lambda user: json.dumps({"segments": [{"start": 2, "end": 3}]}))
    hub = llm_hub(make_hub, fake_openai)
    _ingest(hub, fixture_file("multi_task.jsonl"))
    counts = build_worker(hub).process_due()
    assert counts["sessions"] == 1 and counts["failed"] == 0
    with hub.db.session() as session:
        segmenters = session.execute(select(TaskSegment.segmenter)).scalars().all()
    assert segmenters == ["heuristic"] * 3
    assert hub.intelligence.counters["llm_failures"] >= 1


def test_the_judged_score_and_its_rationale_are_stored_next_to_the_metrics(make_hub, fake_openai):
    fake_openai.reply_fn = replies(segment=lambda user: json.dumps({"segments": [{"start": 1, "end": 8}]}))
    hub = llm_hub(make_hub, fake_openai)
    _ingest(hub, fixture_file("openai_messages.jsonl"))
    build_worker(hub).process_due()
    with hub.db.session() as session:
        segment = session.execute(select(TaskSegment)).scalar_one()
        linked = session.execute(select(MemorySource.segment_id)).scalars().all()
    judged = segment.metrics["llm_judgment"]
    assert judged["value"] == 0.9 and judged["detail"] == "fixed and verified"
    assert segment.rationale == "fixed and verified"
    assert "completion" in segment.metrics and segment.stage == "done"
    assert linked == [segment.id]


def test_an_unusable_judgement_keeps_the_heuristic_score(make_hub, fake_openai):
    fake_openai.reply_fn = replies(
        segment=lambda user: json.dumps({"segments": [{"start": 1, "end": 8}]}),
        judge=json.dumps({"score": 7}),
    )
    hub = llm_hub(make_hub, fake_openai)
    _ingest(hub, fixture_file("openai_messages.jsonl"))
    build_worker(hub).process_due()
    with hub.db.session() as session:
        segment = session.execute(select(TaskSegment)).scalar_one()
    assert "llm_judgment" not in segment.metrics and segment.rationale is None
    assert segment.score == 0.9
