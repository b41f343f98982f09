"""The executor on the scripted backend (a labelled test double of a model)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from lemon.backends.base import Decoding
from lemon.backends.scripted import ScriptedBackend, ScriptedConfig, ScriptedRule
from lemon.cli.rendering import render_table, render_timeline
from lemon.engine import AgentStatus, CallCache, ExecutionOptions, RunStatus, execute
from lemon.events import (
    AgentFinished,
    AgentStarted,
    RunFinished,
    TraceWriter,
    read_trace,
)
from lemon.spec import Capacity, MutationKind, mutations, parse_spec
from tests.conftest import run_lemon

DIAMOND = """\
agents:
  - {name: plan, role: planner, capacity: small}
  - {name: left, role: math_solver, capacity: medium, depends_on: [plan]}
  - {name: right, role: critic, capacity: large, depends_on: [plan]}
  - {name: judge, role: aggregator, capacity: large, depends_on: [left, right]}
"""

FAST = ExecutionOptions(backoff_s=0.01, backoff_max_s=0.02, deadline_s=30)


def backends(*rules: ScriptedRule, latency: float = 0.0) -> dict[Capacity, ScriptedBackend]:
    config = ScriptedConfig(latency_s=latency, rules=(*rules, ScriptedRule()))
    return {tier: ScriptedBackend(config, tier=tier.value) for tier in Capacity}


def run(text: str, tiers: dict[Capacity, ScriptedBackend], **kwargs: object):  # type: ignore[no-untyped-def]
    parsed = parse_spec(text)
    kwargs.setdefault("options", FAST)
    return asyncio.run(
        execute(parsed.spec, task="What is 6 * 7?", backends=tiers, output=parsed.output, **kwargs)  # type: ignore[arg-type]
    )


def test_diamond_runs_levels_in_parallel() -> None:
    trace = TraceWriter()
    result = run(DIAMOND, backends(latency=0.05), trace=trace)
    assert result.status is RunStatus.SUCCEEDED
    assert result.answer == "The answer is 42."
    order = [e for e in trace.events if isinstance(e, AgentStarted | AgentFinished)]
    starts = {e.agent: i for i, e in enumerate(order) if isinstance(e, AgentStarted)}
    ends = {e.agent: i for i, e in enumerate(order) if isinstance(e, AgentFinished)}
    # left and right both start before either finishes: they ran concurrently
    assert max(starts["left"], starts["right"]) < min(ends["left"], ends["right"])
    # every agent starts only after all of its dependencies finished
    assert ends["plan"] < starts["left"]
    assert max(ends["left"], ends["right"]) < starts["judge"]
    assert result.critical_path == ("plan", "left", "judge")
    assert [a.status for a in result.agents] == [AgentStatus.SUCCEEDED] * 4


def test_prompt_names_inputs_by_agent_and_role() -> None:
    rule = ScriptedRule(
        match=r"(?s)--- left \(math_solver\) ---\nLEFT-OUT.*--- right \(critic\) ---\nRIGHT-OUT",
        output="joined",
    )
    tiers = backends(
        rule,
        ScriptedRule(match="You are a careful mathematician", output="LEFT-OUT"),
        ScriptedRule(match="You are a critic", output="RIGHT-OUT"),
    )
    result = run(DIAMOND, tiers)
    assert result.answer == "joined"


def test_permanent_failure_skips_dependants_and_fails_the_run() -> None:
    tiers = backends(ScriptedRule(match="You are a critic", fail="permanent"))
    trace = TraceWriter()
    result = run(DIAMOND, tiers, trace=trace)
    by_name = {a.name: a for a in result.agents}
    assert by_name["right"].status is AgentStatus.FAILED
    assert "400" in (by_name["right"].error or "")
    assert by_name["right"].attempts == 1
    assert by_name["left"].status is AgentStatus.SUCCEEDED
    assert by_name["judge"].status is AgentStatus.SKIPPED
    assert by_name["judge"].error == "dependency 'right' did not succeed"
    assert result.status is RunStatus.FAILED
    assert result.answer is None
    assert "output agent 'judge' skipped" in (result.error or "")
    assert isinstance(trace.events[-1], RunFinished)


def test_transient_errors_are_retried_with_backoff() -> None:
    tiers = backends(ScriptedRule(match="You are a planner", fail="transient", fail_times=2))
    result = run(DIAMOND, tiers)
    plan = result.agents[0]
    assert plan.status is AgentStatus.SUCCEEDED
    assert plan.attempts == 3
    assert result.status is RunStatus.SUCCEEDED


def test_retries_are_bounded() -> None:
    tiers = backends(ScriptedRule(match="You are a planner", fail="transient"))
    options = ExecutionOptions(max_attempts=3, backoff_s=0.001, backoff_max_s=0.002)
    result = run(DIAMOND, tiers, options=options)
    assert result.agents[0].attempts == 3
    assert result.agents[0].status is AgentStatus.FAILED
    assert "503" in (result.agents[0].error or "")


def test_deadline_ends_a_hanging_run_with_a_complete_trace(tmp_path: Path) -> None:
    tiers = backends(ScriptedRule(match="You are a critic", fail="hang"))
    path = tmp_path / "trace.jsonl"
    trace = TraceWriter(path)
    options = ExecutionOptions(deadline_s=0.3)
    result = run(DIAMOND, tiers, options=options, trace=trace)
    trace.close()
    assert result.status is RunStatus.FAILED
    assert result.error == "run deadline of 0.3 s reached"
    by_name = {a.name: a for a in result.agents}
    assert by_name["right"].status is AgentStatus.FAILED
    assert by_name["judge"].status is AgentStatus.SKIPPED
    events = read_trace(path)
    finished = {e.agent for e in events if isinstance(e, AgentFinished)}
    assert finished == {"plan", "left", "right", "judge"}
    assert isinstance(events[-1], RunFinished)


def test_empty_output_is_a_failure() -> None:
    tiers = backends(ScriptedRule(match="You are a planner", output="   "))
    result = run(DIAMOND, tiers)
    assert result.agents[0].status is AgentStatus.FAILED
    assert result.agents[0].error == "empty output from the model"


def test_per_tier_concurrency_is_bounded() -> None:
    text = (
        "agents:\n"
        + "".join(f"  - {{name: a{i}, role: planner, capacity: small}}\n" for i in range(3))
        + "  - {name: z, role: aggregator, capacity: large, depends_on: [a0, a1, a2]}\n"
    )
    trace = TraceWriter()
    options = ExecutionOptions(concurrency={Capacity.SMALL: 1})
    run(text, backends(latency=0.02), options=options, trace=trace)
    running = peak = 0
    for event in trace.events:
        if isinstance(event, AgentStarted) and event.agent.startswith("a"):
            running += 1
            peak = max(peak, running)
        elif isinstance(event, AgentFinished) and event.agent.startswith("a"):
            running -= 1
    assert peak == 1


def test_counterfactual_reuse_reruns_only_what_changed() -> None:
    tiers = backends(ScriptedRule(output="answer {digest}"))
    parsed = parse_spec(DIAMOND)
    cache = CallCache()
    original = asyncio.run(
        execute(parsed.spec, task="t", backends=tiers, output=parsed.output, cache=cache)
    )
    assert original.reused_calls == 0
    (drop,) = [
        m
        for m in mutations(parsed)
        if m.kind is MutationKind.DROP_DEPENDENCY and m.agent == "judge" and m.target == "right"
    ]
    with_reuse = asyncio.run(
        execute(drop.spec, task="t", backends=tiers, output=drop.spec.output, cache=cache)
    )
    fresh = asyncio.run(execute(drop.spec, task="t", backends=tiers, output=drop.spec.output))
    assert with_reuse.answer == fresh.answer
    assert with_reuse.reused_calls == 3  # plan, left, right unchanged; judge's inputs changed
    assert [a.reused for a in with_reuse.agents] == [True, True, True, False]
    assert with_reuse.calls == 1
    assert with_reuse.tokens() == fresh.tokens()  # a mutant's cost does not depend on the cache


def test_downgrade_misses_the_cache_for_that_agent_only() -> None:
    tiers = backends(ScriptedRule(output="answer {digest} from {model}"))
    parsed = parse_spec(DIAMOND)
    cache = CallCache()
    asyncio.run(execute(parsed.spec, task="t", backends=tiers, output=parsed.output, cache=cache))
    down = next(
        m
        for m in mutations(parsed)
        if m.kind is MutationKind.DOWNGRADE_CAPACITY and m.agent == "right"
    )
    result = asyncio.run(
        execute(down.spec, task="t", backends=tiers, output=down.spec.output, cache=cache)
    )
    assert [a.reused for a in result.agents] == [True, True, False, False]


def test_result_json_keys() -> None:
    result = run(DIAMOND, backends())
    data = result.to_json()
    assert {"answer", "spec", "agents", "tokens", "wall_s", "status"} <= set(data)
    assert set(data["tokens"]) == {"prompt", "completion", "total"}
    assert data["tokens"]["total"] == data["tokens"]["prompt"] + data["tokens"]["completion"]
    for agent in data["agents"]:
        assert {
            "name",
            "capacity",
            "prompt_tokens",
            "completion_tokens",
            "latency_s",
            "status",
            "output",
        } <= set(agent)
    assert parse_spec(data["spec"]).output == "judge"


def test_greedy_decoding_is_the_default() -> None:
    assert Decoding().temperature == 0.0


def test_trace_rendering_and_torn_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    trace = TraceWriter(path)
    run(DIAMOND, backends(ScriptedRule(match="You are a critic", fail="permanent")), trace=trace)
    trace.close()
    with path.open("a") as f:
        f.write('{"event": "agent_sta')  # a writer killed mid-line
    events = read_trace(path)
    table = render_table(events)
    for word in ("right", "failed", "skipped"):
        assert word in table
    assert "run failed" in table
    timeline = render_timeline(events)
    assert timeline.count("|") >= 8
    cli = run_lemon("trace", str(path))
    assert cli.returncode == 0
    assert "judge" in cli.stdout
    assert run_lemon("trace", str(path), "--timeline").returncode == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n{}\n")
    broken = run_lemon("trace", str(bad))
    assert broken.returncode == 1
    assert f"{bad}:1:" in broken.stderr


def test_lemon_run_cli_on_the_scripted_profile(tmp_path: Path) -> None:
    trace = tmp_path / "run.jsonl"
    result = run_lemon("run", "--profile", "scripted", "--json", "--trace", str(trace))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["status"] == "succeeded"
    assert "scripted test double" in data["profile_note"]
    # the whole run is traced: its spec, each agent's start and end, the run's end and verdict
    kinds = [type(event).__name__ for event in read_trace(trace)]
    agents = len(data["agents"])
    assert kinds[:2] == ["SpecReady", "RunStarted"]
    assert kinds[-2:] == ["RunFinished", "RunScored"]
    assert (kinds.count("AgentStarted"), kinds.count("AgentFinished")) == (agents, agents)
    # the default: the best fixed team of the task's kind (fixed_teams.json), saying so
    assert data["spec_origin"].startswith("best fixed team for math tasks: ")
    question = "Which is a prime? (A) 4 (B) 6 (C) 7 (D) 9"
    default = run_lemon("run", "--profile", "scripted", "--task", question)
    assert default.returncode == 0
    assert "spec from best fixed team for multiple_choice tasks" in default.stderr
    # the chosen team and its cost beside one large agent's, as read from fixed_teams.json
    from lemon.policy.fixed import best_teams

    choice = best_teams()["multiple_choice"]
    cost = next(line for line in default.stderr.splitlines() if line.startswith("cost: "))
    assert f"one large agent averages {choice['large_cost']:.0f} on {choice['benchmark']}" in cost
    assert "; team: " in cost
    assert "cost: " in default.stderr
    text = run_lemon("run", "--profile", "scripted", "--task", question, "--baseline", "template")
    assert text.returncode == 0
    assert "template policy (multiple_choice)" in text.stderr
    assert "judge" in text.stderr


def test_lemon_run_cli_errors(tmp_path: Path) -> None:
    assert run_lemon("run", "--profile", "nope").returncode == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("agents: []\n")
    result = run_lemon("run", "--profile", "scripted", "--spec", str(bad))
    assert result.returncode == 1
    assert f"{bad}:1:9:" in result.stderr


@pytest.mark.parametrize("kind", ["math", "multiple_choice", "code", "general"])
def test_template_policy_specs_are_valid(kind: str) -> None:
    from lemon.policy.template import template_spec
    from lemon.tasks import TaskKind

    _, spec, text = template_spec("x", kind=TaskKind(kind))
    assert parse_spec(text).spec == spec


CHAIN = """\
agents:
  - {name: plan, role: planner, capacity: small}
  - {name: solve, role: math_solver, capacity: medium, depends_on: [plan]}
  - {name: check, role: critic, capacity: large, depends_on: [solve]}
