"""Planted secrets never reach any table, nor any request to an external LLM or embedding server."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from tests.fakes.servers import FAKE_API_KEY
from ultron.memory.schemas import MemoryPatch, UploadRequest
from ultron.tenancy import local_actor

SECRETS = {
    "LLM_API_KEY": "sk-proj-Q3vX9aLm2PzT7bWc4RkN8yHs1JdE6uFg0VtYi5OnKq",
    "GITHUB_TOKEN": "ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5",
    "AWS_ACCESS_KEY": "AKIAZ7Q2R4T6V8X0B1C3",
    "EMAIL_ADDRESS": "li.wei.private@example.org",
    "PHONE_NUMBER": "13912345678",
    "DB_URL_PASSWORD": "S3cr3tPassw0rdZ9",
}


def scan_database(hub) -> list[tuple[str, str, str]]:  # type: ignore[no-untyped-def]
    """Every (table, column, secret) where a secret value appears, in any text, json or array column."""
    hits = []
    with hub.db.session() as s:
        columns = s.execute(
            text(
                "SELECT table_name, column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND data_type IN ('text', 'jsonb', 'ARRAY', 'bytea', "
                "'character varying', 'tsvector')"
            )
        ).all()
        for table, column, data_type in columns:
            for name, value in SECRETS.items():
                if data_type == "bytea":  # raw archives: search the bytes themselves
                    where = f"position(convert_to(:v, 'UTF8') IN \"{column}\") > 0"
                else:
                    where = f'position(lower(:v) IN lower("{column}"::text)) > 0'
                sql = text(f'SELECT count(*) FROM "{table}" WHERE {where}')
                found = s.execute(sql, {"v": value}).scalar_one()
                if found:
                    hits.append((table, column, name))
    return hits


@pytest.fixture()
def remote_hub(make_hub, fake_openai):  # type: ignore[no-untyped-def]
    """A hub whose LLM and embeddings both go to the fake OpenAI-compatible server."""
    return make_hub(
        llm_provider="openai",
        llm_base_url=fake_openai.base_url,
        llm_api_key=FAKE_API_KEY,
        llm_model="fake-chat",
        embedding_provider="openai",
        embedding_base_url=fake_openai.base_url,
        embedding_api_key=FAKE_API_KEY,
        embedding_dimension=16,
    )


def test_secrets_in_uploads_and_edits_reach_no_table_and_no_model(remote_hub, fake_openai):
    fake_openai.chat_reply = json.dumps({"memory_type": "security"})
    hub = remote_hub
    planted = (
        f"Deploy failed: export OPENAI_API_KEY={SECRETS['LLM_API_KEY']} then git push with "
        f"{SECRETS['GITHUB_TOKEN']}; ping {SECRETS['EMAIL_ADDRESS']} or {SECRETS['PHONE_NUMBER']}"
    )
    with hub.db.session() as s:
        actor = local_actor(s)
        rec = hub.memory.upload(
            s,
            actor,
            UploadRequest(
                content=planted,
                context=f"postgresql://deploy:{SECRETS['DB_URL_PASSWORD']}@db.internal:5432/app",
                resolution=f"rotate {SECRETS['AWS_ACCESS_KEY']} and the token",
                tags=["deploy", SECRETS["EMAIL_ADDRESS"]],
            ),
        ).record
        # The same text again merges (LLM merge answer is garbage here: text kept, hit counted).
        hub.memory.upload(s, actor, UploadRequest(content=planted))
        hub.memory.edit(
            s, actor, rec.id, MemoryPatch(resolution=f"use {SECRETS['GITHUB_TOKEN']} never again")
        )
        hub.memory.search(s, actor, f"deploy failed {SECRETS['LLM_API_KEY']}")
    hub.hits.flush()

    assert scan_database(hub) == []
    leaked = [name for body in fake_openai.bodies() for name, value in SECRETS.items() if value in body]
    assert leaked == []
    assert len(fake_openai.bodies()) > 0  # the model servers were really used
    with hub.db.session() as s:
        stored = hub.memory.get(s, local_actor(s), rec.id)
    assert "<LLM_API_KEY>" in stored.content and "<GITHUB_TOKEN>" in stored.resolution
    assert stored.redacted_entities["LLM_API_KEY"] >= 1
    assert set(stored.redacted_entities) >= {
        "EMAIL_ADDRESS",
        "PHONE_NUMBER",
        "DB_URL_PASSWORD",
        "AWS_ACCESS_KEY",
    }


def test_secrets_in_sessions_ingest_text_and_archives_reach_no_table_and_no_model(remote_hub, fake_openai):
    from ultron.hub import build_worker
    from ultron.ingestion.schemas import IngestFile

    hub = remote_hub
    fake_openai.chat_reply = (
        "not json"  # every LLM step falls back to its heuristic, after sending its prompt
    )
    lines = [
        {
            "role": "user",
            "content": f"Deploy fails. Key {SECRETS['LLM_API_KEY']}, mail {SECRETS['EMAIL_ADDRESS']}",
        },
        {
            "role": "assistant",
            "content": "Running the deploy script.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "shell",
                        "arguments": json.dumps(
                            {"cmd": f"git push https://x:{SECRETS['GITHUB_TOKEN']}@github.com/o/r"}
                        ),
                    },
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": f"error: auth failed for {SECRETS['AWS_ACCESS_KEY']}",
        },
        {"role": "assistant", "content": "Fixed: rotated the token and pushed again. Deploy succeeded."},
        {"role": "user", "content": f"Thanks! Call me at {SECRETS['PHONE_NUMBER']} if it breaks."},
    ]
    body = "\n".join(json.dumps(line) for line in lines).encode()
    with hub.db.session() as s:
        actor = local_actor(s)
        hub.ingestion.ingest_files(
            s, actor, [IngestFile(name="/home/alice/sessions/deploy.jsonl", content=body)]
        )
        hub.ingestion.ingest_text(
            s,
            actor,
            f"1. Deploy broke: DATABASE_URL=postgresql://app:{SECRETS['DB_URL_PASSWORD']}@db/app was wrong.\n"
            f"   Fix: rotate {SECRETS['AWS_ACCESS_KEY']} and update the secret.\n\n"
            f"2. Contact {SECRETS['EMAIL_ADDRESS']} before rotating keys.",
        )
    build_worker(hub).process_due()
    hub.hits.flush()

    with hub.db.session() as s:
        stored = s.execute(text("SELECT count(*) FROM session_messages")).scalar_one()
        archived = s.execute(text("SELECT count(*) FROM raw_user_uploads")).scalar_one()
    assert stored == len(lines) and archived == 2  # the session and the text really were stored
    assert scan_database(hub) == []
    leaked = [name for body in fake_openai.bodies() for name, value in SECRETS.items() if value in body]
    assert leaked == []

    # The scan itself can see a secret in raw bytes and in text (so the empty results above mean something).
    with hub.db.session() as s:
        s.execute(
            text(
                "UPDATE raw_user_uploads SET content = convert_to('x ' || :v, 'UTF8') "
                "WHERE kind = 'ingest_text'"
            ),
            {"v": SECRETS["GITHUB_TOKEN"]},
        )
        s.execute(
            text("UPDATE session_messages SET content = content || :v"), {"v": SECRETS["EMAIL_ADDRESS"]}
        )
    assert {(t, n) for t, _, n in scan_database(hub)} == {
        ("raw_user_uploads", "GITHUB_TOKEN"),
        ("session_messages", "EMAIL_ADDRESS"),
    }
