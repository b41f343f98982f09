"""``lemon run``: one task end to end. The default policy writes the team (the best fixed team
for the task's kind, read from the project's outcome tables: :mod:`lemon.policy.fixed`), or
``--policy``, ``--baseline template``, or ``--spec``; the agents run on the profile's tiers and
the answer is printed with the team, its cost beside one large agent's, and, without
``--task``, the verdict on the sample GSM8K item."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from lemon.budget import WORKER_MAX_TOKENS
from lemon.cli.options import (
    EXIT_INVALID,
    EXIT_OK,
    SAMPLE_ID,
    UsageError,
    add_json_option,
    add_policy_options,
    add_profile_options,
    add_roles_option,
    open_policy,
    resolve_profile_option,
    sample_item,
)
from lemon.events import (
    AgentFinished,
    AgentRetrying,
    AgentStarted,
    Event,
    PolicyAttempted,
    RunScored,
    SpecReady,
)
from lemon.policy.template import TemplateVariant

__all__ = ["register", "run"]


def _sample_verdict(item: Any, answer: str | None) -> dict[str, Any]:
    from lemon.scoring import score_item

    score = score_item(item, answer or "")
    return {
        "id": item.id,
        "source": "GSM8K train split (shipped with lemon)",
        "expected": item.answer_text,
        "extracted": score.extracted,
        "correct": score.correct,
    }


def _printer(event: Event) -> None:
    line = None
    if isinstance(event, SpecReady):
        line = f"spec from {event.origin}"
    elif isinstance(event, PolicyAttempted):
        verdict = "valid spec" if event.valid else "; ".join(event.errors[:3])
        line = f"  policy attempt {event.attempt}: {verdict}"
    elif isinstance(event, AgentStarted):
        reused = " (reused)" if event.reused else ""
        line = f"  started  {event.agent} ({event.role}, {event.capacity}){reused}"
    elif isinstance(event, AgentRetrying):
        line = f"  retrying {event.agent}: {event.error}"
    elif isinstance(event, AgentFinished):
        tokens = event.prompt_tokens + event.completion_tokens
        detail = f": {event.error}" if event.error else ""
        line = (
            f"  {event.status:<9} {event.agent} ({tokens} tokens, {event.latency_s:.2f} s){detail}"
        )
    if line is not None:
        print(line, file=sys.stderr)


def _policy(args: argparse.Namespace, parsed: Any) -> Any:
    """The policy writing the spec, by the one resolution order
    (:func:`lemon.policy.defaults.resolve_policy`): ``--policy``, the template (``--baseline
    template``), else LEMON's built-in default (None: ``--spec`` gives the spec)."""
    from lemon.policy.defaults import resolve_policy

    if args.policy is not None:
        return open_policy(args)
    if parsed is not None:
        return None
    if args.baseline == "template" or args.template != TemplateVariant.DEFAULT.value:
        from lemon.policy.inference import TemplatePolicy

        return TemplatePolicy(TemplateVariant(args.template))
    return resolve_policy()


def _cost_line(result: Any, policy: Any, task: str) -> str | None:
    """The run's tier-priced cost beside one large agent's on the same kind of task."""
    from lemon.policy.fixed import BestTeamPolicy, best_teams
    from lemon.pricing import COST_UNIT
    from lemon.tasks import classify_task

    kind = classify_task(task)
    large = best_teams().get(kind.value, {}).get("large_cost")
    line = f"cost: {result.priced_tokens:.0f} {COST_UNIT}"
    if large:
        choice = best_teams()[kind.value]
        line += (
            f"; one large agent averages {large:.0f} on {choice['benchmark']} ({choice['source']})"
        )
    team = getattr(policy, "policy", policy)  # the default policy wraps the fixed team's
    if isinstance(team, BestTeamPolicy):
        line += "; team: " + ", ".join(
            f"{a.name} ({a.role}, {a.capacity.value})" for a in team.spec(kind).agents
        )
    return line


