"""The template policy: a documented stand-in until a trained policy exists.

It classifies the task by its surface form and returns a fixed team for that kind:

- ``math`` (the default when the task has numbers): planner (small) -> math_solver (medium)
  -> verifier (large, reads both); the verifier answers, on the strongest tier.
- ``multiple_choice`` (lettered options such as ``(A) ...`` / ``A) ...``, or "Answer Choices"):
  two knowledge experts on different tiers, one eliminating wrong options first, and an
  aggregator (large) that decides.
- ``code`` (a Python signature, a code fence, or "write a function"): programmer (large) ->
  tester (small) -> a second programmer (medium) that fixes the code against the tests and
  answers with the final code.
- ``general``: one knowledge expert (medium).

The same templates are the "template policy" baseline in evaluations.
"""

from __future__ import annotations

import re
from enum import StrEnum

from lemon.spec.formatting import format_spec
from lemon.spec.models import Spec

__all__ = [
    "COMPUTE_PREFILL",
    "COMPUTE_TEMPLATES",
    "TEMPLATES",
    "TaskKind",
    "classify_task",
    "prefills",
    "template_spec",
]

COMPUTE_PREFILL = "```python\nanswer = "
"""What a programmer's answer starts with on numeric tasks. Small models write a program far
more often when the code block is already open: on the first 20 MultiArith items the packaged
135M model solved 0/20 with plain program-of-thought prompting and 2/20 with this prefill."""


class TaskKind(StrEnum):
    MATH = "math"
    MULTIPLE_CHOICE = "multiple_choice"
    CODE = "code"
    GENERAL = "general"


_OPTIONS = re.compile(r"(?m)(^|\s)\(?([A-E])[\).:]\s+\S")
_CODE = re.compile(r"(?m)^\s*def \w+\(|```|\bwrite (a|the) (python )?function\b", re.IGNORECASE)


def classify_task(task: str) -> TaskKind:
    if _CODE.search(task):
        return TaskKind.CODE
    letters = {m.group(2) for m in _OPTIONS.finditer(task)}
    if len(letters) >= 3 or "answer choices" in task.lower():
        return TaskKind.MULTIPLE_CHOICE
    if re.search(r"\d", task):
        return TaskKind.MATH
    return TaskKind.GENERAL


TEMPLATES: dict[TaskKind, dict[str, object]] = {
    TaskKind.MATH: {
        "agents": [
            {"name": "planner", "role": "planner", "capacity": "small"},
            {
                "name": "solver",
                "role": "math_solver",
                "duties": 'Follow the plan, show each calculation, and end with "The answer is N."',
                "capacity": "medium",
                "depends_on": ["planner"],
            },
            {
                "name": "verifier",
                "role": "verifier",
                "capacity": "large",
                "depends_on": ["planner", "solver"],
            },
        ],
        "output": "verifier",
    },
    TaskKind.MULTIPLE_CHOICE: {
        "agents": [
            {"name": "expert", "role": "knowledge_expert", "capacity": "medium"},
            {
                "name": "eliminator",
                "role": "knowledge_expert",
                "duties": "Rule out the options that are clearly wrong, one by one, then pick "
                "the best remaining option.",
                "capacity": "small",
            },
            {
                "name": "judge",
                "role": "aggregator",
                "duties": "Decide between the experts' choices and end with "
                '"The answer is X." where X is the option letter.',
                "capacity": "large",
                "depends_on": ["expert", "eliminator"],
            },
        ],
        "output": "judge",
    },
    TaskKind.CODE: {
        "agents": [
            {"name": "coder", "role": "programmer", "capacity": "large"},
            {"name": "tests", "role": "tester", "capacity": "small", "depends_on": ["coder"]},
            {
                "name": "fixer",
                "role": "programmer",
                "duties": "Correct the code so that every test passes and return the complete "
                "final function in one code block.",
                "capacity": "medium",
                "depends_on": ["coder", "tests"],
            },
        ],
        "output": "fixer",
    },
    TaskKind.GENERAL: {
        "agents": [{"name": "expert", "role": "knowledge_expert", "capacity": "medium"}],
        "output": "expert",
    },
}


def prefills(kind: TaskKind) -> dict[str, str]:
    """Assistant prefills per role for a task kind (programmers compute on maths tasks)."""
    return {"programmer": COMPUTE_PREFILL} if kind is TaskKind.MATH else {}


COMPUTE_TEMPLATES: dict[TaskKind, dict[str, object]] = {
    TaskKind.MATH: {
        "agents": [
            {"name": "planner", "role": "planner", "capacity": "small"},
            {
                "name": "coder",
                "role": "programmer",
                "capacity": "medium",
                "depends_on": ["planner"],
            },
            {
                "name": "run",
                "role": "python_executor",
                "capacity": "small",
                "depends_on": ["coder"],
            },
            {
                "name": "verifier",
                "role": "verifier",
                "capacity": "medium",
                "depends_on": ["planner", "coder", "run"],
            },
        ],
        "output": "verifier",
    },
}
"""The ``compute`` variant: teams with tool roles where computing can pay (maths: the planner's
steps become a program that the sandbox runs; the verifier checks its output). Other kinds use
the default teams."""


def template_spec(
    task: str, *, kind: TaskKind | None = None, variant: str = "default"
) -> tuple[TaskKind, Spec, str]:
    """The template team for ``task``: its kind, the spec, and the spec's canonical text.

    ``variant`` is ``default`` or ``compute`` (:data:`COMPUTE_TEMPLATES`, with tool roles).
    """
    if variant not in {"default", "compute"}:
        raise ValueError(f"unknown template variant {variant!r} (default, compute)")
    chosen = kind or classify_task(task)
    templates = COMPUTE_TEMPLATES if variant == "compute" else {}
    spec = Spec.model_validate(templates.get(chosen, TEMPLATES[chosen]))
    return chosen, spec, format_spec(spec)
