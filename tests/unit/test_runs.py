"""LemonRun's pure parts: the resource model (and the rules the CRD's CEL repeats), cost,
preview, planning a run from the objects it reads, the status of each phase, the manifests, and
the service's answers in the operator's types (phase, failure kind, tokens)."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from lemon.cli.rendering import render_table
from lemon.engine.results import FailureKind
from lemon.events import (
    AgentFinished,
    Event,
    RunFinished,
    TraceTruncated,
    decode_event,
)
from lemon.pricing import DEFAULT_TIER_PRICES, TierPrices
from lemon.resources import CapacityProfileSpec, TierStatus, crd
from lemon.resources.lemon_run import (
    LemonRunSpec,
    LemonRunStatus,
    RunAgentStatus,
    RunPhase,
    RunTokens,
    TierEndpoint,
    answer_preview,
    needed_tiers,
    tier_endpoint,
)
from lemon.spec import Capacity, parse_spec
from lemon_api.v1 import orchestrator_pb2 as pb
from lemon_operator import manifests
from lemon_operator.run_plans import (
    Ready,
    Refused,
    Waiting,
    default_policy,
    plan_run,
    referenced,
    task_only,
)
from lemon_operator.run_results import (
    FAILURE_REASONS,
    MAX_TRACE_BYTES,
    ServiceRun,
    failure_of,
    finished_status,
    pending_status,
    refused_status,
    run_cost,
    running_status,
    trace_text,
)
from lemon_operator.service import client_config, run_request, service_run
from lemon_service.convert import failure_kind
from lemon_service.run_store import bounded_trace

GOLDEN = Path(__file__).parent / "golden"
SOURCES = {
    "specRef": {"name": "team"},
    "spec": {"agents": [{"name": "solver", "role": "math_solver", "capacity": "small"}]},
    "policyRef": {"name": "router"},
}
AT = "2026-01-02T03:04:05Z"
NO_PRICES = TierPrices.as_given({})


@pytest.mark.parametrize(
    "given",
    [combo for size in range(4) for combo in itertools.combinations(SOURCES, size)],
    ids=lambda combo: "+".join(combo) or "none",
)
def test_a_run_gives_at_most_one_source_of_its_spec(given: tuple[str, ...]) -> None:
    """None (the task alone: LEMON chooses) or one; two or more are refused, named."""
    body = {"task": "What is 2 + 3?", **{key: SOURCES[key] for key in given}}
    if len(given) <= 1:
        assert LemonRunSpec.model_validate(body).task == "What is 2 + 3?"
    else:
        found = ", ".join(given)
        with pytest.raises(
            ValidationError,
            match=f"at most one of specRef, spec or policyRef may be given \\(got {found}\\)",
        ):
            LemonRunSpec.model_validate(body)


def test_the_crd_states_the_same_rules_in_cel() -> None:
    spec = crd("LemonRun")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    rules = {rule["message"]: rule["rule"] for rule in spec["spec"]["x-kubernetes-validations"]}
    assert rules["at most one of specRef, spec or policyRef may be given"] == (
        "(has(self.specRef) ? 1 : 0) + (has(self.spec) ? 1 : 0) + "
        "(has(self.policyRef) ? 1 : 0) <= 1"
    )
    assert rules["a run's spec is immutable; create a new LemonRun"] == "self == oldSelf"
    inline = spec["spec"]["properties"]["spec"]
    assert inline["properties"]["agents"]["x-kubernetes-list-map-keys"] == ["name"]
    assert spec["spec"]["required"] == ["task"]
    for field, node in spec["spec"]["properties"].items():
        assert node.get("description"), field


def test_bad_fields_are_refused_with_their_bounds() -> None:
    base = {"task": "t", "specRef": {"name": "team"}}
    for bad in ({"deadlineSeconds": 0}, {"maxTokens": 0}, {"ttlSecondsAfterFinished": -1},
                {"task": " "}, {"specRef": {"name": "Team"}}, {"unknown": 1}):  # fmt: skip
        with pytest.raises(ValidationError):
            LemonRunSpec.model_validate({**base, **bad})


def agent(name: str, tier: str, tokens: tuple[int, int], **extra: Any) -> RunAgentStatus:
    prompt, completion = tokens
    return RunAgentStatus(
        name=name,
        tier=tier,
        status=extra.pop("status", "succeeded"),
        prompt_tokens=prompt,
        completion_tokens=completion,
        tokens=prompt + completion,
        **extra,
    )


def test_cost_prices_each_agents_tokens_at_its_tier() -> None:
    agents = [agent("a", "small", (100, 20)), agent("b", "large", (300, 50))]
    prices = TierPrices.as_given({"small": 0.000001, "large": 0.00001})
    assert run_cost(agents, prices=prices) == pytest.approx(120e-6 + 350e-5)
    only_small = TierPrices.as_given({"small": 0.5})  # a tier the profile lacks costs nothing
    assert run_cost(agents, prices=only_small) == 60.0
    assert run_cost([], prices=prices) == 0.0
    # the profile's prices are its costPerToken, as given (dollars, not scaled to medium)
    profile = CapacityProfileSpec.model_validate(
        {
            "small": {"model": "org/s", "costPerToken": 0.002},
            "medium": {"model": "org/m", "costPerToken": 0.004},
        }
    )
    assert profile.prices() == TierPrices(small=0.002, medium=0.004, large=0.0)
    # a run's cost is in tier-priced tokens: costPerToken relative to the medium tier's
    assert profile.tier_prices() == TierPrices(small=0.5, medium=1.0, large=0.0)
    unpriced = CapacityProfileSpec.model_validate({"small": {"model": "org/s"}})
    assert unpriced.tier_prices() == DEFAULT_TIER_PRICES


@pytest.mark.parametrize(
    ("answer", "preview"),
    [
        (None, None),
        ("42", "42"),
        ("  The answer is 42.  ", "The answer is 42."),
        ("\n\nStep 1: add.\nStep 2: multiply.", "Step 1: add.…"),
        ("x" * 100, "x" * 59 + "…"),
        ("", ""),
    ],
)
def test_answer_preview_is_one_short_line(answer: str | None, preview: str | None) -> None:
    assert answer_preview(answer) == preview


def test_needed_tiers_skip_tool_agents() -> None:
    text = """\
