"""Policy: switching entity types off, extra patterns, allow-lists, tenant JSON, merging, spaCy models."""

from __future__ import annotations

import logging

import pytest
import spacy

from ultron.privacy import UUID_PATTERN, RedactionPolicy, Redactor

TEXT = (
    "mail alice@acme.io, call 13812345678, password=hunter2, ticket TCK-48213 "
    "trace 7f1c2a9e-3b4d-4c5e-8f90-123456789abc"
)


def test_disabling_an_entity_keeps_it(redactor):
    result = redactor.redact(TEXT, RedactionPolicy(disabled_entities=frozenset({"EMAIL_ADDRESS"})))
    assert "alice@acme.io" in result.text
    assert "<PHONE_NUMBER>" in result.text
    assert "EMAIL_ADDRESS" not in result.entities


def test_extra_pattern_adds_an_entity(redactor):
    policy = RedactionPolicy(extra_patterns=(("TICKET_ID", r"TCK-\d{5}"),))
    result = redactor.redact(TEXT, policy)
    assert "<TICKET_ID>" in result.text
    assert result.entities["TICKET_ID"] == 1


def test_extra_pattern_value_group_keeps_its_context(redactor):
    policy = RedactionPolicy(extra_patterns=(("EMPLOYEE_ID", r"工号[:：]\s*(?P<value>\d{6})"),))
    assert redactor.redact("工号：204817，请联系", policy).text == "工号：<EMPLOYEE_ID>，请联系"


def test_uuid_redaction_is_opt_in(redactor):
    uuid = "7f1c2a9e-3b4d-4c5e-8f90-123456789abc"
    assert uuid in redactor.redact(TEXT).text
    assert uuid not in redactor.redact(TEXT, RedactionPolicy(extra_patterns=(("UUID", UUID_PATTERN),))).text


def test_allow_list_keeps_exact_strings(redactor):
    result = redactor.redact(TEXT, RedactionPolicy(allow_list=("alice@acme.io",)))
    assert "alice@acme.io" in result.text
    assert "<PHONE_NUMBER>" in result.text


def test_constructor_policy_is_the_global_one():
    quiet = Redactor(RedactionPolicy(disabled_entities=frozenset({"PHONE_NUMBER"})))
    assert "13812345678" in quiet.redact(TEXT).text
    # A per-call (tenant) policy adds to it; it cannot switch the global choice back on.
    tenant = RedactionPolicy(disabled_entities=frozenset({"EMAIL_ADDRESS"}))
    out = quiet.redact(TEXT, tenant).text
    assert "13812345678" in out and "alice@acme.io" in out and "<REDACTED_CREDENTIAL>" in out


def test_from_mapping_builds_a_policy():
    policy = RedactionPolicy.from_mapping(
        {
            "disabled_entities": ["IP_ADDRESS"],
            "extra_patterns": [["TICKET_ID", r"TCK-\d+"], {"entity": "ORDER", "regex": r"ORD-\d+"}],
            "allow_list": ["support@acme.io"],
            "spacy_model": None,
        }
    )
    assert policy == RedactionPolicy(
        disabled_entities=frozenset({"IP_ADDRESS"}),
        extra_patterns=(("TICKET_ID", r"TCK-\d+"), ("ORDER", r"ORD-\d+")),
        allow_list=("support@acme.io",),
        spacy_model=None,
    )
    assert RedactionPolicy.from_mapping(None) == RedactionPolicy()
    assert RedactionPolicy.from_mapping({}) == RedactionPolicy(spacy_model=None)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"disabled": ["EMAIL_ADDRESS"]}, "unknown redaction policy keys: disabled"),
        ({"disabled_entities": "EMAIL_ADDRESS"}, "disabled_entities must be a list of strings"),
        ({"disabled_entities": ["email"]}, "UPPER_SNAKE_CASE"),
        ({"extra_patterns": [["TICKET"]]}, "pairs"),
        ({"extra_patterns": [["TICKET", "(unclosed"]]}, "invalid regex"),
        ({"extra_patterns": [["TICKET", "a*"]]}, "matches the empty string"),
        ({"extra_patterns": {"TICKET": "x"}}, "must be a list"),
        ({"allow_list": [1, 2]}, "allow_list must be a list of strings"),
        ({"spacy_model": 3}, "spacy_model"),
        (["not", "a", "mapping"], "must be an object"),
    ],
)
def test_from_mapping_rejects_bad_settings(data, message):
    with pytest.raises(ValueError, match=message):
        RedactionPolicy.from_mapping(data)


def test_merged_puts_the_tenant_over_the_global_policy():
    base = RedactionPolicy(
        disabled_entities=frozenset({"IP_ADDRESS"}),
        extra_patterns=(("ALPHA", "a1"),),
        allow_list=("x",),
        spacy_model="en_core_web_sm",
    )
    tenant = RedactionPolicy(
        disabled_entities=frozenset({"USER"}),
        extra_patterns=(("ALPHA", "a1"), ("BETA", "b2")),
        allow_list=("y",),
        spacy_model=None,  # names no model: the global one stays
    )
    merged = base.merged(tenant)
    assert merged.disabled_entities == {"IP_ADDRESS", "USER"}
    assert merged.extra_patterns == (("ALPHA", "a1"), ("BETA", "b2"))
    assert merged.allow_list == ("x", "y")
    assert merged.spacy_model == "en_core_web_sm"
    assert base.merged(RedactionPolicy(spacy_model="zh_core_web_sm")).spacy_model == "zh_core_web_sm"


def test_missing_spacy_model_logs_and_falls_back(caplog):
    with caplog.at_level(logging.WARNING, logger="ultron.privacy.nlp"):
        redactor = Redactor(RedactionPolicy(spacy_model="xx_no_such_model_sm"))
    assert "not available" in caplog.text
    assert redactor.redact("mail alice@acme.io").text == "mail <EMAIL_ADDRESS>"


def test_a_named_spacy_model_detects_person_names(tmp_path):
    # A tiny offline pipeline standing in for en_core_web_sm: a rule-based NER that knows one name.
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("entity_ruler")
    ruler.add_patterns([{"label": "PERSON", "pattern": "Alice Smith"}, {"label": "ORG", "pattern": "Acme"}])
    nlp.to_disk(tmp_path / "person_model")
    redactor = Redactor(RedactionPolicy(spacy_model=str(tmp_path / "person_model")))
    result = redactor.redact("Alice Smith from Acme says the deploy is done")
    assert result.text == "<PERSON> from Acme says the deploy is done"
    assert result.entities == {"PERSON": 1}
    quiet = RedactionPolicy(disabled_entities=frozenset({"PERSON"}))
    assert redactor.redact("Alice Smith", quiet).text == "Alice Smith"


def test_extra_patterns_with_backreferences_and_inline_flags(redactor):
    policy = RedactionPolicy(
        extra_patterns=(("REPEATED", r"\b(\w{3})-\1\b"), ("TICKET_ID", r"(?i)tck-\d{4}")),
        disabled_entities=frozenset({"PHONE_NUMBER", "CREDIT_CARD", "IBAN_CODE", "CN_RESIDENT_ID"}),
    )
    # No built-in type can match this text, so only the tenant patterns get it past the pre-check.
    assert redactor.redact("see abc-abc and Tck-0042", policy).text == "see <REPEATED> and <TICKET_ID>"
