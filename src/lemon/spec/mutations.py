"""Single-field counterfactual mutations of a spec, with the edited field's span in the text.

Each mutation changes exactly one field of one agent. The paper's three kinds (the default
listing, :data:`PAPER_KINDS`):

- ``drop_dependency``: remove one entry of ``depends_on`` (span: that entry);
- ``rollback_role``: remove ``duties`` so the base role's duties apply (span: the duties value);
- ``downgrade_capacity``: one tier down, large to medium or medium to small (span: the value).

Two-way edits (:data:`TWO_WAY_KINDS`, chosen explicitly, e.g. by a training config):

- ``upgrade_capacity``: one tier up, small to medium or medium to large (span: the value);
- ``remove_agent``: remove a non-output agent and every ``depends_on`` entry naming it
  (span: the agent's name line, ``name: X``); the mutant stays valid.

Spans are ``[start, end)`` character offsets into the original text, taken from the YAML
parser's node marks. Each mutation also carries a ``credit_span``: the characters whose tokens
*create* the edited thing, which is where a trainer puts the mutant's credit
(:mod:`lemon.spec.spans` maps it to tokens):

- value edits (``downgrade_capacity``, ``upgrade_capacity``): the value only (``large``);
- presence edits: the text that makes the thing exist. ``rollback_role``: the whole
  ``duties: VALUE`` entry (the key is where a policy decides to write duties at all; the value
  text that follows is nearly forced); ``drop_dependency``: the entry with the indicator that
  opens it (``[`` or ``, `` in a flow list, ``- `` in a block list); ``remove_agent``: the name
  line with its ``- `` item indicator.

Mutants always name the original output agent explicitly, so dropping an edge or an agent never
makes the output ambiguous.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from lemon.spec.formatting import format_resource, format_spec
from lemon.spec.models import Agent, Capacity, LemonSpec, Spec
from lemon.spec.roles import RoleLibrary, default_roles
from lemon.spec.validation import ParsedSpec

__all__ = [
    "PAPER_KINDS",
    "TWO_WAY_KINDS",
    "Mutation",
    "MutationKind",
    "capacity_mutation",
    "mutate",
    "mutations",
]


class MutationKind(StrEnum):
    DROP_DEPENDENCY = "drop_dependency"
    ROLLBACK_ROLE = "rollback_role"
    DOWNGRADE_CAPACITY = "downgrade_capacity"
    UPGRADE_CAPACITY = "upgrade_capacity"
    REMOVE_AGENT = "remove_agent"

    @property
    def field(self) -> str:
        """The field the kind edits: ``capacity``, ``duties``, ``depends_on`` or ``agent``."""
        return _FIELDS[self]


_FIELDS = {
    MutationKind.DROP_DEPENDENCY: "depends_on",
    MutationKind.ROLLBACK_ROLE: "duties",
    MutationKind.DOWNGRADE_CAPACITY: "capacity",
    MutationKind.UPGRADE_CAPACITY: "capacity",
    MutationKind.REMOVE_AGENT: "agent",
}

PAPER_KINDS: tuple[MutationKind, ...] = (
    MutationKind.DROP_DEPENDENCY,
    MutationKind.ROLLBACK_ROLE,
    MutationKind.DOWNGRADE_CAPACITY,
)
"""The paper's three kinds: what ``lemon mutate`` lists by default."""

TWO_WAY_KINDS: tuple[MutationKind, ...] = (
    MutationKind.UPGRADE_CAPACITY,
    MutationKind.REMOVE_AGENT,
)
"""Edits in the other direction: a tier up, an agent removed."""

_TIERS = tuple(Capacity)


@dataclass(frozen=True, slots=True)
class Mutation:
    """One counterfactual: what changed, where in the original text, and the mutant."""

    kind: MutationKind
    agent: str
    target: str
    """The dropped dependency, the role whose default duties now apply, the new tier, or the
    removed agent's role."""
    span: tuple[int, int]
    spec: Spec
    """The mutated spec, with ``output`` explicit."""
    resource: LemonSpec | None = None
    """The mutated resource when the original was a ``LemonSpec`` resource."""
    credit_span: tuple[int, int] = (0, 0)
    """The characters whose tokens create the edited thing (see the module docstring)."""

    @property
    def field(self) -> tuple[str, str]:
        """``(agent, field)``: mutants with the same key edit the same field of the same agent
        (one ``depends_on`` entry is a field of its own: ``depends_on:NAME``)."""
        name = self.kind.field
        if self.kind is MutationKind.DROP_DEPENDENCY:
            name = f"depends_on:{self.target}"
        return self.agent, name

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


def _opening(text: str, start: int, indicators: str) -> int:
    """``start`` moved back over spaces to an item indicator (``[``, ``,``, ``-``) if one is
    there: the characters that open a list entry belong to the entry's creation."""
    i = start
    while i > 0 and text[i - 1] == " ":
        i -= 1
    if i > 0 and text[i - 1] in indicators:
        return i - 1
    return start