agents:
- {name: coder, role: programmer, capacity: large}
- {name: run, role: python_executor, capacity: medium, depends_on: [coder]}
- {name: check, role: verifier, capacity: small, depends_on: [run]}
"""
    assert needed_tiers(parse_spec(text).spec) == [Capacity.SMALL, Capacity.LARGE]


def test_tier_endpoint_is_kserves_openai_path_and_the_tier_as_model() -> None:
    ready = TierStatus(
        tier=Capacity.MEDIUM, inference_service="p-medium", url="http://h/", ready=True
    )
    assert tier_endpoint(ready) == TierEndpoint(Capacity.MEDIUM, "http://h/openai/v1", "medium")
    assert tier_endpoint(ready.model_copy(update={"url": None})) is None


# ── planning ──────────────────────────────────────────────────────────────────────────────


def run_body(source: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "team-a", "name": "r1", "uid": "uid-1", "generation": 1},
        "spec": {"task": "What is 2 + 3?", **source, **extra},
    }


def profile(*, ready: tuple[str, ...] = ("small", "medium")) -> dict[str, Any]:
    return {
        "metadata": {"name": "default"},
        "spec": {
            "small": {"model": "org/small", "costPerToken": 0.001},
            "medium": {"model": "org/medium", "costPerToken": 0.002},
        },
        "status": {
            "tiers": [
                {"tier": tier, "inferenceService": f"default-{tier}",
                 "url": f"http://default-{tier}.team-a", "ready": tier in ready}
                for tier in ("small", "medium")
            ]
        },
    }  # fmt: skip


PAIR = {
    "agents": [
        {"name": "planner", "role": "planner", "capacity": "small"},
        {"name": "solver", "role": "math_solver", "capacity": "medium", "depends_on": ["planner"]},
    ],
}


def test_an_inline_run_with_ready_tiers_is_planned_in_full() -> None:
    plan = plan_run(
        run_body({"spec": PAIR}, maxTokens=16, deadlineSeconds=60),
        source=None,
        profile_of={"default": profile()}.get,
    )
    assert isinstance(plan, Ready)
    order = plan.order
    assert order.run_id == "uid-1"
    assert order.source == "LemonRun team-a/r1 (inline spec)"
    assert order.tiers == (
        TierEndpoint(Capacity.SMALL, "http://default-small.team-a/openai/v1", "small"),
        TierEndpoint(Capacity.MEDIUM, "http://default-medium.team-a/openai/v1", "medium"),
    )
    assert parse_spec(order.spec or "").spec.agents[1].depends_on == ["planner"]
    assert (order.max_tokens, order.deadline_s, order.policy) == (16, 60.0, None)
    assert plan.prices == TierPrices(small=0.5, medium=1.0, large=0.0)
    assert plan.profile == "default"


@pytest.mark.parametrize(
    ("found", "reason"),
    [
        (None, "ProfileNotFound"),
        (profile(ready=("small",)), "TiersNotReady"),
        ({"spec": {"small": {"model": "bad model"}}}, "ProfileInvalid"),
    ],
)
def test_runs_wait_for_their_profile_and_tiers(found: dict[str, Any] | None, reason: str) -> None:
    plan = plan_run(run_body({"spec": PAIR}), source=None, profile_of=lambda _: found)
    assert isinstance(plan, Waiting)
    assert plan.reason == reason
    assert plan.tiers_ready is False
    if reason == "TiersNotReady":
        assert plan.message == "waiting for medium of profile default"


def test_a_tier_the_profile_does_not_serve_fails_the_run_and_is_never_waited_for() -> None:
    small_only = {"metadata": {"name": "default"}, "spec": {"small": {"model": "org/small"}}}
    plan = plan_run(run_body({"spec": PAIR}), source=None, profile_of=lambda _: small_only)
    assert isinstance(plan, Refused)
    assert plan.reason == "TierNotInProfile"
    assert "profile default has no medium tier" in plan.message
    # a policy may write any team: it gets the tiers the profile has, and the service fails
    # the agents on any other (tests/service/test_runs.py)
    served = profile()
    served["spec"].pop("medium")
    served["status"]["tiers"] = served["status"]["tiers"][:1]
    router = {"metadata": {"name": "router"},
              "status": {"ready": True, "url": "http://router", "servedVersion": "v1"}}  # fmt: skip
    ready = plan_run(run_body({"policyRef": {"name": "router"}}), source=router,
                     profile_of=lambda _: served)  # fmt: skip
    assert isinstance(ready, Ready)
    assert [t.tier for t in ready.order.tiers] == [Capacity.SMALL]


def test_an_invalid_inline_spec_is_refused_with_its_errors() -> None:
    cyclic = {
        "agents": [
            {"name": "a", "role": "planner", "capacity": "small", "depends_on": ["b"]},
            {"name": "b", "role": "planner", "capacity": "small", "depends_on": ["a"]},
        ],
        "output": "a",
    }
    plan = plan_run(run_body({"spec": cyclic}), source=None, profile_of=lambda _: profile())
    assert isinstance(plan, Refused)
    assert plan.reason == "SpecInvalid"
    assert "dependency cycle" in plan.message


def test_a_spec_ref_runs_that_spec_on_its_profile() -> None:
    body = run_body({"specRef": {"name": "team"}})
    assert referenced(body) == ("LemonSpec", "team")
    lemonspec = {"metadata": {"name": "team", "generation": 3},
                 "spec": {"profile": "gpu", **PAIR}}  # fmt: skip
    plan = plan_run(body, source=lemonspec, profile_of={"gpu": profile()}.get)
    assert isinstance(plan, Ready)
    assert plan.profile == "gpu"
    assert plan.order.source == "LemonSpec team-a/team (generation 3)"
    assert "kind: LemonSpec" in (plan.order.spec or "")
    missing = plan_run(body, source=None, profile_of={"gpu": profile()}.get)
    assert isinstance(missing, Waiting)
    assert missing.reason == "SpecNotFound"
    broken = {"metadata": {"name": "team"}, "spec": {"agents": [{**PAIR["agents"][0],
              "depends_on": ["ghost"]}]}}  # fmt: skip
    waiting = plan_run(body, source=broken, profile_of={"default": profile()}.get)
    assert isinstance(waiting, Waiting)
    assert waiting.reason == "SpecInvalid"
    assert "ghost" in waiting.message


def test_a_policy_ref_waits_for_the_served_version_then_uses_every_tier() -> None:
    body = run_body({"policyRef": {"name": "router"}})
    assert referenced(body) == ("LemonPolicy", "router")
    policy: dict[str, Any] = {"metadata": {"name": "router"}, "status": {"ready": False}}
    waiting = plan_run(body, source=policy, profile_of=lambda _: profile())
    assert isinstance(waiting, Waiting)
    assert waiting.reason == "PolicyNotReady"
    policy["status"] = {"ready": True, "url": "http://router-policy.team-a", "servedVersion": "v2"}
    plan = plan_run(body, source=policy, profile_of=lambda _: profile())
    assert isinstance(plan, Ready)
    assert plan.order.spec is None
    assert plan.order.policy is not None
    assert plan.order.policy.url == "http://router-policy.team-a/openai/v1"
    assert plan.order.policy.model == "router"
    assert plan.order.policy.name == "LemonPolicy team-a/router@v2"
    assert [endpoint.tier for endpoint in plan.order.tiers] == [Capacity.SMALL, Capacity.MEDIUM]


# ── statuses ──────────────────────────────────────────────────────────────────────────────


def a_run(phase: RunPhase = RunPhase.SUCCEEDED, **extra: Any) -> ServiceRun:
    agents = (
        agent("planner", "small", (100, 10), model="openai:x#small", latency_seconds=0.5),
        agent("solver", "medium", (200, 20), model="openai:y#medium", latency_seconds=1.5),
    )
    fields: dict[str, Any] = {
        "run_id": "uid-1",
        "phase": phase,
        "answer": "The answer is 8 dollars.",
        "spec": "agents: []\n",
        "spec_origin": "LemonSpec team-a/team (generation 1)",
        "agents": agents,
        "tokens": RunTokens(prompt=300, completion=30, total=330),
        "wall_s": 2.0,
        **extra,
    }
    return ServiceRun(**fields)


def test_a_succeeded_run_records_answer_agents_tokens_and_cost() -> None:
    running = running_status(
        run_id="uid-1", profile="default", target="svc:50051", generation=1, at=AT, previous={}
    )
    status = finished_status(
        a_run(),
        prices=TierPrices.as_given({"small": 0.001, "medium": 0.002}),
        trace="r1-trace",
        generation=1,
        at=AT,
        previous=running,
        profile="default",
        started=AT,
    )
    assert status["phase"] == "Succeeded"
    assert (status["runId"], status["profile"], status["startTime"]) == ("uid-1", "default", AT)
    assert status["answer"] == "The answer is 8 dollars."
    assert status["answerPreview"] == "The answer is 8 dollars."
    assert status["tokens"] == {"prompt": 300, "completion": 30, "total": 330}
    assert status["cost"] == pytest.approx(110 * 0.001 + 220 * 0.002)
    assert status["costUnit"] == "tier-priced tokens"
    assert [a["name"] for a in status["agents"]] == ["planner", "solver"]
    assert status["agents"][1] == {
        "name": "solver", "role": "", "tier": "medium", "model": "openai:y#medium",
        "status": "succeeded", "promptTokens": 200, "completionTokens": 20, "tokens": 220,
        "latencySeconds": 1.5, "attempts": 0,
    }  # fmt: skip
    assert status["trace"] == "r1-trace"
    assert status["completionTime"] == AT
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Succeeded"]["status"] == "True"
    assert conditions["Succeeded"]["observedGeneration"] == 1
    assert conditions["Submitted"]["status"] == "True"
    assert conditions["TiersReady"]["status"] == "True"


def test_a_run_that_finished_before_running_was_written_is_submitted() -> None:
    # Under load the service may finish a run before the operator records Running: the
    # finished status must not keep the Pending status's Submitted=False and TiersReady=False.
    pending = pending_status(reason="ServiceUnavailable", message="waiting for the service",
                             tiers_ready=False, generation=1, at=AT, previous={})  # fmt: skip
    later = "2027-01-01T00:00:00Z"
    status = finished_status(
        a_run(), prices=NO_PRICES, trace=None, generation=1, at=later, previous=pending
    )
    conditions = {c["type"]: c for c in status["conditions"]}
    assert {kind: c["status"] for kind, c in conditions.items()} == {
        "TiersReady": "True", "Submitted": "True", "Succeeded": "True",
    }  # fmt: skip
    assert conditions["Submitted"]["reason"] == "Accepted"
    assert conditions["Submitted"]["lastTransitionTime"] == later


def test_a_failed_run_names_the_failed_agent_and_keeps_no_answer() -> None:
    failed = a_run(
        RunPhase.FAILED,
        failure=FailureKind.AGENT_FAILED,
        answer="",
        error="agent solver (medium) failed after 4 attempt(s): connection refused",
        agents=(
            agent("planner", "small", (100, 10)),
            agent("solver", "medium", (0, 0), status="failed", error="connection refused"),
        ),
    )
    assert failure_of(failed) is not None
    status = finished_status(failed, prices=NO_PRICES, trace=None, generation=1, at=AT, previous={})
    LemonRunStatus.model_validate(status)  # what is written is the model's JSON
    assert status["phase"] == "Failed"
    assert "answer" not in status
    assert status["message"].startswith("agent solver (medium) failed")
    succeeded = {c["type"]: c for c in status["conditions"]}["Succeeded"]
    assert (succeeded["status"], succeeded["reason"]) == ("False", "AgentFailed")


def state(phase: int, failure: FailureKind | None = None, **fields: Any) -> pb.RunState:
    """What the service answers, its failure kind written by the service's own conversion."""
    return pb.RunState(run_id="uid-1", phase=phase, failure=failure_kind(failure), **fields)


