"""The policy's prompt formats and its completion format.

``lemon-policy-prompt/v1`` (:data:`PROMPT_FORMAT`): a system message that fixes the output
language — the role library with descriptions, the tiers and the canonical layout, with one
example (about 330 tokens) — and a user message holding the task. ``lemon-policy-prompt/v2``
(:data:`SHORT_PROMPT_FORMAT`): the same user message after a one-paragraph system message naming
the roles and tiers only (about 70 tokens), for a policy trained to write specs (SFT on outcome
tables): on two CPU cores the prompt is most of what a training step computes, and the policy's
own tokens are part of every answer's cost. ``lemon-policy-prompt/v3``
(:data:`COST_PROMPT_FORMAT`): v2's system message, and a user message that also states the
**cost weight** (R_orch's cost per 1,000 tier-priced worker tokens) and, when one is given, a
token budget; training samples the weight per row, so one policy traces accuracy against cost
and writes a cheaper team when the weight is high or the budget tight. A policy version says
which format it expects (``prompt_format`` in ``policy.json``); v1 and v2 carry no weight.
Either way the completion is the spec in canonical YAML
(:func:`lemon.spec.formatting.format_spec`), nothing else: that exact text is what SFT teaches and
what GRPO's span credit indexes into.

When a generated spec is invalid, :func:`repair_messages` continues the conversation with the
located errors (``LINE:COL: message``) and asks for a corrected spec.
"""

from __future__ import annotations

from collections.abc import Sequence

from lemon.spec.formatting import format_spec
from lemon.spec.models import Spec
from lemon.spec.roles import RoleLibrary, builtin_roles

__all__ = [
    "COST_PROMPT_FORMAT",
    "DEFAULT_COST_WEIGHT",
    "PROMPT_FORMAT",
    "PROMPT_FORMATS",
    "SHORT_PROMPT_FORMAT",
    "policy_messages",
    "repair_messages",
    "spec_completion",
    "system_prompt",
]

PROMPT_FORMAT = "lemon-policy-prompt/v1"
SHORT_PROMPT_FORMAT = "lemon-policy-prompt/v2"
COST_PROMPT_FORMAT = "lemon-policy-prompt/v3"
PROMPT_FORMATS = (PROMPT_FORMAT, SHORT_PROMPT_FORMAT, COST_PROMPT_FORMAT)
DEFAULT_COST_WEIGHT = 0.02
"""The cost weight a v3 prompt states when none is given: R_orch's default ``token_cost``."""

_EXAMPLE = """agents:
  - name: planner
    role: planner
    capacity: small
  - name: solver
    role: math_solver
    duties: "Follow the plan and end with \\"The answer is N.\\""
    capacity: medium
    depends_on: [planner]
output: solver
"""

_SYSTEM = """You design a team of AI agents for a task and write it as a YAML spec.
Each agent has: name (lowercase letters, digits, hyphens; unique), role (one of the roles below), \
optional duties (one line: what this agent does for this task), capacity (small, medium or large: \
bigger models cost more tokens), optional depends_on (names of agents whose output it reads). \
output names the agent whose answer is the team's answer. \
Use as few agents and edges as the task needs.

Roles:
{roles}

Example:
{example}
Answer with the spec only, in exactly this layout."""


_SHORT = """Write a YAML spec of AI agents for the task: agents (name, role, capacity, optional \
depends_on) and output. Roles: {roles}. Capacity: small, medium or large (larger costs more). \
Use as few agents as the task needs."""


def system_prompt(roles: RoleLibrary | None = None, *, format: str = PROMPT_FORMAT) -> str:
    library = roles if roles is not None else builtin_roles()
    if format in (SHORT_PROMPT_FORMAT, COST_PROMPT_FORMAT):
        return _SHORT.format(roles=", ".join(library))
    if format != PROMPT_FORMAT:
        raise ValueError(f"unknown prompt format {format!r} (known: {', '.join(PROMPT_FORMATS)})")
    listing = "\n".join(f"- {role.name}: {role.description}" for role in library.values())
    return _SYSTEM.format(roles=listing, example=_EXAMPLE)


def policy_messages(
    task: str,
    *,
    roles: RoleLibrary | None = None,
    format: str = PROMPT_FORMAT,
    cost_weight: float | None = None,
    budget: int | None = None,
) -> list[dict[str, str]]:
    """The chat messages the policy completes for ``task``, in prompt ``format``. In v3 the
    user message states ``cost_weight`` (default :data:`DEFAULT_COST_WEIGHT`) and ``budget``
    (tier-priced worker tokens per run) when given; v1 and v2 state neither."""
    user = f"Task:\n{task.strip()}\n\n"
    if format == COST_PROMPT_FORMAT:
        weight = DEFAULT_COST_WEIGHT if cost_weight is None else cost_weight
        if weight < 0:
            raise ValueError(f"cost_weight must be >= 0, got {weight}")
        user += f"Cost weight: {weight:g} per 1,000 tier-priced tokens.\n"
        if budget is not None:
            if budget <= 0:
                raise ValueError(f"budget must be > 0 tier-priced tokens, got {budget}")
            user += f"Budget: {budget} tier-priced tokens.\n"
        user += "\n"
    return [
        {"role": "system", "content": system_prompt(roles, format=format)},
        {"role": "user", "content": user + "Write the spec."},
    ]


def spec_completion(spec: Spec, output: str | None = None) -> str:
    """The completion the policy should write for ``spec``: its canonical YAML."""
    return format_spec(spec, output=output)


def repair_messages(
    messages: Sequence[dict[str, str]], completion: str, errors: Sequence[str]
) -> list[dict[str, str]]:
    """Continue the conversation after an invalid spec: its located errors, then a retry."""
    listed = "\n".join(f"- {error}" for error in errors[:8])
    return [
        *messages,
        {"role": "assistant", "content": completion},
        {
            "role": "user",
            "content": f"That spec is invalid:\n{listed}\nWrite the corrected spec only.",
        },
    ]