def _respec(parsed: ParsedSpec, agents: list[Agent]) -> tuple[Spec, LemonSpec | None]:
    spec = parsed.spec.model_copy(update={"agents": agents, "output": parsed.output})
    resource = None
    if parsed.resource is not None:
        resource = parsed.resource.model_copy(update={"spec": spec, "status": None})
    return spec, resource


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
    spec, resource = _respec(parsed, agents)
    path = parsed.agent_path(name, *field)
    span = parsed.source_map.span(path)
    credit = span
    if kind is MutationKind.ROLLBACK_ROLE:
        key = parsed.source_map.key_node(path)
        if key is not None:
            credit = (key.start_mark.index, span[1])
    elif kind is MutationKind.DROP_DEPENDENCY:
        credit = (_opening(parsed.text, span[0], "[,-"), span[1])
    return Mutation(kind, name, target, span, spec, resource, credit)


def _removal(parsed: ParsedSpec, index: int) -> Mutation:
    """The mutant without agent ``index`` and without every dependency naming it."""
    gone = parsed.spec.agents[index]
    agents = [
        agent.model_copy(update={"depends_on": [d for d in agent.depends_on if d != gone.name]})
        if gone.name in agent.depends_on
        else agent
        for i, agent in enumerate(parsed.spec.agents)
        if i != index
    ]
    spec, resource = _respec(parsed, agents)
    path = parsed.agent_path(gone.name, "name")
    key = parsed.source_map.key_node(path)
    _, end = parsed.source_map.span(path)
    start = key.start_mark.index if key is not None else parsed.source_map.span(path)[0]
    span = (start, end)
    credit = (_opening(parsed.text, start, "-"), end)
    return Mutation(MutationKind.REMOVE_AGENT, gone.name, gone.role, span, spec, resource, credit)


def _shifted(tier: Capacity, step: int) -> Capacity | None:
    index = _TIERS.index(tier) + step
    return _TIERS[index] if 0 <= index < len(_TIERS) else None


def capacity_mutation(parsed: ParsedSpec, agent: str, tier: Capacity) -> Mutation:
    """The mutant with ``agent`` moved to ``tier`` (any distance; ``upgrade_capacity`` or
    ``downgrade_capacity`` by direction). A trainer's credit uses it to evaluate every tier of a
    capacity field; :func:`mutations` lists only the one-tier steps. ``ValueError`` when
    ``tier`` is the agent's own tier."""
    index = parsed.agent_index[agent]
    current = parsed.spec.agents[index].capacity
    if tier is current:
        raise ValueError(f"agent {agent!r} already has capacity {tier.value}")
    up = _TIERS.index(tier) > _TIERS.index(current)
    kind = MutationKind.UPGRADE_CAPACITY if up else MutationKind.DOWNGRADE_CAPACITY
    new = parsed.spec.agents[index].model_copy(update={"capacity": tier})
    return _mutant(parsed, index, kind, tier.value, ("capacity",), new)


def mutations(
    parsed: ParsedSpec,
    *,
    kinds: Iterable[MutationKind] = PAPER_KINDS,
    roles: RoleLibrary | None = None,
) -> list[Mutation]:
    """Every single-field mutation of the chosen kinds, in file order (default: the paper's
    three kinds).

    Agents of tool roles (e.g. ``python_executor``) get no capacity mutant: no model runs them,
    so their capacity changes nothing. The output agent is never removed.
    """
    wanted = frozenset(kinds)
    library = roles if roles is not None else default_roles()
    out: list[Mutation] = []
    for i, agent in enumerate(parsed.spec.agents):
        if MutationKind.REMOVE_AGENT in wanted and agent.name != parsed.output:
            out.append(_removal(parsed, i))
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
        if agent.role in library and library[agent.role].is_tool:
            continue
        for kind, step in (
            (MutationKind.DOWNGRADE_CAPACITY, -1),
            (MutationKind.UPGRADE_CAPACITY, 1),
        ):
            tier = _shifted(agent.capacity, step)
            if kind in wanted and tier is not None:
                new = agent.model_copy(update={"capacity": tier})
                out.append(_mutant(parsed, i, kind, tier.value, ("capacity",), new))
    out.sort(key=lambda mutation: mutation.span)
    return out


def mutate(parsed: ParsedSpec, kind: MutationKind, agent: str, target: str) -> Mutation:
    """The one mutation of ``kind`` on ``agent`` with ``target``; KeyError if there is none."""
    for mutation in mutations(parsed, kinds=(kind,)):
        if mutation.agent == agent and mutation.target == target:
            return mutation
    raise KeyError(f"no {kind.value} mutation of {agent!r} with target {target!r}")