@pytest.mark.parametrize(
    ("answer", "phase", "reason"),
    [
        (state(pb.RunState.SUCCEEDED), RunPhase.SUCCEEDED, None),
        (state(pb.RunState.QUEUED), RunPhase.RUNNING, None),
        (state(pb.RunState.RUNNING), RunPhase.RUNNING, None),
        (
            state(pb.RunState.CANCELLED, FailureKind.CANCELLED, error="cancelled by CancelRun"),
            RunPhase.FAILED,
            "Cancelled",
        ),
        (
            state(pb.RunState.FAILED, FailureKind.DEADLINE, error="run deadline of 5 s reached"),
            RunPhase.FAILED,
            "DeadlineExceeded",
        ),
        (
            state(pb.RunState.FAILED, FailureKind.TIER_UNAVAILABLE, error="agent a (large) failed"),
            RunPhase.FAILED,
            "TierUnavailable",
        ),
        (
            state(pb.RunState.FAILED, FailureKind.AGENT_FAILED, error="agent a (small) failed"),
            RunPhase.FAILED,
            "AgentFailed",
        ),
        (
            state(pb.RunState.FAILED, FailureKind.INVALID_SPEC, error="INVALID_ARGUMENT: spec"),
            RunPhase.FAILED,
            "SpecInvalid",
        ),
        (state(pb.RunState.FAILED, error="INTERNAL: boom"), RunPhase.FAILED, "ServiceError"),
        (state(pb.RunState.PHASE_UNSPECIFIED), RunPhase.FAILED, "ServiceError"),
    ],
)
def test_the_services_answer_is_read_as_its_phase_and_failure_kind(
    answer: pb.RunState, phase: RunPhase, reason: str | None
) -> None:
    run = service_run(answer)
    assert run.phase is phase
    assert run.finished == (phase is not RunPhase.RUNNING)
    failure = failure_of(run) if run.finished else None
    assert (failure.reason if failure else None) == reason
    if failure is not None and answer.error:
        assert failure.message == answer.error