def run(args: argparse.Namespace) -> int:
    from lemon.backends.base import Decoding
    from lemon.engine.executor import ExecutionOptions
    from lemon.events import TraceWriter
    from lemon.orchestration import run_task
    from lemon.spec.issues import SpecError
    from lemon.spec.roles import default_roles
    from lemon.spec.validation import ValidationOptions, load_spec

    profile = resolve_profile_option(args)
    roles = default_roles(args.roles)
    parsed = None
    if args.spec is not None:
        try:
            parsed = load_spec(args.spec, options=ValidationOptions(roles=roles))
        except OSError as exc:
            raise UsageError(f"cannot read {args.spec}: {exc.strerror or exc}") from None
        except SpecError as exc:
            print(exc.render(), file=sys.stderr)
            return EXIT_INVALID
    if args.max_tokens < 1 or args.deadline <= 0:
        raise UsageError("--max-tokens and --deadline must be positive")
    options = ExecutionOptions(
        decoding=Decoding(max_tokens=args.max_tokens, seed=args.seed),
        deadline_s=args.deadline,
        budget=_budget(args),
    )
    if args.policy is not None and parsed is not None:
        raise UsageError("give --spec or --policy, not both")
    if args.policy_constrained and args.policy is None:
        raise UsageError("--policy-constrained needs --policy")
    if args.baseline is not None and (args.policy is not None or parsed is not None):
        raise UsageError("give one of --baseline, --policy, --spec")
    policy = _policy(args, parsed)
    sample = sample_item() if args.task is None else None
    task = sample.question if sample is not None else args.task
    if sample is not None and not args.json:
        print(f"task {sample.id} (no --task given; GSM8K train split): {task}", file=sys.stderr)
    trace = TraceWriter(args.trace, on_event=None if args.json else _printer)

    async def go() -> Any:
        try:
            return await run_task(
                task,
                template_variant=TemplateVariant(args.template),
                profile=profile,
                parsed=parsed,
                roles=roles,
                options=options,
                trace=trace,
                policy=policy,
                budget_fallback=args.budget_fallback,
            )
        finally:
            if policy is not None:
                await policy.aclose()

    from lemon.budget import BudgetRefused

    try:
        result = asyncio.run(go())
        verdict = _sample_verdict(sample, result.answer) if sample is not None else None
        if verdict is not None:
            extracted = verdict["extracted"]
            trace.emit(
                RunScored(
                    item=verdict["id"],
                    expected=str(verdict["expected"]),
                    extracted="" if extracted is None else f"{extracted:g}",
                    correct=bool(verdict["correct"]),
                )
            )
    except BudgetRefused as refused:  # before any agent ran
        _refused(args, refused)
        return EXIT_INVALID
    finally:
        trace.close()
    _show(args, result, verdict=verdict, events=trace.events, policy=policy, task=task)
    return EXIT_OK if result.status == "succeeded" else EXIT_INVALID


def _show(
    args: argparse.Namespace,
    result: Any,
    *,
    verdict: dict[str, Any] | None,
    events: Any,
    policy: Any,
    task: str,
) -> None:
    """The run as JSON (``--json``), or the agents' table, the answer, the cost and the verdict."""
    from lemon.cli.rendering import render_table

    if args.json:
        payload = result.to_json()
        if verdict is not None:
            payload["sample"] = verdict
        print(json.dumps(payload, ensure_ascii=False))
        return
    print(result.profile_note, file=sys.stderr)
    print(render_table(events), file=sys.stderr)
    print(result.answer if result.answer is not None else f"FAILED: {result.error}")
    # the team that ran: not the policy's when the budget replaced its spec
    replaced = result.budget is not None and result.budget.replaced is not None
    cost = _cost_line(result, None if replaced else policy, task)
    if cost:
        print(cost, file=sys.stderr)
    if result.budget is not None:
        print(_budget_line(result.budget), file=sys.stderr)
    if verdict is not None:
        read = "no number" if verdict["extracted"] is None else f"{verdict['extracted']:g}"
        mark = "correct" if verdict["correct"] else "wrong"
        print(f"{verdict['id']}: expected {verdict['expected']}, the team answered {read}: {mark}")


