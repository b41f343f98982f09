"""Compiling a validated spec into its execution DAG (with networkx)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from lemon.spec.models import Spec

__all__ = ["CompiledDag", "compile_spec"]


@dataclass(frozen=True, slots=True)
class CompiledDag:
    """The execution plan of a spec.

    ``levels`` groups agents that can run together: every agent sits in a later level than
    all of its dependencies. Within a level and in ``order``, ties follow the file's order.
    """

    order: tuple[str, ...]
    levels: tuple[tuple[str, ...], ...]
    edges: tuple[tuple[str, str], ...]
    output: str
    critical_path: tuple[str, ...]
    """A longest dependency chain (in agents); its length bounds the run's sequential steps."""

    @property
    def critical_path_length(self) -> int:
        return len(self.critical_path)

    def to_json(self) -> dict[str, Any]:
        return {
            "order": list(self.order),
            "levels": [list(level) for level in self.levels],
            "edges": [list(edge) for edge in self.edges],
            "output": self.output,
            "critical_path": list(self.critical_path),
            "critical_path_length": self.critical_path_length,
        }

    def mermaid(self) -> str:
        """A Mermaid flowchart: dependencies point at their dependants; the output is bold."""
        lines = ["flowchart TD"]
        lines += [f"  {name}[{name}]" for name in self.order]
        lines += [f"  {dep} --> {dependant}" for dep, dependant in self.edges]
        lines.append("  classDef output stroke-width:3px")
        lines.append(f"  class {self.output} output")
        return "\n".join(lines)

    def dot(self) -> str:
        """A Graphviz digraph: one rank per level."""
        lines = ["digraph lemon {", "  rankdir=TB;"]
        for level in self.levels:
            names = " ".join(f'"{name}";' for name in level)
            lines.append(f"  {{ rank=same; {names} }}")
        lines += [f'  "{dep}" -> "{dependant}";' for dep, dependant in self.edges]
        lines.append(f'  "{self.output}" [penwidth=3];')
        lines.append("}")
        return "\n".join(lines)


def compile_spec(spec: Spec, *, output: str | None = None) -> CompiledDag:
    """Compile a validated spec; ``output`` overrides ``spec.output`` (e.g. a resolved one).

    ``levels`` are networkx's topological generations (each sorted by file order), ``order``
    is the levels read in turn, and the critical path is the longest dependency chain, found by
    one pass over that order (ties go to the dependency listed first).
    """
    structure = tuple((agent.name, tuple(agent.depends_on)) for agent in spec.agents)
    return _compile(structure, output or spec.output)


@lru_cache(maxsize=4096)
def _compile(structure: tuple[tuple[str, tuple[str, ...]], ...], output: str | None) -> CompiledDag:
    """:func:`compile_spec` on a spec's structure alone (names and dependencies, in file order):
    the DAG is a function of it, so each structure is compiled once (a service compiles the same
    few teams for every request)."""
    import networkx as nx

    position = {name: i for i, (name, _deps) in enumerate(structure)}
    depends = dict(structure)
    edges = tuple((dep, name) for name, deps in structure for dep in deps)
    graph = nx.DiGraph()
    graph.add_nodes_from(position)
    graph.add_edges_from(edges)
    try:
        levels = tuple(
            tuple(sorted(level, key=position.__getitem__))
            for level in nx.topological_generations(graph)
        )
    except nx.NetworkXUnfeasible:
        raise ValueError("spec has a dependency cycle; validate it first") from None
    order = tuple(name for level in levels for name in level)

    depth: dict[str, int] = {}
    via: dict[str, str | None] = {}
    for name in order:
        best = max(depends[name], key=depth.__getitem__, default=None)
        depth[name] = 1 + (depth[best] if best is not None else 0)
        via[name] = best
    tail: str | None = max(order, key=depth.__getitem__)
    critical: list[str] = []
    while tail is not None:
        critical.append(tail)
        tail = via[tail]

    resolved = output
    if resolved is None:
        sinks = [name for name in order if graph.out_degree(name) == 0]
        if len(sinks) != 1:
            raise ValueError(f"output is ambiguous: {sinks}; validate the spec first")
        resolved = sinks[0]
    return CompiledDag(order, levels, edges, resolved, tuple(reversed(critical)))