def test_every_failure_kind_crosses_the_proto_and_has_a_reason() -> None:
    for kind in FailureKind:
        run = service_run(state(pb.RunState.FAILED, kind))
        assert run.failure is kind
        assert FAILURE_REASONS[kind]
    assert service_run(state(pb.RunState.SUCCEEDED)).failure is None


def test_the_services_result_becomes_the_runs_agents_and_typed_tokens() -> None:
    result = pb.RunResponse(
        answer="8",
        spec="agents: []\n",
        agents=[pb.AgentReport(name="solver", role="math_solver", capacity="medium",
                               model="openai:x#medium", status="succeeded", prompt_tokens=20,
                               completion_tokens=5, latency_s=0.123456, attempts=1)],
        tokens=pb.Tokens(prompt=20, completion=5, total=25),
        wall_s=0.5,
    )  # fmt: skip
    run = service_run(state(pb.RunState.SUCCEEDED, result=result, trace=["{}"]))
    assert run.tokens == RunTokens(prompt=20, completion=5, total=25)
    (solver,) = run.agents
    assert (solver.tier, solver.tokens, solver.latency_seconds) == ("medium", 25, 0.1235)
    assert (run.answer, run.trace) == ("8", ("{}",))


def test_pending_says_why_and_keeps_transition_times_while_it_holds() -> None:
    first = pending_status(reason="TiersNotReady", message="waiting for medium",
                           tiers_ready=False, generation=1, at=AT, previous={})  # fmt: skip
    assert first["phase"] == "Pending"
    conditions = {c["type"]: c for c in first["conditions"]}
    assert (conditions["TiersReady"]["status"], conditions["TiersReady"]["reason"]) == (
        "False", "TiersNotReady",
    )  # fmt: skip
    assert conditions["Succeeded"]["status"] == "Unknown"
    again = pending_status(reason="TiersNotReady", message="waiting for medium",
                           tiers_ready=False, generation=1, at="2027-01-01T00:00:00Z",
                           previous=first)  # fmt: skip
    assert again == first  # nothing to write
    refused = refused_status(reason="Rejected", message="no", generation=1, at=AT, previous=first)
    assert refused["phase"] == "Failed"
    assert {c["type"]: c["status"] for c in refused["conditions"]} == {
        "Submitted": "False", "Succeeded": "False",
    }  # fmt: skip