"""


def _outcome(result, trace: TraceWriter) -> tuple[object, ...]:  # type: ignore[no-untyped-def]
    """What a run did, without its timings: statuses, failures, errors and the event sequence."""
    agents = tuple((a.name, a.status, a.failure, a.error) for a in result.agents)
    kinds = tuple((e.kind, getattr(e, "agent", "")) for e in trace.events)
    return result.status, result.failure, result.error, agents, kinds


def _chain_run(
    monkeypatch: pytest.MonkeyPatch, rules: tuple[ScriptedRule, ...], options: ExecutionOptions
) -> tuple[tuple[object, ...], tuple[object, ...]]:
    """CHAIN's outcome on the chain path and, forced, on the task path (one task per agent)."""
    import lemon.engine.executor as executor

    outcomes = []
    for chain in (True, False):
        calls: list[int] = []
        real = executor._run_chain

        async def spy(*args, _real=real, _calls=calls, **kwargs):  # type: ignore[no-untyped-def]
            _calls.append(1)
            return await _real(*args, **kwargs)

        monkeypatch.setattr(executor, "_run_chain", spy)
        if not chain:  # levels the chain check never takes for a chain: the task path runs it
            monkeypatch.setattr(executor, "compile_spec", _levels_padded(executor.compile_spec))
        trace = TraceWriter()
        result = run(CHAIN, backends(*rules), trace=trace, options=options)
        monkeypatch.undo()
        assert calls == ([1] if chain else [])
        outcomes.append(_outcome(result, trace))
    return outcomes[0], outcomes[1]


