"""The template policy: a documented stand-in until a trained policy exists.

It returns a fixed team for the task's kind (:mod:`lemon.tasks`):

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

from enum import StrEnum
from functools import cache

from lemon.spec.formatting import format_spec
from lemon.spec.models import Spec
from lemon.tasks import TaskKind, classify_task

__all__ = ["COMPUTE_TEMPLATES", "TEMPLATES", "TemplateVariant", "template_spec"]


class TemplateVariant(StrEnum):
    """Which set of teams the template policy writes."""

    DEFAULT = "default"
    COMPUTE = "compute"
    """Maths teams with a ``python_executor`` (:data:`COMPUTE_TEMPLATES`); other kinds as
    ``default``."""


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
    task: str, *, kind: TaskKind | None = None, variant: TemplateVariant = TemplateVariant.DEFAULT
) -> tuple[TaskKind, Spec, str]:
    """The template team for ``task`` (of ``kind``, classified here when not given): its kind,
    the spec, and the spec's canonical text."""
    chosen = kind or classify_task(task)
    spec, text = _template(chosen, TemplateVariant(variant))
    return chosen, spec, text


@cache
def _template(kind: TaskKind, variant: TemplateVariant) -> tuple[Spec, str]:
    """A kind's template spec and its canonical text, built once (a frozen model: every run of
    the template policy shares it; the service wrote and formatted it per request before)."""
    templates = COMPUTE_TEMPLATES if variant is TemplateVariant.COMPUTE else {}
    spec = Spec.model_validate(templates.get(kind, TEMPLATES[kind]))
    return spec, format_spec(spec)
