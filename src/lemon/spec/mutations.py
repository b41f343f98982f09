"""Single-field counterfactual mutations of a spec, with the edited field's span in the text.

Each mutation changes exactly one field of one agent:

- ``drop_dependency``: remove one entry of ``depends_on`` (span: that entry);
- ``rollback_role``: remove ``duties`` so the base role's duties apply (span: the duties value);
- ``downgrade_capacity``: one tier down, large to medium or medium to small (span: the value).

Spans are ``[start, end)`` character offsets into the original text, taken from the YAML
parser's node marks. The trainer maps them to token positions (:mod:`lemon.spec.spans`) and
applies the mutant's reward difference to exactly those tokens. Mutants always name the
original output agent explicitly, so dropping an edge never makes the output ambiguous.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from lemon.spec.formatting import format_resource, format_spec
from lemon.spec.models import Agent, LemonSpec, Spec
from lemon.spec.roles import RoleLibrary, default_roles
from lemon.spec.validation import ParsedSpec

__all__ = ["Mutation", "MutationKind", "mutate", "mutations"]


class MutationKind(StrEnum):
    DROP_DEPENDENCY = "drop_dependency"
    ROLLBACK_ROLE = "rollback_role"
    DOWNGRADE_CAPACITY = "downgrade_capacity"


@dataclass(frozen=True, slots=True)
class Mutation:
    """One counterfactual: what changed, where in the original text, and the mutant."""

    kind: MutationKind
    agent: str
    target: str
    """The dropped dependency, the role whose default duties now apply, or the new tier."""
    span: tuple[int, int]
    spec: Spec
    """The mutated spec, with ``output`` explicit."""
    resource: LemonSpec | None = None
    """The mutated resource when the original was a ``LemonSpec`` resource."""

    @property
    def text(self) -> str:
        """The mutant's canonical YAML (same form, bare or resource, as the original)."""
        if self.resource is not None:
            return format_resource(self.resource)
        return format_spec(self.spec)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "agent": self.agent,
            "target": self.target,
            "span": list(self.span),
            "spec": self.text,
        }


def _mutant(
    parsed: ParsedSpec,
    index: int,
    kind: MutationKind,
    target: str,
    field: tuple[str | int, ...],
    agent: Agent,
) -> Mutation:
    """Mutation replacing agent ``index`` by ``agent``; ``field`` locates the edited value."""
    name = parsed.spec.agents[index].name
    agents = list(parsed.spec.agents)
    agents[index] = agent
    spec = parsed.spec.model_copy(update={"agents": agents, "output": parsed.output})
    resource = None
    if parsed.resource is not None:
        resource = parsed.resource.model_copy(update={"spec": spec, "status": None})
    span = parsed.source_map.span(parsed.agent_path(name, *field))
    return Mutation(kind, name, target, span, spec, resource)


def mutations(
    parsed: ParsedSpec,
    *,
    kinds: Iterable[MutationKind] = tuple(MutationKind),
    roles: RoleLibrary | None = None,
) -> list[Mutation]:
    """Every single-field mutation of the chosen kinds, in file order.

    Agents of tool roles (e.g. ``python_executor``) get no ``downgrade_capacity`` mutant: no
    model runs them, so their capacity changes nothing.
    """
    wanted = frozenset(kinds)
    library = roles if roles is not None else default_roles()
    out: list[Mutation] = []
    for i, agent in enumerate(parsed.spec.agents):
        if MutationKind.DROP_DEPENDENCY in wanted:
            for j, dep in enumerate(agent.depends_on):
                kept = agent.depends_on[:j] + agent.depends_on[j + 1 :]
                new = agent.model_copy(update={"depends_on": kept})
                out.append(
                    _mutant(parsed, i, MutationKind.DROP_DEPENDENCY, dep, ("depends_on", j), new)
                )
        if MutationKind.ROLLBACK_ROLE in wanted and agent.duties is not None:
            new = agent.model_copy(update={"duties": None})
            out.append(_mutant(parsed, i, MutationKind.ROLLBACK_ROLE, agent.role, ("duties",), new))
        lower = agent.capacity.downgraded()
        is_tool = agent.role in library and library[agent.role].is_tool
        if MutationKind.DOWNGRADE_CAPACITY in wanted and lower is not None and not is_tool:
            new = agent.model_copy(update={"capacity": lower})
            out.append(
                _mutant(parsed, i, MutationKind.DOWNGRADE_CAPACITY, lower.value, ("capacity",), new)
            )
    out.sort(key=lambda mutation: mutation.span)
    return out


def mutate(parsed: ParsedSpec, kind: MutationKind, agent: str, target: str) -> Mutation:
    """The one mutation of ``kind`` on ``agent`` with ``target``; KeyError if there is none."""
    for mutation in mutations(parsed, kinds=(kind,)):
        if mutation.agent == agent and mutation.target == target:
            return mutation
    raise KeyError(f"no {kind.value} mutation of {agent!r} with target {target!r}")
