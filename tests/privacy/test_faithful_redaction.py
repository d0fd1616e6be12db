"""Issue 31: shared-scope redaction never corrupts technical or ordinary text, and still finds people of
every origin. Each example of the issue's "Found" list in sentences of the same shape, through the Redactor
with the shared-scope policy; a few through the real upload path; and the gate on the new corpora."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ultron.bench.privacy_eval import load_corpus
from ultron.bench.privacy_faith import (
    FAITHFUL_TARGET,
    FOUND_WORDS,
    NAME_RECALL_TARGET,
    NAMES_CORPUS,
    SHARED,
    TECHNICAL_CORPUS,
    evaluate_faith,
)
from ultron.privacy import RedactionPolicy
from ultron.sdk import Ultron

DATA = Path(__file__).resolve().parents[1] / "data"

# (text, the words that must come out as they went in)
KEPT = [
    ("Hash Join  (cost=0.42..8.44 rows=1)\n  Filter: (archived = false)", ["Filter:"]),
    ("# Filter: only active tenants\nSELECT * FROM tenants;", ["Filter:"]),
    ("Lesson: never migrate during peak hours.", ["Lesson:"]),
    ("Support is staffed Mon-Thu; Friday is for the backlog.", ["Mon-Thu"]),
    ("The cron job runs Mon-Thu at 03:00 UTC.", ["Mon-Thu"]),
    ("The S3 policy granted Principal '*' read access to every object.", ["Principal '*'"]),
    ("Be concise.\nFormat your responses as a numbered list.", ["Format your responses"]),
    ("## Important Boundaries\nNever push to main without review.", ["## Important Boundaries"]),
    ("You are a release bot.\n\n## Important Boundaries\n\nNever push to main.", ["## Important Boundaries"]),
    ("Altria cut its dividend forecast.", ["Altria"]),
    ("Filings from Unilever, Altria and Danone were parsed.", ["Altria"]),
    ("Yukos Oil was once Russia's largest producer.", ["Yukos Oil"]),
    ("我们在这个项目里用了 PyYAML，也会听管弦乐放松。", ["管弦乐"]),
    ("交响乐和管弦乐有什么不同？", ["管弦乐"]),
    ("下个月去贝尔高姆开会。", ["贝尔高姆"]),
    ("The driver pinged GPS coordinates 48.8584, 2.2945 near the tower.", ["48.8584, 2.2945"]),
    ("The courier is at (23.467191, 122.264492) now.", ["23.467191, 122.264492"]),
    ('{"type": "Point", "coordinates": [151.209312, -33.868821]}', ["151.209312, -33.868821"]),
    ("nameserver 8.8.8.8\nnameserver 1.1.1.1", ["8.8.8.8", "1.1.1.1"]),
    ("Hash Join  (cost=61.00..335.50 rows=245 width=48)", ["61.00..335.50"]),
    ("$ dig example.org +short\n93.184.215.14", ["93.184.215.14"]),
    ("Upgrade Ruby Gems before the Hugo Extended build.", ["Ruby Gems", "Hugo Extended"]),
    # two capitalised words before a verb, the first a plain English word: a product, not someone (stop 29)
    ("Git Bash rewrites paths that start with a slash.", ["Git Bash"]),
    ("Cloud Run scales to zero when idle.", ["Cloud Run"]),
    ("Mac Mini builds the iOS app in eight minutes.", ["Mac Mini"]),
    # a word glued to code syntax is code, even after "called" (a person cue in "a friend called Mara")
    ("thread 'main' panicked at 'called Option::unwrap() on a None value'", ["Option::unwrap()"]),
    ("The handler called Result.unwrap_or_default() and moved on.", ["Result.unwrap_or_default()"]),
]


@pytest.mark.parametrize(("text", "words"), KEPT)
def test_technical_and_ordinary_words_survive_shared_redaction(redactor, text, words):
    out = redactor.redact(text, SHARED).text
    for word in words:
        assert word in out, out


def test_a_name_never_starts_or_ends_inside_a_word(redactor):
    out = redactor.redact("We parse configs with a package called PyYAML.", SHARED).text
    assert "PyYAML" in out and "<PERSON>YAML" not in out


NAMED = [
    ("Penelope Fairweather approved the change.", "Penelope Fairweather"),
    ("The on-call engineer was Priya Raman.", "Priya Raman"),
    ("Lucas Moreau fixed the flaky login test.", "Lucas Moreau"),
    ("We followed Kavya Nair's suggestion.", "Kavya Nair"),
    ("We forwarded Chloé Girard's report to security.", "Chloé Girard"),
    ("Ask Ngozi Adeyemi before changing the schema.", "Ngozi Adeyemi"),
    ("Zhang Min rotated the keys.", "Zhang Min"),
    ("The contract was signed by Dr. Okonkwo.", "Okonkwo"),
    ("Please cc Ms. Li on the incident.", "Li"),
    ("王秀英 manages the billing team.", "王秀英"),
    ("感谢王秀英帮忙复现了这个问题。", "王秀英"),
    ("王秀英的电脑需要重装系统。", "王秀英"),
]


@pytest.mark.parametrize(("text", "name"), NAMED)
def test_names_of_every_origin_are_redacted_in_shared_scope(redactor, text, name):
    out = redactor.redact(text, SHARED).text
    assert name not in out and "<PERSON>" in out, out


def test_what_the_context_rules_let_through_is_still_redacted(redactor):
    # secrets in technical text, private addresses, real phones, and names after a title
    out = redactor.redact(
        "git clone https://deploy:Dragon#88@git.example.com/infra.git\n"
        "dig db.internal +short\n10.2.3.4\ncall +1 212-555-0199, ask Dr. Moreau",
        SHARED,
    ).text
    assert "Dragon#88" not in out and "<REDACTED_CREDENTIAL>" in out
    assert "10.2.3.4" not in out and "<PHONE_NUMBER>" in out and "Moreau" not in out


def test_private_scope_still_keeps_names(redactor):
    private = RedactionPolicy().for_scope("private")
    assert redactor.redact("Priya Raman fixed it.", private).text == "Priya Raman fixed it."


@pytest.fixture()
def hub(make_hub):  # type: ignore[no-untyped-def]
    return make_hub(redaction_enabled=True)


def test_found_examples_through_the_upload_path(hub):
    me = Ultron(hub=hub)
    technical = me.upload_memory(
        "Lesson: the plan showed Filter: (status = 'open') after upgrading PyYAML.\n"
        "## Important Boundaries\nFormat your responses as tables. Resolver 8.8.8.8, on call Mon-Thu.",
        context="Altria and Yukos Oil filings; GPS coordinates 40.7128, -74.0060; 管弦乐",
    )
    assert "<PERSON>" not in technical.content and "<IP_ADDRESS>" not in technical.content
    assert "Filter: (status" in technical.content and "PyYAML" in technical.content
    assert "Altria and Yukos Oil" in technical.context and "<PHONE_NUMBER>" not in technical.context
    people = me.upload_memory("Penelope Fairweather and Priya Raman reviewed the fix; 王秀英 approved it.")
    for name in ("Penelope", "Fairweather", "Priya", "Raman", "王秀英"):
        assert name not in people.content
    assert people.content.count("<PERSON>") == 3


# --- the gate on the new corpora ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpora() -> tuple[list[dict], list[dict]]:
    return load_corpus(TECHNICAL_CORPUS), load_corpus(NAMES_CORPUS)


def test_corpora_are_what_the_script_generates(corpora):
    sys.path.insert(0, str(DATA))
    try:
        import make_faith_corpus
    finally:
        sys.path.remove(str(DATA))
    technical, names = corpora
    assert make_faith_corpus.generate() == (technical, names)
    assert len(technical) >= 500 and len(names) >= 300
    assert {s["split"] for s in technical + names} == {"dev", "heldout"}
    assert {s["lang"] for s in names} == {"en", "zh"}


def test_targets_met_on_dev_and_heldout(redactor, corpora):
    report = evaluate_faith(*corpora, redactor)
    for split in ("dev", "heldout"):
        assert report.faithful[(split, "all")].share >= FAITHFUL_TARGET, report.changed
        assert report.recall[(split, "all")].share >= NAME_RECALL_TARGET, report.missed
    assert set(report.found_words) == set(FOUND_WORDS)
    assert report.failures() == []


def test_eval_command_reports_the_faith_corpora_alone(tmp_path, monkeypatch, capsys):
    from ultron.bench import privacy_eval

    technical = tmp_path / "t.jsonl"
    names = tmp_path / "n.jsonl"
    row = {"id": "t-1", "lang": "en", "kind": "label", "split": "dev", "entities": []}
    technical.write_text(json.dumps({**row, "text": "Lesson: pin PyYAML."}) + "\n", encoding="utf-8")
    person = [{"type": "PERSON", "value": "Priya Raman"}]
    names.write_text(
        json.dumps(
            {**row, "id": "n-1", "kind": "indian/start", "text": "Priya Raman fixed it.", "entities": person}
        )
        + "\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(privacy_eval, "TECHNICAL_CORPUS", technical)
    monkeypatch.setattr(privacy_eval, "NAMES_CORPUS", names)
    assert privacy_eval.main(["--faith", "only"]) == 0
    out = capsys.readouterr().out
    assert "technical snippets unchanged" in out and "person recall" in out and "all targets met" in out
    names.write_text(json.dumps({**row, "id": "n-1", "kind": "x/y", "text": "x"}) + "\n{", encoding="utf-8")
    assert privacy_eval.main(["--faith", "only"]) == 2