def test_a_chain_runs_in_the_callers_task_with_the_same_outcome_as_tasks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A DAG with one agent per level runs agent after agent in the calling task; it must end
    exactly as one task per agent does: on success, and cut by the deadline mid-chain (the
    hanging agent failed, the one after it skipped, every agent finished in the trace)."""
    chained, tasked = _chain_run(monkeypatch, (), FAST)
    assert chained == tasked
    assert chained[0] is RunStatus.SUCCEEDED
    hang = ScriptedRule(match="You are a careful mathematician", fail="hang")
    chained, tasked = _chain_run(monkeypatch, (hang,), ExecutionOptions(deadline_s=0.3))
    assert chained == tasked
    _, _, error, agents, kinds = chained
    assert error == "run deadline of 0.3 s reached"
    statuses = [agent[1] for agent in agents]
    assert statuses == [AgentStatus.SUCCEEDED, AgentStatus.FAILED, AgentStatus.SKIPPED]
    assert [k for k in kinds if k[0] == "agent_finish"] == [
        ("agent_finish", "plan"),
        ("agent_finish", "solve"),
        ("agent_finish", "check"),
    ]


def _levels_padded(compile_spec):  # type: ignore[no-untyped-def]
    """compile_spec whose levels hold an empty name beside each agent: not a chain to the
    executor's check, the same DAG otherwise (the task path runs it)."""
    import dataclasses

    def padded(*args, **kwargs):  # type: ignore[no-untyped-def]
        dag = compile_spec(*args, **kwargs)
        return dataclasses.replace(dag, levels=tuple((*level, "") for level in dag.levels))

    return padded


def test_cancelling_a_chain_ends_every_agent_in_the_trace() -> None:
    """A run cancelled from outside (a client gone) mid-chain: the running agent failed, the
    rest skipped, each with its agent_finish event, and the cancellation reaches the caller."""
    tiers = backends(ScriptedRule(match="You are a careful mathematician", fail="hang"))
    parsed = parse_spec(CHAIN)
    trace = TraceWriter()

    async def main() -> None:
        task = asyncio.ensure_future(
            execute(parsed.spec, task="What is 6 * 7?", backends=tiers, trace=trace, options=FAST)
        )
        while not any(isinstance(e, AgentStarted) and e.agent == "solve" for e in trace.events):
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    finished = {e.agent: e.status for e in trace.events if isinstance(e, AgentFinished)}
    assert finished == {"plan": "succeeded", "solve": "failed", "check": "skipped"}
