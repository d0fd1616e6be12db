"""YAML front matter that cannot blow up: bounded size, aliases, expansion and depth.

`yaml.safe_load` is safe from code execution but not from a "billion laughs": a few hundred bytes of
nested aliases expand to gigabytes once constructed (and once stored as JSON, and rendered). Here the
document is composed to its node graph first (aliases are shared nodes, nothing is expanded yet), the
graph is measured, and only a document within the bounds is constructed. Refusals are 422s, in
milliseconds.
"""

from __future__ import annotations

from typing import Any

import yaml

from ultron.errors import ValidationFailed

MAX_FRONT_MATTER_BYTES = 64 * 1024
MAX_ALIASES = 100  # alias references in one document
MAX_NODES = 20_000  # nodes once every alias is expanded
MAX_DEPTH = 64


def _measure(root: yaml.Node, what: str) -> None:
    """Expanded node count, alias references and depth of the composed graph, without expanding it."""
    sizes: dict[int, int] = {}
    aliases = 0
    # Iterative post-order walk: (node, depth, children done?)
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        if depth > MAX_DEPTH:
            raise ValidationFailed(f"{what} is nested deeper than {MAX_DEPTH} levels")
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        if done:
            sizes[id(node)] = 1 + sum(sizes.get(id(c), 1) for c in children)
            if sizes[id(node)] > MAX_NODES:
                raise ValidationFailed(f"{what} expands to more than {MAX_NODES} values (YAML aliases)")
            continue
        if id(node) in sizes:
            aliases += 1
            if aliases > MAX_ALIASES:
                raise ValidationFailed(f"{what} uses more than {MAX_ALIASES} YAML aliases")
            continue
        sizes[id(node)] = 1  # seen (a cycle back to it counts as one node)
        stack.append((node, depth, True))
        stack.extend((c, depth + 1, False) for c in children)


def load(text: str, what: str = "front matter", *, max_bytes: int = MAX_FRONT_MATTER_BYTES) -> Any:
    """Like yaml.safe_load, within the bounds above; ValidationFailed (422) beyond them or on bad YAML."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise ValidationFailed(f"{what} is {size} bytes; the limit is {max_bytes}")
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _measure(node, what)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ValidationFailed(f"{what} is not valid YAML: {exc}") from None
    except RecursionError:
        raise ValidationFailed(f"{what} is nested too deeply") from None
    finally:
        loader.dispose()
