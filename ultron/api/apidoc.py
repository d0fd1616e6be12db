"""docs/api.md, generated from the app's OpenAPI schema: `python -m ultron.api.apidoc > docs/api.md`.

A test regenerates it and compares, so the reference cannot drift from the code.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from ultron.api.app import create_app
from ultron.config import Settings

HEADER = """# HTTP API reference

Generated from the OpenAPI schema by `python -m ultron.api.apidoc > docs/api.md`; do not edit by hand.
A running hub serves the same schema at `/openapi.json` and explorers at `/docs` (Swagger UI) and
`/redoc`, both from the package itself (no CDN: they work offline).

Every endpoint except `/health`, `/ready` and `/metrics` takes `Authorization: Bearer <api key>`
(on loopback, on a database where no key was ever created, the hub runs open as the local agent).
Every response carries `X-Request-ID` (the caller's, when it sent a plain token of at most 128
characters; else a fresh one), and the same id is on every log line of that request. Errors are JSON
`{error, detail}`: 4xx for bad input (NUL, lone surrogates, out-of-range integers, JSON nested deeper
than 64 levels included); `503 provider_unavailable` (an embedding provider failed; nothing stored),
`503 database_unavailable` and `503 database_busy` with `Retry-After`; an unexpected error is
`500 internal_error` naming the request id, with `Connection: close` (see [security.md](security.md)).
`/metrics` (Prometheus text format) is not in the schema; its series are listed in
[operations.md](operations.md#metrics).
"""


def openapi_schema() -> dict[str, Any]:
    """The schema of the app as `ultron serve` builds it, without a database (only settings are read)."""
    app = create_app(SimpleNamespace(settings=Settings(_env_file=None)))  # type: ignore[arg-type,call-arg]
    return app.openapi()


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def type_of(schema: dict[str, Any]) -> str:
    """A short, readable type: `string`, `list[Tag]`, `MemoryRecord`, `"hot" | "warm"`, `int | null`."""
    if "$ref" in schema:
        return f"[{_ref_name(schema['$ref'])}](#{_ref_name(schema['$ref']).lower()})"
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    if "anyOf" in schema:
        return " | ".join(type_of(s) for s in schema["anyOf"])
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return type_of(schema["allOf"][0])
    kind = schema.get("type")
    if kind == "array":
        return f"list[{type_of(schema.get('items', {}))}]"
    if kind == "object" and schema.get("properties"):  # an inline body (JSON or zip: POST /skills)
        return "{" + ", ".join(f"{k}: {type_of(v)}" for k, v in schema["properties"].items()) + "}"
    if kind == "object" and "additionalProperties" in schema:
        extra = schema["additionalProperties"]
        return f"map[string, {type_of(extra) if isinstance(extra, dict) else 'any'}]"
    if kind == "string" and "format" in schema:
        return f"string ({schema['format']})"
    return str(kind or "any")


def _limits(schema: dict[str, Any]) -> str:
    keys = ("minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "minItems", "maxItems")
    shown = [f"{k}={schema[k]}" for k in keys if k in schema]
    for sub in schema.get("anyOf", []):
        shown += [f"{k}={sub[k]}" for k in keys if k in sub]
    return ", ".join(shown)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _operation(method: str, path: str, op: dict[str, Any]) -> list[str]:
    lines = [f"### `{method.upper()} {path}`", ""]
    if op.get("description"):
        lines += [op["description"].strip(), ""]
    params = op.get("parameters", [])
    if params:
        lines += ["| parameter | in | type | required | limits |", "|---|---|---|---|---|"]
        for p in params:
            schema = p.get("schema", {})
            default = f" (default `{json.dumps(schema['default'])}`)" if "default" in schema else ""
            lines.append(
                f"| `{p['name']}` | {p['in']} | {_cell(type_of(schema))}{default} | "
                f"{'yes' if p.get('required') else 'no'} | {_cell(_limits(schema))} |"
            )
        lines.append("")
    body = op.get("requestBody", {}).get("content", {})
    for media, content in body.items():
        lines += [f"Request body ({media}): {type_of(content.get('schema', {}))}", ""]
    # Codes that share a body are listed together: most endpoints share one ErrorBody for every error.
    grouped: dict[str, list[str]] = {}
    for code, resp in op.get("responses", {}).items():
        schema = resp.get("content", {}).get("application/json", {}).get("schema")
        grouped.setdefault(type_of(schema) if schema else resp.get("description", ""), []).append(f"`{code}`")
    lines += ["Responses: " + "; ".join(f"{' '.join(codes)} {body}" for body, codes in grouped.items()), ""]
    return lines


def _component(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### {name}", ""]
    if schema.get("description"):
        lines += [schema["description"].strip(), ""]
    props = schema.get("properties")
    if not props:
        return [*lines, f"Type: {type_of(schema)}", ""]
    required = set(schema.get("required", []))
    lines += ["| field | type | required | default | limits | description |", "|---|---|---|---|---|---|"]
    for field, spec in props.items():
        default = f"`{json.dumps(spec['default'], ensure_ascii=False)}`" if "default" in spec else ""
        lines.append(
            f"| `{field}` | {_cell(type_of(spec))} | {'yes' if field in required else 'no'} | "
            f"{_cell(default)} | {_cell(_limits(spec))} | {_cell(spec.get('description', ''))} |"
        )
    return [*lines, ""]


def render(spec: dict[str, Any]) -> str:
    lines = [HEADER, f"Version {spec['info']['version']}.", ""]
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            by_tag.setdefault((op.get("tags") or ["other"])[0], []).append((method, path, op))
    for tag, ops in by_tag.items():
        lines += [f"## {tag}", ""]
        for method, path, op in ops:
            lines += _operation(method, path, op)
    lines += ["## Schemas", ""]
    for name, schema in sorted(spec.get("components", {}).get("schemas", {}).items()):
        lines += _component(name, schema)
    return "\n".join(lines).rstrip("\n") + "\n"


def api_reference() -> str:
    return render(openapi_schema())


if __name__ == "__main__":
    print(api_reference(), end="")