def test_trace_text_is_bounded() -> None:
    lines = [json.dumps({"event": "agent_finish", "output": "x" * 1000})] * 10
    assert trace_text(lines).count("\n") == 10
    huge = [json.dumps({"event": "e", "output": "x" * 1000})] * (MAX_TRACE_BYTES // 1000 + 10)
    assert isinstance(decode_event(json.loads(trace_text(huge))), TraceTruncated)


def test_the_service_bounds_a_trace_keeping_its_end() -> None:
    trace: list[Event] = [
        AgentFinished(agent=f"a{i}", status="succeeded", output="y" * 5000, t=i) for i in range(50)
    ]
    trace.append(RunFinished(status="succeeded", t=50.0))
    lines = bounded_trace(trace, max_bytes=20_000)
    assert sum(len(line.encode()) + 1 for line in lines) <= 20_000
    decoded = [decode_event(json.loads(line)) for line in lines]  # the one decoder reads it back
    assert isinstance(decoded[-1], RunFinished)
    note = decoded[-2]
    assert isinstance(note, TraceTruncated)
    assert (note.left_out, note.limit_bytes) == (51 - (len(lines) - 1), 20_000)
    assert all(len(json.loads(line).get("output", "")) < 2100 for line in lines)
    assert "events left out of this trace" in render_table(decoded)
    short = bounded_trace(trace[-3:], max_bytes=20_000)  # fits: outputs cut, nothing left out
    assert [type(decode_event(json.loads(line))) for line in short] == [
        AgentFinished, AgentFinished, RunFinished,
    ]  # fmt: skip


# ── manifests and settings ────────────────────────────────────────────────────────────────


def test_trace_config_map_and_spec_run_match_golden() -> None:
    built = {
        "trace": manifests.build_trace_config_map(
            "r1", namespace="team-a", uid="uid-1", text='{"event": "run_finish"}\n'
        ),
        "spec-run": manifests.build_spec_run(
            "team", namespace="team-a", uid="uid-2", generation=3, task="What is 2 + 3?",
            body={"task": "What is 2 + 3?", "profile": "gpu", **PAIR, "output": None},
            profile="gpu",
        ),
    }  # fmt: skip
    path = GOLDEN / "lemonrun-objects.yaml"
    text = yaml.safe_dump(built, sort_keys=False)
    if os.environ.get("LEMON_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{path.name} differs (LEMON_UPDATE_GOLDEN=1)"
    assert LemonRunSpec.model_validate(built["spec-run"]["spec"]).spec is not None


def test_service_settings_come_from_the_environment(tmp_path: Path) -> None:
    assert client_config({}) is None
    config = client_config({
        "LEMON_SERVICE_TARGET": "lemon-service.lemon.svc:50051",
        "LEMON_SERVICE_TOKEN_FILE": str(tmp_path / "token"),
        "LEMON_SERVICE_TLS_CA": "/etc/ca.crt",
    })  # fmt: skip
    assert config is not None
    assert config.target == "lemon-service.lemon.svc:50051"
    assert config.tls_ca == Path("/etc/ca.crt")
    (tmp_path / "token").write_text("s3cret\n")
    assert config.metadata() == (("authorization", "Bearer s3cret"),)
    (tmp_path / "token").write_text("rotated\n")  # read at each call: a rotated Secret
    assert config.metadata() == (("authorization", "Bearer rotated"),)


def builtin_policy_body(name: str, *, default: bool = False) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}"},
        "spec": {
            "versions": [{"name": "fixed", "checkpoint": "lemon://best-fixed-team"}],
            "servedVersion": "fixed",
            "default": default,
        },
        "status": {"servedVersion": "fixed", "ready": True},
    }


