"""Named SQL queries from sql/*.sql, loaded once.

Each query starts with a header line `-- name: query_name`; the text up to the next header is the query.
"""

from __future__ import annotations

import re
from functools import cache

from sqlalchemy import TextClause, text

from ultron.db.resources import resource_dir

_HEADER = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def parse_queries(source: str) -> dict[str, str]:
    parts = _HEADER.split(source)
    out: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in out:
            raise ValueError(f"duplicate SQL query name {name!r}")
        out[name] = body.strip().rstrip(";")
    return out


@cache
def all_queries() -> dict[str, str]:
    queries: dict[str, str] = {}
    for path in sorted(resource_dir("sql").glob("*.sql")):
        for name, body in parse_queries(path.read_text(encoding="utf-8")).items():
            if name in queries:
                raise ValueError(f"SQL query {name!r} defined twice ({path.name})")
            queries[name] = body
    return queries


@cache
def q(name: str) -> TextClause:
    """The named query as a SQLAlchemy text clause."""
    try:
        return text(all_queries()[name])
    except KeyError:
        raise KeyError(f"no SQL query named {name!r} in sql/") from None


def dollar_params(sql: str, placeholder: re.Pattern[str]) -> tuple[str, tuple[str, ...]]:
    """`sql` with each named placeholder (group 1 of `placeholder` is the name) replaced by PostgreSQL's own
    `$n`, and the names in `$n` order, for a psycopg RawCursor: it sends the text as is, where a `%(name)s`
    query is converted on every call once it is over psycopg's 4 KB cache."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return placeholder.sub(number, sql), tuple(names)
