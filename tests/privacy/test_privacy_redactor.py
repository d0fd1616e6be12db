"""The Redactor surface: fields, nested JSON, counts, overlaps, idempotence, threads, the fast path."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import ultron.privacy as privacy
from ultron.privacy import Redaction, RedactionPolicy, Redactor, get_default_redactor

CORPUS = Path(__file__).resolve().parents[1] / "data" / "redaction_corpus.jsonl"


def _corpus_texts() -> list[str]:
    with CORPUS.open(encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh if line.strip()]


def test_public_api_is_exactly_this():
    assert sorted(privacy.__all__) == sorted(
        ["UUID_PATTERN", "Finding", "Redaction", "RedactionPolicy", "Redactor", "get_default_redactor"]
    )


def test_redact_counts_types_never_values(redactor):
    result = redactor.redact("a@acme.io b@acme.io 13812345678 password=hunter2")
    assert isinstance(result, Redaction)
    assert result.entities == {"EMAIL_ADDRESS": 2, "PHONE_NUMBER": 1, "REDACTED_CREDENTIAL": 1}
    assert "hunter2" not in repr(result.entities)


def test_redact_fields_sums_counts_and_keeps_none(redactor):
    fields, counts = redactor.redact_fields(
        {
            "content": "psql fails: postgresql://app:S3cr3t!x@db.internal/app",
            "context": "on /home/alice/proj, contact alice@acme.io",
            "resolution": None,
        }
    )
    assert fields == {
        "content": "psql fails: postgresql://app:<DB_URL_PASSWORD>@db.internal/app",
        "context": "on /home/<USER>/proj, contact <EMAIL_ADDRESS>",
        "resolution": None,
    }
    assert counts == {"DB_URL_PASSWORD": 1, "USER": 1, "EMAIL_ADDRESS": 1}


def test_redact_json_walks_messages_and_tool_calls(redactor):
    session = {
        "messages": [
            {"role": "user", "content": "my key is sk-Qm3vT9xLr2Pz8NcW5yHb4KdJT3BlbkFJa7Fs1Ge6Uo0Ri2Wq"},
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "function": {
                            "name": "db_connect",
                            "arguments": {"host": "db.internal", "password": "plainword", "port": 5432},
                        }
                    },
                    {"function": {"name": "send", "arguments": '{"to": "bob@acme.io"}'}},
                ],
            },
            {"role": "tool", "content": ["ok", 13812345678, None, True], "meta": ("13812345678",)},
        ],
        "password_hint": None,
    }
    out, counts = redactor.redact_json(session)
    assert out["messages"][0]["content"] == "my key is <LLM_API_KEY>"
    args = out["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert args == {"host": "db.internal", "password": "<REDACTED_CREDENTIAL>", "port": 5432}
    assert out["messages"][1]["tool_calls"][1]["function"]["arguments"] == '{"to": "<EMAIL_ADDRESS>"}'
    assert out["messages"][2]["content"] == ["ok", 13812345678, None, True]  # non-strings are kept
    assert out["messages"][2]["meta"] == ("<PHONE_NUMBER>",)
    assert out["password_hint"] is None
    assert counts == {"LLM_API_KEY": 1, "REDACTED_CREDENTIAL": 1, "EMAIL_ADDRESS": 1, "PHONE_NUMBER": 1}
    assert session["messages"][0]["content"].startswith("my key is sk-")  # the input is not mutated


def test_redact_json_respects_placeholders_and_policy(redactor):
    value = {"password": "${DB_PASSWORD}", "token": "abc123xyz"}
    assert redactor.redact_json(value)[0] == {"password": "${DB_PASSWORD}", "token": "<REDACTED_CREDENTIAL>"}
    off = RedactionPolicy(disabled_entities=frozenset({"REDACTED_CREDENTIAL"}))
    assert redactor.redact_json(value, off) == (value, {})


def test_overlaps_resolve_to_the_most_specific_type(redactor):
    text = "OPENAI_API_KEY=sk-Qm3vT9xLr2Pz8NcW5yHb4KdJT3BlbkFJa7Fs1Ge6Uo0Ri2Wq mongodb+srv://u:pw9X2k@c0.ab1cd.mongodb.net/x"
    result = redactor.redact(text)
    assert (
        result.text == "OPENAI_API_KEY=<LLM_API_KEY> mongodb+srv://u:<DB_URL_PASSWORD>@c0.ab1cd.mongodb.net/x"
    )
    findings = redactor.detect(text)
    assert all(a.end <= b.start for a, b in zip(findings, findings[1:], strict=False))


def test_redaction_is_idempotent_on_the_corpus(redactor):
    for text in _corpus_texts():
        once = redactor.redact(text).text
        assert redactor.redact(once).text == once


def test_concurrent_redaction_matches_sequential(redactor):
    texts = _corpus_texts()[:160]
    expected = [redactor.redact(t) for t in texts]
    with ThreadPoolExecutor(max_workers=8) as pool:
        runs = [pool.submit(lambda: [redactor.redact(t) for t in texts]) for _ in range(8)]
        results = [run.result() for run in runs]
    assert all(r == expected for r in results)


def test_fast_path_skips_presidio_for_plain_text():
    redactor = Redactor()
    assert (
        redactor.redact("restart it, nothing else to see here").text == "restart it, nothing else to see here"
    )
    assert redactor.redact("").text == ""
    # Two Chinese characters in a row may be a name: that text goes to the recognizers.
    assert redactor.redact("重启一下服务就好了").text == "重启一下服务就好了"
    stats = redactor.stats()
    assert stats["calls"] == 3
    assert stats["fast_path"] == 2


def test_the_word_auth_alone_takes_the_fast_path():
    """`auth` names no secret by itself (only `auth=(…)` and `…Auth(…)` do, or a key with a secret word,
    which has its own trigger): text that merely mentions it skips the recognizers."""
    redactor = Redactor()
    plain = "the auth service restarts nightly; oauth users see a short outage"
    assert redactor.redact(plain).text == plain
    assert redactor.stats()["fast_path"] == 1
    assert "letmein99" not in redactor.redact('requests.get(url, auth=("admin", "letmein99"))').text
    assert redactor.stats()["fast_path"] == 1


def test_stats_count_entities():
    redactor = Redactor()
    redactor.redact("a@acme.io and b@acme.io")
    assert redactor.stats()["EMAIL_ADDRESS"] == 2


def test_default_redactor_is_built_once():
    assert get_default_redactor() is get_default_redactor()


def test_fast_path_never_hides_a_finding(redactor, monkeypatch):
    from ultron.privacy import redactor as module

    monkeypatch.setattr(module, "_TRIGGERS", {name: r"[\s\S]" for name in module._TRIGGERS})
    always_slow = Redactor()
    texts = _corpus_texts() + [
        'requests.get(url, auth=("admin", "letmein"))',
        'requests.get(url, auth = ["admin", "letmein99"])',
        'session.auth = HTTPBasicAuth("admin", "s3cret!pw")',
        'httpx.DigestAuth("admin", "letmein99")',
        "the auth service rotates auth_token=Zk2mP9qT4vXw7yB1 nightly",
        "auth header missing; the oauth callback failed with xoxp-",
        "machine api.example.com login bob password letmeinplease!",
        "number +33 5 69 40 01 42",
        "xoxb-8837120044-5512093388-Zk2mP9qT4vXw7yB1cD3eF5gH",
        "ssh alice@bastion; /home/alice",
        "mysql -uroot -pletmein",
        "密码：abcdefgh",
    ]
    for text in texts:
        assert redactor.detect(text) == always_slow.detect(text), text
