"""The one redaction point: message text, tool calls, metadata and the raw archive hold no secret."""

from __future__ import annotations

import json

from sqlalchemy import select

from ultron.db.models import RawUpload, SessionMessage, SessionRecord
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
