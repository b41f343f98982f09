"""Reading YAML safely, keeping every node's position.

The document is composed once (libyaml's C composer where available) into a node tree. Plain
data is built from that tree by a small walker that also enforces the limits a spec needs:
no duplicate keys, string keys only, no aliases (so no alias bombs), bounded nesting and size.
Positions are looked up on demand from the node tree, so the happy path pays nothing for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from lemon.spec.issues import Issue, SpecError

__all__ = [
    "MAX_DEPTH",
    "MAX_DOCUMENT_BYTES",
    "NodePath",
    "SourceMap",
    "compose",
    "load_document",
    "read_document",
]

MAX_DOCUMENT_BYTES = 1 << 20
"""Documents larger than this (in UTF-8 bytes) are rejected before parsing."""

MAX_DEPTH = 32
"""Deepest nesting of collections accepted; a spec needs at most six levels."""

NodePath = tuple[str | int, ...]
"""Where a value sits in a document: mapping keys and list indices from the root, e.g.
``("agents", 0, "role")``."""

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_CONSTRUCTOR = SafeConstructor()
_STR = "tag:yaml.org,2002:str"
_NULL = "tag:yaml.org,2002:null"
_BOOL = "tag:yaml.org,2002:bool"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_SCALAR_TAGS = {
    _INT: _CONSTRUCTOR.construct_yaml_int,
    _FLOAT: _CONSTRUCTOR.construct_yaml_float,
    _BOOL: _CONSTRUCTOR.construct_yaml_bool,
    "tag:yaml.org,2002:timestamp": _CONSTRUCTOR.construct_yaml_timestamp,
}


def _issue_at(node: Node, message: str) -> Issue:
    mark = node.start_mark
    return Issue(mark.line + 1, mark.column + 1, message)


@dataclass(frozen=True, slots=True)
class SourceMap:
    """Maps a data path (``("agents", 0, "capacity")``) back to its YAML node."""

    root: MappingNode

    def _walk(self, path: NodePath) -> tuple[Node, Node | None, int]:
        """The deepest node on ``path``, the key node that led to it, and how far it got."""
        node: Node = self.root
        key_node: Node | None = None
        for depth, step in enumerate(path):
            child: Node | None = None
            if isinstance(node, MappingNode) and isinstance(step, str):
                for key, value in node.value:
                    if isinstance(key, ScalarNode) and key.value == step:
                        key_node, child = key, value
                        break
            elif (
                isinstance(node, SequenceNode)
                and isinstance(step, int)
                and 0 <= step < len(node.value)
            ):
                key_node, child = None, node.value[step]
            if child is None:
                return node, key_node, depth
            node = child
        return node, key_node, len(path)

    def node(self, path: NodePath) -> Node | None:
        """The value node at ``path``, or None if the path is not in the document."""
        node, _, reached = self._walk(path)
        return node if reached == len(path) else None

    def key_node(self, path: NodePath) -> Node | None:
        """The key node of the mapping entry at ``path`` (a mapping key), if present."""
        _, key, reached = self._walk(path)
        return key if reached == len(path) else None

    def locate(self, path: NodePath, message: str, *, at_key: bool = False) -> Issue:
        """An issue at the node for ``path``; falls back to its nearest ancestor in the text."""
        node, key, reached = self._walk(path)
        if at_key and reached == len(path) and key is not None:
            node = key
        return _issue_at(node, message)

    def span(self, path: NodePath) -> tuple[int, int]:
        """Character range ``[start, end)`` of the value node at ``path`` in the source text."""
        node = self.node(path)
        if node is None:
            raise KeyError(path)
        return node.start_mark.index, node.end_mark.index


class _Builder:
    """Turns a composed node tree into plain data, collecting issues instead of raising."""

    def __init__(self, *, track_aliases: bool) -> None:
        self.issues: list[Issue] = []
        self.aliased = False
        self._seen: set[int] | None = set() if track_aliases else None

    def build(self, node: Node, depth: int) -> Any:
        if depth > MAX_DEPTH:
            self.issues.append(_issue_at(node, f"nesting deeper than {MAX_DEPTH} levels"))
            return None
        seen = self._seen
        if seen is not None:
            if id(node) in seen:
                self.aliased = True
                return None
            seen.add(id(node))
        if isinstance(node, ScalarNode):
            return self._scalar(node)
        if isinstance(node, SequenceNode):
            self._check_tag(node, "tag:yaml.org,2002:seq")
            return [self.build(child, depth + 1) for child in node.value]
        if isinstance(node, MappingNode):
            return self._mapping(node, depth)
        self.issues.append(_issue_at(node, "unsupported YAML node"))  # pragma: no cover
        return None

    def _check_tag(self, node: Node, expected: str) -> None:
        if node.tag != expected:
            self.issues.append(_issue_at(node, f"unsupported YAML tag {node.tag!r}"))

    def _scalar(self, node: ScalarNode) -> Any:
        tag = node.tag
        if tag == _STR:
            return node.value
        if tag == _NULL:
            return None
        convert = _SCALAR_TAGS.get(tag)
        if convert is None:
            self.issues.append(_issue_at(node, f"unsupported YAML tag {tag!r}"))
            return None
        try:
            return convert(node)
        except (ValueError, yaml.YAMLError) as exc:
            self.issues.append(_issue_at(node, f"invalid {tag.rsplit(':', 1)[-1]}: {exc}"))
            return None

    def _mapping(self, node: MappingNode, depth: int) -> dict[str, Any]:
        self._check_tag(node, "tag:yaml.org,2002:map")
        result: dict[str, Any] = {}
        first_seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not (isinstance(key_node, ScalarNode) and key_node.tag == _STR):
                self.issues.append(_issue_at(key_node, "mapping keys must be plain strings"))
                continue
            key = key_node.value
            if key in first_seen:
                self.issues.append(
                    _issue_at(
                        key_node,
                        f"duplicate key {key!r} (first defined on line {first_seen[key]})",
                    )
                )
                continue
            first_seen[key] = key_node.start_mark.line + 1
            result[key] = self.build(value_node, depth + 1)
        return result


def _alias_issues(text: str) -> list[Issue]:
    """Locate every alias; only called once the fast path has seen a shared node."""
    issues = []
    for event in yaml.parse(text, Loader=_Loader):
        mark = event.start_mark
        if isinstance(event, yaml.AliasEvent) and mark is not None:
            message = f"YAML aliases are not allowed in specs (alias *{event.anchor})"
            issues.append(Issue(mark.line + 1, mark.column + 1, message))
    return issues


def _check_size(text: str, source: str) -> None:
    if len(text) * 4 <= MAX_DOCUMENT_BYTES:  # a UTF-8 character is at most four bytes
        return
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_DOCUMENT_BYTES:
        message = f"document is {size} bytes; the limit is {MAX_DOCUMENT_BYTES} bytes (1 MiB)"
        raise SpecError([Issue(1, 1, message)], source=source)


def compose(text: str, *, source: str = "<spec>") -> MappingNode:
    """Parse ``text`` into a node tree whose root is a mapping, or raise a located error."""
    _check_size(text, source)
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        problem = exc.problem or "invalid YAML"
        context = f" ({exc.context})" if exc.context else ""
        raise SpecError(
            [Issue(line, column, f"YAML syntax error: {problem}{context}")], source=source
        ) from None
    except yaml.YAMLError as exc:
        raise SpecError([Issue(1, 1, f"YAML error: {exc}")], source=source) from None
    finally:
        loader.dispose()
    if root is None:
        raise SpecError([Issue(1, 1, "empty document: expected a spec mapping")], source=source)
    if not isinstance(root, MappingNode):
        kind = "a list" if isinstance(root, SequenceNode) else "a scalar"
        message = f"the document root must be a mapping (a spec or a LemonSpec), not {kind}"
        raise SpecError([_issue_at(root, message)], source=source)
    return root


def read_document(
    text: str, *, source: str = "<spec>"
) -> tuple[dict[str, Any], SourceMap, list[Issue]]:
    """Parse a YAML document into plain data, a map back to its nodes, and recoverable issues.

    Syntax errors, a non-mapping root and aliases raise :class:`SpecError` at once. Duplicate
    keys (the first one is kept), non-string keys, unsupported tags and excessive nesting are
    returned as issues alongside the data, so later layers can report their problems too.
    """
    root = compose(text, source=source)
    builder = _Builder(track_aliases="*" in text)
    data = builder.build(root, 0)
    if builder.aliased:
        raise SpecError([*builder.issues, *_alias_issues(text)], source=source)
    return data, SourceMap(root), builder.issues


def load_document(text: str, *, source: str = "<spec>") -> tuple[dict[str, Any], SourceMap]:
    """Like :func:`read_document`, but any issue at all raises :class:`SpecError`."""
    data, source_map, issues = read_document(text, source=source)
    if issues:
        raise SpecError(issues, source=source)
    return data, source_map
