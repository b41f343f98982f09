"""Validation: YAML text in, a typed spec out, or every located problem at once.

Three layers, each reporting all of its problems: the YAML layer (:mod:`lemon.spec.source`),
the shape layer (pydantic models) and the semantic layer below (names, roles, references,
cycles, the output agent, the agent limit). The semantic layer reads the raw data, so a wrong
type in one agent does not hide a dangling reference in another.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from lemon.spec.issues import Issue, SpecError
from lemon.spec.models import LemonSpec, Spec
from lemon.spec.roles import RoleLibrary, default_roles
from lemon.spec.shape_issues import pydantic_issues, suggest
from lemon.spec.source import NodePath, SourceMap, read_document

__all__ = [
    "DEFAULT_MAX_AGENTS",
    "ParsedSpec",
    "ValidationOptions",
    "load_spec",
    "parse_spec",
    "pydantic_issues",
]

DEFAULT_MAX_AGENTS = 64


@dataclass(frozen=True, slots=True)
class ValidationOptions:
    """What a valid spec may contain beyond its schema."""

    max_agents: int = DEFAULT_MAX_AGENTS
    roles: RoleLibrary | None = None  # None: built-in roles plus $LEMON_ROLES

    def role_library(self) -> RoleLibrary:
        return self.roles if self.roles is not None else default_roles()


@dataclass(frozen=True)
class ParsedSpec:
    """A validated spec together with the text it came from and where each node lies."""

    spec: Spec
    """The orchestration spec (for a resource, its ``spec`` body)."""
    output: str
    """The output agent: the explicit ``output`` or the one agent without dependants."""
    text: str
    source: str
    source_map: SourceMap = field(repr=False)
    resource: LemonSpec | None = None
    warnings: tuple[Issue, ...] = ()

    @property
    def base(self) -> NodePath:
        """Data path of the orchestration spec inside the document."""
        return ("spec",) if self.resource is not None else ()

    @cached_property
    def agent_index(self) -> dict[str, int]:
        return {agent.name: i for i, agent in enumerate(self.spec.agents)}

    def agent_path(self, name: str, *rest: str | int) -> NodePath:
        return (*self.base, "agents", self.agent_index[name], *rest)


class _Semantics:
    """Cross-field rules, checked on raw data and located at the offending nodes."""

    def __init__(self, body: dict[str, Any], *, base: NodePath, source_map: SourceMap) -> None:
        self.body = body
        self.base = base
        self.map = source_map
        self.issues: list[Issue] = []
        self.names: dict[str, int] = {}
        self.edges: dict[tuple[str, str], NodePath] = {}  # (dependency, dependant) -> entry path

    def at(self, rel: NodePath, message: str) -> None:
        self.issues.append(self.map.locate((*self.base, *rel), message))

    def check(self, options: ValidationOptions) -> str | None:
        agents = self.body.get("agents")
        if not isinstance(agents, list):
            return None  # the shape layer reports it
        entries = [(i, a) for i, a in enumerate(agents) if isinstance(a, dict)]
        if len(agents) > options.max_agents:
            self.at(
                ("agents", options.max_agents),
                f"too many agents: {len(agents)} (the limit is {options.max_agents})",
            )
        self._names(entries)
        self._roles(entries, options.role_library())
        self._references(entries)
        self._cycles()
        return self._output()

    def _names(self, entries: list[tuple[int, dict[str, Any]]]) -> None:
        for i, agent in entries:
            name = agent.get("name")
            if not isinstance(name, str):
                continue
            if name in self.names:
                first = self.names[name]
                self.at(
                    ("agents", i, "name"),
                    f"duplicate agent name {name!r} (first used by agents[{first}])",
                )
            else:
                self.names[name] = i

    def _roles(self, entries: list[tuple[int, dict[str, Any]]], roles: RoleLibrary) -> None:
        for i, agent in entries:
            role = agent.get("role")
            if isinstance(role, str) and role not in roles:
                self.at(
                    ("agents", i, "role"),
                    f"unknown role {role!r}{suggest(role, roles)} "
                    f"(known roles: {', '.join(sorted(roles))})",
                )

    def _references(self, entries: list[tuple[int, dict[str, Any]]]) -> None:
        for i, agent in entries:
            name, deps = agent.get("name"), agent.get("depends_on")
            if not isinstance(deps, list) or not isinstance(name, str):
                continue
            if self.names.get(name) != i:
                continue  # a duplicate: its edges would be ambiguous
            listed: set[str] = set()
            for j, dep in enumerate(deps):
                if not isinstance(dep, str):
                    continue
                where = ("agents", i, "depends_on", j)
                if dep == name:
                    self.at(where, f"agent {name!r} depends on itself")
                elif dep not in self.names:
                    self.at(
                        where,
                        f"{name!r} depends on unknown agent {dep!r}{suggest(dep, self.names)}",
                    )
                elif dep in listed:
                    self.at(where, f"{dep!r} is listed twice in {name!r}'s depends_on")
                else:
                    listed.add(dep)
                    self.edges[(dep, name)] = where

    def _cycles(self) -> None:
        # Kahn's algorithm first: cheap, and enough when (as usual) there is no cycle.
        waiting = dict.fromkeys(self.names, 0)
        dependants: dict[str, list[str]] = {name: [] for name in self.names}
        for dep, name in self.edges:
            waiting[name] += 1
            dependants[dep].append(name)
        ready = [name for name, count in waiting.items() if count == 0]
        while ready:
            for dependant in dependants[ready.pop()]:
                waiting[dependant] -= 1
                if waiting[dependant] == 0:
                    ready.append(dependant)
        if not any(waiting.values()):
            return
        import networkx as nx

        graph = nx.DiGraph(self.edges.keys())
        for component in nx.strongly_connected_components(graph):
            if len(component) < 2:
                continue
            first = min(component, key=self.names.__getitem__)
            cycle = nx.find_cycle(graph.subgraph(component), source=first)
            # Edges run dependency -> dependant; report as "a depends on b depends on ...",
            # located at the entry of the cycle's first agent (in file order).
            chain = [v for _, v in cycle][::-1]
            names = " -> ".join([*chain, chain[0]])
            self.at(
                self.edges[cycle[-1]], f"dependency cycle: {names} (each agent depends on the next)"
            )

    def _output(self) -> str | None:
        output = self.body.get("output")
        if isinstance(output, str):
            if output not in self.names:
                self.at(
                    ("output",),
                    f"output names unknown agent {output!r}{suggest(output, self.names)}",
                )
                return None
            return output
        if output is not None:
            return None  # a wrong type: the shape layer reports it
        dependencies = {dep for dep, _ in self.edges}
        sinks = [name for name in self.names if name not in dependencies]
        if len(sinks) == 1:
            return sinks[0]
        if len(sinks) > 1:
            self.at(
                ("agents",),
                f"output is ambiguous: {len(sinks)} agents have no dependants "
                f"({', '.join(sinks)}); name one with 'output:'",
            )
        return None


def _unused_agents(spec: Spec, output: str) -> list[str]:
    """Agents whose work never reaches the output agent."""
    deps = {agent.name: agent.depends_on for agent in spec.agents}
    reached, stack = {output}, [output]
    while stack:
        for dep in deps.get(stack.pop(), ()):
            if dep not in reached:
                reached.add(dep)
                stack.append(dep)
    return [agent.name for agent in spec.agents if agent.name not in reached]


def parse_spec(
    text: str, *, source: str = "<spec>", options: ValidationOptions | None = None
) -> ParsedSpec:
    """Validate a spec (bare or ``LemonSpec`` resource) and return it with its source map.

    Raises :class:`SpecError` listing every located problem found.
    """
    options = options or ValidationOptions()
    data, source_map, issues = read_document(text, source=source)
    is_resource = "apiVersion" in data or "kind" in data
    model: type[BaseModel] = LemonSpec if is_resource else Spec
    base: NodePath = ("spec",) if is_resource else ()

    parsed: BaseModel | None = None
    try:
        parsed = model.model_validate(data)
    except ValidationError as exc:
        issues.extend(pydantic_issues(exc, source_map))

    body = data.get("spec") if is_resource else data
    output = None
    if isinstance(body, dict):
        semantics = _Semantics(body, base=base, source_map=source_map)
        output = semantics.check(options)
        issues.extend(semantics.issues)
    if issues or parsed is None or output is None:
        raise SpecError(issues, source=source)

    resource = parsed if isinstance(parsed, LemonSpec) else None
    spec = resource.spec if resource is not None else parsed
    assert isinstance(spec, Spec)
    result = ParsedSpec(spec, output, text, source, source_map, resource)
    unused = _unused_agents(spec, output)
    if unused:
        warnings = tuple(
            source_map.locate(
                result.agent_path(name, "name"),
                f"warning: agent {name!r} does not feed the output agent {output!r}",
            )
            for name in unused
        )
        result = ParsedSpec(spec, output, text, source, source_map, resource, warnings)
    return result


def read_text(path: str | os.PathLike[str]) -> str:
    """Read a spec file as text, keeping its line endings so spans index the file exactly."""
    raw = Path(path).read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        message = f"not valid UTF-8 (byte 0x{raw[exc.start]:02x})"
        raise SpecError([Issue(line, column, message)], source=os.fspath(path)) from None


def load_spec(
    path: str | os.PathLike[str], *, options: ValidationOptions | None = None
) -> ParsedSpec:
    """Read and validate a spec file; ``OSError`` propagates for unreadable paths."""
    return parse_spec(read_text(path), source=os.fspath(path), options=options)
