"""The one redaction point: message text, tool calls, metadata and the raw archive hold no secret."""

from __future__ import annotations

import json

from sqlalchemy import select

from ultron.db.models import RawUpload, SessionMessage, SessionRecord
from ultron.ingestion.formats import parse_session
from ultron.ingestion.schemas import IngestFile
from ultron.tenancy import local_actor

SECRET = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" * 2
EMAIL = "jane.doe@example.com"


def test_secrets_never_reach_the_database(make_hub):
    hub = make_hub(redaction_enabled=True)
    lines = [
        {"_type": "metadata", "owner": EMAIL},
        {"role": "user", "content": f"Deploy fails; my key is {SECRET}, mail {EMAIL} if stuck"},
        {
            "role": "assistant",
            "content": "Setting the key.",
            "tool_calls": [
                {
                    "id": "c1",
                    "function": {
                        "name": "shell",
                        "arguments": json.dumps({"env": f"OPENAI_API_KEY={SECRET}"}),
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": f"exported OPENAI_API_KEY={SECRET}"},
    ]
    data = "\n".join(json.dumps(line) for line in lines).encode()
    with hub.db.session() as session:
        result = hub.ingestion.ingest_files(session, local_actor(session), [IngestFile("s.jsonl", data)])
    assert result.results[0].status == "created" and result.results[0].archived
    with hub.db.session() as session:
        messages = session.execute(select(SessionMessage)).scalars().all()
        raw = session.execute(select(RawUpload)).scalar_one()
        record = session.execute(select(SessionRecord)).scalar_one()
    stored = (
        json.dumps([[m.content, m.tool_calls] for m in messages] + [record.meta], ensure_ascii=False)
        + raw.content.decode()
    )
    assert SECRET not in stored and EMAIL not in stored
    assert raw.redacted_entities and raw.size_bytes == len(data)


def test_a_json_lines_archive_is_redacted_value_by_value_keys_too_and_still_parses(make_hub):
    # the whole file read as one text ran the NER model over its keys and timestamps: ~60 ms a small session
    # file, 90 % of its ingest; value by value, its strings are the messages just redacted
    hub = make_hub(redaction_enabled=True)
    lines = [
        {"_type": "metadata", "reviewers": {EMAIL: "approved"}},
        {"role": "user", "content": f"Deploy fails; mail {EMAIL} if stuck"},
        {"role": "assistant", "content": f"Exported OPENAI_API_KEY={SECRET} and retried."},
    ]
    data = ("\n".join(json.dumps(line) for line in lines) + "\n\nnot json at all\n").encode()
    text_only = "\n".join(json.dumps(line) for line in lines).encode()
    with hub.db.session() as session:
        actor = local_actor(session)
        hub.ingestion.ingest_files(
            session, actor, [IngestFile("a.jsonl", text_only), IngestFile("b.txt", data)]
        )
    with hub.db.session() as session:
        raws = {r.name: r for r in session.execute(select(RawUpload)).scalars()}
        stored = set(session.execute(select(SessionMessage.content)).scalars())
    for raw in raws.values():
        assert SECRET not in raw.content.decode() and EMAIL not in raw.content.decode()
    # the JSON Lines archive parses to what was stored; a file that is not all JSON is redacted as text
    archived = parse_session(raws["a.jsonl"].content).messages
    assert len(archived) == 2 and {m.content for m in archived} <= stored
    assert raws["b.txt"].content.decode().endswith("not json at all\n")


def test_an_archive_over_a_million_characters_is_redacted_and_kept(make_hub):
    # the whole file went to the NER model as one text, which spaCy refuses over 1,000,000 characters: the
    # archive failed (a warning) and every such file went unarchived, under a 10 MB cap
    scrubber = make_hub(redaction_enabled=True).ingestion.scrubber
    lines = [json.dumps({"role": "user", "content": f"hello world {i % 7}"}) for i in range(50_000)]
    # a capitalised name: the text goes to the NER model
    jsonl = "\n".join([*lines, json.dumps({"role": "user", "content": f"Ask Priya Raman, mail {EMAIL}"})])
    text = "plain words of a chat log line\n" * 40_000 + f"Ask Priya Raman, mail {EMAIL}\n"
    for data in (jsonl, text):
        assert len(data) > 1_000_000
        clean, counts = scrubber.raw(data.encode())
        assert EMAIL not in clean.decode() and "Priya" not in clean.decode()
        assert counts.get("EMAIL_ADDRESS") == 1 and counts.get("PERSON") == 1
        assert clean.decode().count("\n") == data.count("\n")


def test_a_session_file_with_a_message_over_a_million_characters_is_ingested(make_hub):
    # a pasted log in one message went to the NER model whole and failed the file
    hub = make_hub(redaction_enabled=True)
    log = "step ok\n" * 130_000 + f"Ask Priya Raman, mail {EMAIL}\n"
    data = "\n".join(
        json.dumps(m) for m in ({"role": "user", "content": log}, {"role": "assistant", "content": "ok"})
    )
    with hub.db.session() as session:
        result = hub.ingestion.ingest_files(
            session, local_actor(session), [IngestFile("big.jsonl", data.encode())]
        )
    assert result.results[0].status == "created"
    with hub.db.session() as session:
        stored = session.execute(select(SessionMessage.content)).scalars().all()
    assert len(stored) == 2 and all(EMAIL not in m and "Priya" not in m for m in stored)