def _budget(args: argparse.Namespace) -> Any:
    """``--budget`` as a :class:`lemon.budget.Budget` (None without one); a usage error that
    names the field when it does not parse."""
    from lemon.budget import BudgetError, parse_budget

    if args.budget is None:
        if args.budget_fallback:
            raise UsageError("--budget-fallback needs --budget")
        return None
    try:
        return parse_budget(args.budget, source="--budget")
    except BudgetError as exc:
        raise UsageError(str(exc)) from None


def _refused(args: argparse.Namespace, refused: Any) -> None:
    """A run the budget refused before it started: the reason (naming the budget) on stderr,
    and with ``--json`` the refusal as one object on stdout."""
    print(f"lemon run: refused: {refused.reason}", file=sys.stderr)
    if args.json:
        print(json.dumps(refused.to_json(), ensure_ascii=False))


def _budget_line(use: Any) -> str:
    """The budget, what the run spent against it, the estimate and why it stopped, in words
    with units."""
    line = f"budget {use.budget.text()} ({use.budget.describe()}): spent {use.tokens} worker "
    line += f"tokens, {use.cost:.1f} tier-priced tokens, {use.wall_s:.1f} s"
    if use.estimate is not None:
        line += (
            f"; estimated before the run at {use.estimate.tokens:.0f} worker tokens, "
            f"{use.estimate.cost:.0f} tier-priced tokens ({use.estimate.basis})"
        )
    if use.replaced is not None:
        line += f"; the spec asked for was replaced: {use.replaced}"
    if use.reason is not None:
        line += f"; stopped by the budget: {use.reason}"
    return line


def register(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="run a task end to end (spec, agents, answer)",
        description="Run a task: the default policy (the best fixed team for the task's kind, "
        "from the project's outcome tables; or --policy, --baseline template, --spec) writes "
        "the team, the agents run on the profile's tiers, the answer is printed.",
    )
    p.add_argument(
        "--task",
        default=None,
        help=f"the task text (default: the benchmark item {SAMPLE_ID}, scored against its answer)",
    )
    p.add_argument("--spec", metavar="PATH", help="run this spec instead of the policy's")
    p.add_argument(
        "--baseline",
        choices=["template"],
        default=None,
        help="template: the template policy's team (planner small -> solver medium -> verifier "
        "large) instead of the default, the best fixed team for the task's kind",
    )
    add_policy_options(p)
    p.add_argument(
        "--template",
        choices=[variant.value for variant in TemplateVariant],
        default=TemplateVariant.DEFAULT.value,
        help="template policy variant (implies --baseline template); compute: maths teams with "
        "a python_executor",
    )
    add_profile_options(p)
    add_roles_option(p)
    add_json_option(p)
    p.add_argument("--trace", metavar="PATH", help="append the run's events (JSONL) to PATH")
    p.add_argument(
        "--max-tokens",
        type=int,
        default=WORKER_MAX_TOKENS,
        help=f"per agent (default {WORKER_MAX_TOKENS}, as the outcome tables measured the teams)",
    )
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--deadline", type=float, default=900.0, help="seconds for the whole run")
    p.add_argument(
        "--budget",
        metavar="LIMITS",
        default=None,
        help="limits on the run, any of tokens=N (worker tokens, prompt + completion), cost=N "
        "(tier-priced tokens: a medium-tier token costs 1) and wall=T (60s, 2m), e.g. "
        "tokens=2000,cost=800,wall=60s; a spec whose estimate exceeds it is refused (exit 1), "
        "and the run is held to it (docs/budgets.md)",
    )
    p.add_argument(
        "--budget-fallback",
        action="store_true",
        help="when the spec's estimate exceeds --budget, run the best fixed team whose "
        "measured cost fits it instead of refusing (spec_origin says so)",
    )
    p.set_defaults(handler=run)
