"""Generated references stay in step with the code; the docs the operator needs exist and link up."""

from __future__ import annotations

import re
from pathlib import Path

from ultron.api.apidoc import api_reference, openapi_schema
from ultron.config import Settings, settings_reference

DOCS = Path(__file__).resolve().parents[2] / "docs"
OPERATOR_DOCS = (
    "architecture.md",
    "operations.md",
    "security.md",
    "scaling.md",
    "api.md",
    "configuration.md",
)


def test_configuration_reference_is_current():
    committed = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert committed == settings_reference(), (
        "docs/configuration.md is stale: run `python -m ultron.config > docs/configuration.md`"
    )
    for name in Settings.model_fields:
        assert f"ULTRON_{name.upper()}" in committed or name == "dashscope_api_key"


def test_api_reference_is_current():
    committed = (DOCS / "api.md").read_text(encoding="utf-8")
    assert committed == api_reference(), (
        "docs/api.md is stale: run `python -m ultron.api.apidoc > docs/api.md`"
    )


def test_api_reference_names_every_operation_and_schema():
    spec = openapi_schema()
    text = api_reference()
    for path, ops in spec["paths"].items():
        for method in ops:
            assert f"### `{method.upper()} {path}`" in text
    for name in spec["components"]["schemas"]:
        assert f"### {name}\n" in text
    # Every in-page link points at a heading that exists.
    anchors = {h.lower() for h in re.findall(r"^### (\w+)$", text, flags=re.M)}
    assert set(re.findall(r"\]\(#(\w+)\)", text)) <= anchors


def test_operator_docs_exist_and_their_relative_links_resolve():
    for name in (
        "architecture.md",
        "operations.md",
        "security.md",
        "scaling.md",
        "api.md",
        "configuration.md",
    ):
        assert (DOCS / name).is_file(), name
    for page in (DOCS / n for n in OPERATOR_DOCS):
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            assert (page.parent / target).exists(), f"{page.name} links to missing {target}"


def test_architecture_has_a_picture():
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    assert "```mermaid" in text or re.search(r"!\[[^\]]*\]\([^)]+\.svg\)", text)
