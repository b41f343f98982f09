"""``lemon run``, ``lemon trace`` and ``lemon serve-model``."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import replace
from typing import Any

from lemon.backends.local import DTYPES
from lemon.cli import EXIT_INVALID, EXIT_OK, UsageError

__all__ = ["SAMPLE_ID", "add_policy_options", "open_policy", "register", "sample_item"]

SAMPLE_ID = "gsm8k-train:0"
"""The task ``lemon run`` solves when given none: GSM8K's first training item, read from the
shipped data so the id, text and expected answer all come from the benchmark file."""


def sample_item() -> Any:
    from lemon.data import Benchmark, DataError, Source, load_items

    try:
        items = load_items(Benchmark.GSM8K, source=Source.TRAIN)
    except DataError as exc:
        raise UsageError(f"no --task given and the sample task cannot be read: {exc}") from None
    (item,) = (item for item in items if item.id == SAMPLE_ID)
    return item


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


def _printer(event: dict[str, Any]) -> None:
    kind = event["event"]
    if kind == "spec_ready":
        print(f"spec from {event['origin']}", file=sys.stderr)
    elif kind == "policy_attempt":
        verdict = "valid spec" if event["valid"] else "; ".join(event["errors"][:3])
        print(f"  policy attempt {event['attempt']}: {verdict}", file=sys.stderr)
    elif kind == "agent_start":
        reused = " (reused)" if event.get("reused") else ""
        print(
            f"  started  {event['agent']} ({event['role']}, {event['capacity']}){reused}",
            file=sys.stderr,
        )
    elif kind == "agent_retry":
        print(f"  retrying {event['agent']}: {event['error']}", file=sys.stderr)
    elif kind == "agent_finish":
        tokens = event["prompt_tokens"] + event["completion_tokens"]
        detail = f": {event['error']}" if event.get("error") else ""
        print(
            f"  {event['status']:<9} {event['agent']} ({tokens} tokens, "
            f"{event['latency_s']:.2f} s){detail}",
            file=sys.stderr,
        )


def cmd_run(args: argparse.Namespace) -> int:
    from lemon.backends.base import Decoding
    from lemon.engine.executor import ExecutionOptions
    from lemon.engine.runner import run_task
    from lemon.engine.trace import TraceWriter, render_table
    from lemon.profiles import resolve_profile
    from lemon.spec.errors import SpecError
    from lemon.spec.roles import default_roles
    from lemon.spec.validation import ValidationOptions, load_spec

    try:
        profile = resolve_profile(args.profile, files=args.profiles)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from None
    except OSError as exc:
        raise UsageError(f"cannot read profile file: {exc}") from None
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
    )
    if args.policy is not None and parsed is not None:
        raise UsageError("give --spec or --policy, not both")
    policy = open_policy(args) if args.policy is not None else None
    sample = sample_item() if args.task is None else None
    task = sample.question if sample is not None else args.task
    if sample is not None and not args.json:
        print(f"task {sample.id} (no --task given; GSM8K train split): {task}", file=sys.stderr)
    trace = TraceWriter(args.trace, on_event=None if args.json else _printer)

    async def go() -> Any:
        try:
            return await run_task(
                task,
                template_variant=args.template,
                profile=profile,
                parsed=parsed,
                roles=roles,
                options=options,
                trace=trace,
                policy=policy,
            )
        finally:
            if policy is not None:
                await policy.aclose()

    try:
        result = asyncio.run(go())
    finally:
        trace.close()
    verdict = _sample_verdict(sample, result.answer) if sample is not None else None
    if args.json:
        payload = result.to_json()
        if verdict is not None:
            payload["sample"] = verdict
        print(json.dumps(payload, ensure_ascii=False))
    else:
        print(result.profile_note, file=sys.stderr)
        print(render_table(trace.events), file=sys.stderr)
        print(result.answer if result.answer is not None else f"FAILED: {result.error}")
        if verdict is not None:
            read = "no number" if verdict["extracted"] is None else f"{verdict['extracted']:g}"
            mark = "correct" if verdict["correct"] else "wrong"
            print(
                f"{verdict['id']}: expected {verdict['expected']}, the team answered {read}: {mark}"
            )
    return EXIT_OK if result.status == "succeeded" else EXIT_INVALID


DEFAULT_POLICY_TOKENS = 384


def open_policy(args: argparse.Namespace) -> Any:
    """The learned policy named by ``--policy`` (a version directory or an endpoint URL)."""
    from lemon.policy.inference import DEFAULT_DECODING, load_policy
    from lemon.policy.version import PolicyVersionError

    if args.policy_attempts < 1 or args.policy_max_tokens < 1:
        raise UsageError("--policy-attempts and --policy-max-tokens must be at least 1")
    decoding = replace(DEFAULT_DECODING, max_tokens=args.policy_max_tokens)
    if args.policy_constrained:
        from lemon.spec.grammar import SpecGrammar, SpecGrammarError

        try:
            SpecGrammar.build(budget=args.policy_max_tokens)
        except SpecGrammarError as exc:
            raise UsageError(f"--policy-constrained: {exc}") from None
    try:
        return load_policy(
            args.policy,
            model=args.policy_model,
            max_attempts=args.policy_attempts,
            decoding=decoding,
            constrained=args.policy_constrained,
            grammar_dialect=args.policy_grammar,
        )
    except PolicyVersionError as exc:
        raise UsageError(f"--policy: {exc}") from None


def add_policy_options(p: Any) -> None:
    p.add_argument(
        "--policy",
        metavar="PATH|URL",
        help="a trained policy version directory, or an OpenAI-compatible URL serving one",
    )
    p.add_argument("--policy-model", default=None, help="served model name (with a URL)")
    p.add_argument(
        "--policy-attempts",
        type=int,
        default=2,
        help="tries before falling back to the template policy (default 2)",
    )
    p.add_argument(
        "--policy-constrained",
        action="store_true",
        help="decode the policy under the spec grammar (names unique, depends_on only on "
        "earlier agents, closes within --policy-max-tokens): every spec is valid",
    )
    p.add_argument(
        "--policy-grammar",
        choices=["vllm", "guided", "llamacpp"],
        default="vllm",
        help="with --policy URL --policy-constrained: how the server takes a grammar "
        "(vllm: structured_outputs.grammar; guided: guided_grammar; llamacpp: grammar with "
        "%%llguidance, which needs a llama.cpp built with LLGUIDANCE)",
    )
    p.add_argument(
        "--policy-max-tokens",
        type=int,
        default=DEFAULT_POLICY_TOKENS,
        help=f"longest spec the policy may write, in tokens (default {DEFAULT_POLICY_TOKENS})",
    )


def cmd_trace(args: argparse.Namespace) -> int:
    from lemon.engine.trace import read_trace, render_table, render_timeline

    try:
        events = read_trace(args.path)
    except OSError as exc:
        raise UsageError(f"cannot read {args.path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_INVALID
    print(render_timeline(events) if args.timeline else render_table(events))
    return EXIT_OK


def cmd_serve_model(args: argparse.Namespace) -> int:
    from lemon.backends.local import PACKAGED, LocalBackend, ModelSource
    from lemon.serving import serve

    name = PACKAGED if args.model == "packaged" else args.model
    backend = LocalBackend(ModelSource(name, args.dtype), window_s=args.batch_window)
    served = args.served_model_name or (
        "SmolLM2-135M-Instruct" if args.model == "packaged" else args.model
    )
    print(
        f"serving {backend.label} as {served!r} on http://{args.host}:{args.port}/v1",
        file=sys.stderr,
    )
    serve(backend, served_name=served, host=args.host, port=args.port)
    return EXIT_OK


def register(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="run a task end to end (spec, agents, answer)",
        description="Run a task: the template policy (or --spec) writes the "
        "team, the agents run on the profile's tiers, the answer is printed.",
    )
    p.add_argument(
        "--task",
        default=None,
        help=f"the task text (default: the benchmark item {SAMPLE_ID}, scored against its answer)",
    )
    p.add_argument("--spec", metavar="PATH", help="run this spec instead of the policy's")
    add_policy_options(p)
    p.add_argument(
        "--template",
        choices=["default", "compute"],
        default="default",
        help="template policy variant; compute: maths teams with a python_executor",
    )
    p.add_argument("--profile", default="embedded", help="capacity profile (default: embedded)")
    p.add_argument(
        "--profiles",
        action="append",
        default=[],
        metavar="FILE",
        help="profile file (repeatable; also $LEMON_PROFILES)",
    )
    p.add_argument("--roles", action="append", default=[], metavar="FILE")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--trace", metavar="PATH", help="append the run's events (JSONL) to PATH")
    p.add_argument("--max-tokens", type=int, default=256, help="per agent (default 256)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--deadline", type=float, default=900.0, help="seconds for the whole run")
    p.set_defaults(handler=cmd_run)

    p = sub.add_parser("trace", help="render a run trace (JSONL) as a table or timeline")
    p.add_argument("path", metavar="PATH")
    p.add_argument("--timeline", action="store_true")
    p.set_defaults(handler=cmd_trace)

    p = sub.add_parser("serve-model", help="OpenAI-compatible HTTP server over an in-process model")
    p.add_argument("--model", default="packaged", help="'packaged' or a local model directory")
    p.add_argument("--served-model-name", default=None)
    p.add_argument(
        "--dtype",
        default="auto",
        choices=DTYPES,
        help="auto: bfloat16 on CUDA; on the CPU fbgemm float16 weights (int8 without fbgemm)",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--batch-window", type=float, default=0.02, help="seconds to gather a batch")
    p.set_defaults(handler=cmd_serve_model)
