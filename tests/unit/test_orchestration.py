"""One task end to end: the task is classified once, and the result says where its spec came
from in typed fields."""

from __future__ import annotations

import asyncio

import pytest

import lemon.orchestration
import lemon.policy.inference
import lemon.policy.teams
import lemon.policy.template
from lemon.capacity import resolve_profile
from lemon.events import SpecReady, TraceWriter
from lemon.orchestration import TaskRun, plan_task, run_task
from lemon.policy.template import TemplateVariant
from lemon.spec import parse_spec
from lemon.tasks import COMPUTE_PREFILL, TaskKind, classify_task

TASK = "Tom has 3 apples and buys 4 more. How many apples does he have?"


def test_the_task_is_classified_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def counting(task: str) -> TaskKind:
        calls.append(task)
        return classify_task(task)

    for module in (
        lemon.orchestration,
        lemon.policy.inference,
        lemon.policy.template,
        lemon.policy.teams,
    ):
        monkeypatch.setattr(module, "classify_task", counting)
    trace = TraceWriter()
    result = asyncio.run(
        run_task(
            TASK,
            profile=resolve_profile("scripted"),
            trace=trace,
            template_variant=TemplateVariant.COMPUTE,
        )
    )
    assert calls == [TASK]
    assert isinstance(result, TaskRun)
    assert result.spec_origin == "template policy (math, compute)"
    assert result.policy is not None
    assert result.policy.kind is TaskKind.MATH
    assert result.profile == "scripted"
    assert "scripted test double" in result.profile_note
    coder = next(a for a in result.agents if a.role == "programmer")
    assert coder.output.startswith(COMPUTE_PREFILL)  # the prefill follows from the one kind
    assert [e.origin for e in trace.events if isinstance(e, SpecReady)] == [result.spec_origin]
    data = result.to_json()
    assert data["spec_origin"] == result.spec_origin
    assert "policy" not in data  # no learned-policy attempts to report


def test_a_given_spec_is_planned_with_its_source_and_canonical_text() -> None:
    parsed = parse_spec(
        "agents:\n  - {name: a, role: planner, capacity: small}\n", source="team.yaml"
    )
    plan = asyncio.run(plan_task("What is 2 + 2?", parsed=parsed))
    assert plan.origin == "team.yaml"
    assert plan.kind is TaskKind.MATH
    assert plan.decision is None
    assert plan.text.endswith("output: a\n")
    result = asyncio.run(
        run_task("What is 2 + 2?", profile=resolve_profile("scripted"), parsed=parsed)
    )
    assert result.spec == plan.text
    assert result.spec_origin == "team.yaml"
