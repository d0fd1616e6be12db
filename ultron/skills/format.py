"""What a skill is on disk: SKILL.md (YAML front matter + Markdown body), slugs, semantic versions."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import total_ordering
from typing import Any

import yaml

from ultron import safe_yaml
from ultron.errors import ValidationFailed

_SLUG_DROP = re.compile(r"[^a-z0-9\u4e00-\u9fff]+")
SLUG_MAX = 50


@total_ordering
@dataclass(frozen=True)
class Version:
    """A semantic version compared as numbers: 1.10.0 > 1.9.0."""

    major: int
    minor: int
    patch: int

    @classmethod
    def parse(cls, value: str) -> Version:
        parts = value.strip().split(".")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise ValidationFailed(f"version {value!r} is not MAJOR.MINOR.PATCH")
        return cls(*(int(p) for p in parts))

    def key(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self.key() < other.key()

    def bump_minor(self) -> Version:
        return Version(self.major, self.minor + 1, 0)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


FIRST = Version(1, 0, 0)


def slugify(name: str) -> str:
    slug = _SLUG_DROP.sub("-", name.lower()).strip("-")[:SLUG_MAX].strip("-")
    return slug or "skill"


# The front matter keys the hub writes itself; every other key an uploaded SKILL.md carries (license,
# allowed-tools, metadata.author, ...) is kept as given and written back on export.
FRONT_KEYS = ("name", "description", "metadata")
HUB_METADATA = ("version", "categories", "source_cluster")


@dataclass(frozen=True)
class SkillDoc:
    name: str
    description: str
    body: str
    metadata: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)  # other top-level front matter keys


# The body's lines that state its problem: the items of "When to use" and each entry's symptom, up to its
# fix (the offline synthesizer's format, ultron/skills/evolve.py; an LLM's draft has "When to use" too).
_SECTION = re.compile(r"^#{2,3}\s+(.+?)\s*$")
_SYMPTOM = re.compile(r"\*\*(?:Symptom|Seen):\*\*\s*(.*?)\s*(?:\*\*Fix that worked:\*\*|$)")
_CITATION = re.compile(r"\s*\[m:[0-9a-f]{8}\]")
PROBLEM_SECTIONS = ("when to use",)


def problem_lines(body: str) -> list[str]:
    """The body's "When to use" items and its entries' symptoms, citations dropped."""
    out: list[str] = []
    section = ""
    for line in body.splitlines():
        heading = _SECTION.match(line)
        if heading:
            section = heading.group(1).lower()
            continue
        symptom = _SYMPTOM.search(line)
        if symptom:
            out.append(symptom.group(1))
        elif section in PROBLEM_SECTIONS and line.lstrip().startswith(("- ", "* ")):
            out.append(line.lstrip()[2:])
    return [t for t in (_CITATION.sub("", x).strip() for x in out) if t]


def embedding_text(name: str, description: str, body: str) -> str:
    """What a skill is embedded from (publishing and `ultron db reembed` must agree): its problem -- the
    name, the description and the body's problem lines (`problem_lines`) -- or, for a body that states
    none, the body. A search is for a problem: embedded whole, the fixes' diffs and a harness's repeated
    text pulled queries toward the skill with the most of them (issue 32: "marshmallow TimeDelta
    serialization precision" found a skill of Django boilerplate first)."""
    problem = problem_lines(body)
    return "\n".join([name, description, *(problem or [body])])


def render(doc: SkillDoc) -> str:
    """SKILL.md: YAML front matter (name, description, metadata as one-line JSON), then the body."""
    front = yaml.safe_dump(
        {"name": doc.name, "description": doc.description}, allow_unicode=True, sort_keys=False, width=10**6
    )
    if doc.extra:
        front += yaml.safe_dump(doc.extra, allow_unicode=True, sort_keys=True, width=10**6)
    meta = json.dumps(doc.metadata, ensure_ascii=False, sort_keys=True)
    return f"---\n{front}metadata: {meta}\n---\n\n{doc.body.strip()}\n"


# A SKILL.md, front matter and body, is at most this large (its front matter at most 64 KB).
MAX_SKILL_MD_BYTES = 1024 * 1024


def parse(text: str) -> SkillDoc:
    """Read a SKILL.md back (front matter parsed as YAML; the JSON metadata line is valid YAML)."""
    text = text.lstrip("\ufeff")
    if not text.startswith("---\n"):
        raise ValidationFailed("SKILL.md must start with a '---' front matter block")
    end = text.find("\n---\n", 4)
    if end < 0:
        raise ValidationFailed("SKILL.md front matter is not closed by '---'")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_SKILL_MD_BYTES:
        raise ValidationFailed(f"SKILL.md is larger than {MAX_SKILL_MD_BYTES} bytes")
    front = safe_yaml.load(text[4:end], "SKILL.md front matter") or {}
    if not isinstance(front, dict) or not str(front.get("name") or "").strip():
        raise ValidationFailed("SKILL.md front matter needs a name")
    metadata = front.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ValidationFailed("SKILL.md metadata must be a mapping")
    return SkillDoc(
        name=str(front["name"]).strip(),
        description=str(front.get("description") or "").strip(),
        body=text[end + 5 :].strip(),
        metadata=_plain(metadata),
        extra=_plain({str(k): v for k, v in front.items() if k not in FRONT_KEYS}),
    )


def _plain(value: dict[Any, Any]) -> dict[str, Any]:
    """Front matter as JSON can store it: YAML dates and other scalars become strings, keys strings."""
    try:
        out: dict[str, Any] = json.loads(json.dumps(value, default=str, ensure_ascii=False))
    except (TypeError, ValueError):
        raise ValidationFailed("SKILL.md front matter keys must be plain strings") from None
    return out


def kept_front_matter(doc: SkillDoc) -> dict[str, Any]:
    """What of an uploaded SKILL.md's front matter the hub does not write itself, to store with the skill."""
    metadata = {k: v for k, v in doc.metadata.items() if k not in HUB_METADATA}
    return {k: v for k, v in (("extra", doc.extra), ("metadata", metadata)) if v}