def test_a_task_only_run_takes_the_namespaces_default_else_the_services() -> None:
    profiles = {"default": profile(ready=("small", "medium"))}.get
    chosen = default_policy(
        [builtin_policy_body("other"), builtin_policy_body("lemon-default", default=True)]
    )
    assert isinstance(chosen, dict)
    plan = plan_run(run_body({}), source=None, profile_of=profiles, default=chosen)
    assert isinstance(plan, Ready)
    policy = plan.order.policy
    assert policy is not None
    assert (policy.builtin, policy.default) == ("best-fixed-team", True)
    assert policy.name == "default LemonPolicy team-a/lemon-default@fixed"
    request = run_request(plan.order, wait_s=0)
    assert request.WhichOneof("spec_source") == "builtin_policy"
    assert request.builtin_policy.policy == "best-fixed-team"
    assert request.default_policy
    # no default in the namespace: neither spec nor policy; the service's default writes it
    bare = plan_run(run_body({}), source=None, profile_of=profiles, default=None)
    assert isinstance(bare, Ready)
    assert (bare.order.spec, bare.order.policy) == (None, None)
    assert run_request(bare.order, wait_s=0).WhichOneof("spec_source") is None
    assert task_only(run_body({}))
    assert not task_only(run_body({"policyRef": {"name": "x"}}))


def test_two_default_policies_wait_named() -> None:
    both = default_policy(
        [builtin_policy_body("a", default=True), builtin_policy_body("b", default=True)]
    )
    assert isinstance(both, Waiting)
    assert both.reason == "DefaultPolicyAmbiguous"
    assert "a, b" in both.message


def test_a_run_naming_a_missing_policy_waits_saying_which() -> None:
    plan = plan_run(run_body({"policyRef": {"name": "ghost"}}), source=None, profile_of={}.get)
    assert isinstance(plan, Waiting)
    assert plan.reason == "PolicyNotFound"
    assert (
        plan.message
        == "policyRef names LemonPolicy ghost, and team-a has none; the run waits for it"
    )
