"""The learned policy's own cost in a run: transformers against the GGUF export on llama.cpp.

Each round starts one fresh process per side, in alternating order (a side pays what ``lemon
run --policy learned`` pays: nothing is loaded before it), which measures, for the shipped
policy (``--policy learned``, unconstrained as ``lemon run`` decodes it by default):

- ``policy_s``: ``load_policy`` + the model's load + ``write_spec`` on GSM8K train item 0 (the
  task ``lemon run`` takes with no ``--task``): the policy's share of a run's wall time;
- ``load_s``: the model's load alone (transformers: torch, the base, the adapter merged and
  packed; llama.cpp: the cached export found by its hash and mapped);
- then, on GSM8K train item 1, one generation stamped per token: ``first_token_s`` (prefill and
  the first token), ``decode_tokens_per_s`` (the tokens after the first), and the same request
  under the spec grammar: ``constrained_s`` beside ``unconstrained_s``, ``mask_ms_per_token``
  (masks filled and applied) and ``guide_build_s`` (llguidance's view of the vocabulary, built
  once per process before the first constrained call).

Sides: ``transformers`` (the path before the export: LocalBackend, default dtype and torch's
threads), ``transformers-1t`` (the same with ``torch.set_num_threads(1)``), ``llamacpp`` (the
default now: one thread, ``POLICY_THREADS``) and ``llamacpp-2t``. The export is made (or found)
before the first round and its time reported once (``export_s``, 0 when it was cached).
Ratios are medians over rounds, transformers over llama.cpp (above 1: llama.cpp is faster).

Run: ``lemon bench policy --json [--rounds N] [--sides a,b,...]``.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import fields
from typing import Any

import harness

SIDES = ("transformers", "transformers-1t", "llamacpp", "llamacpp-2t")


def _request(policy: Any, task: str, *, constrained: bool) -> Any:
    from lemon.backends.base import GenerationRequest, Message
    from lemon.policy.prompt import policy_messages
    from lemon.spec.grammar import SpecGrammar

    messages = tuple(
        Message(m["role"], m["content"])  # type: ignore[arg-type]  # roles from policy_messages
        for m in policy_messages(task, format=policy.prompt_format)
    )
    budget = policy.decoding.max_tokens
    constraint = SpecGrammar.build(budget=budget) if constrained else None
    return GenerationRequest(messages, policy.decoding, constraint=constraint)


def _stamped_transformers(policy: Any, loaded: Any, task: str, out: dict[str, Any]) -> None:
    from lemon.backends.guided import guide_tokenizer
    from lemon.backends.local import LocalModel

    class Stamped(LocalModel):
        def _guided(self, requests: Any) -> bool:
            return True  # the (mask-free when unconstrained) processor stamps every step

    model = Stamped(**{f.name: getattr(loaded, f.name) for f in fields(loaded)})
    started = time.perf_counter()
    vocab = int(model.model.config.get_text_config().vocab_size)
    guide_tokenizer(model.tokenizer, vocab=vocab)
    out["guide_build_s"] = time.perf_counter() - started
    for constrained in (False, True):
        started = time.perf_counter()
        (generation,) = model.generate_batch([_request(policy, task, constrained=constrained)])
        took = time.perf_counter() - started
        stamps = model.last_guide.stamps
        if constrained:
            out["constrained_s"] = took
            out["mask_ms_per_token"] = 1000 * model.last_guide.mask_s / max(len(stamps), 1)
            out["constrained_text"] = generation.text
        else:
            out["unconstrained_s"] = took
            out["first_token_s"] = stamps[0] - started
            out["decode_tokens_per_s"] = (len(stamps) - 1) / (stamps[-1] - stamps[0])
            out["tokens"] = generation.completion_tokens


def _stamper(stamps: list[float]) -> Any:
    return lambda _text: stamps.append(time.perf_counter())


def _stamped_llama(policy: Any, model: Any, task: str, out: dict[str, Any]) -> None:
    started = time.perf_counter()
    model.guide_tokenizer()
    out["guide_build_s"] = time.perf_counter() - started
    for constrained in (False, True):
        stamps: list[float] = []
        masked = model.mask_s
        started = time.perf_counter()
        future = model.submit(
            _request(policy, task, constrained=constrained),
            on_text=_stamper(stamps),
        )
        generation = future.result()
        took = time.perf_counter() - started
        if constrained:
            out["constrained_s"] = took
            tokens = max(generation.completion_tokens, 1)
            out["mask_ms_per_token"] = 1000 * (model.mask_s - masked) / tokens
            out["constrained_text"] = generation.text
        else:
            out["unconstrained_s"] = took
            out["first_token_s"] = stamps[0] - started
            out["decode_tokens_per_s"] = (len(stamps) - 1) / (stamps[-1] - stamps[0])
            out["tokens"] = generation.completion_tokens


async def _child(side: str) -> dict[str, Any]:
    """One side in this (fresh) process."""
    started = time.perf_counter()
    if side == "transformers-1t":
        import torch

        torch.set_num_threads(1)
    if side.startswith("llamacpp"):
        os.environ["LEMON_POLICY_THREADS"] = "2" if side.endswith("-2t") else "1"
    from lemon.data import Benchmark, split_items
    from lemon.policy.inference import PolicyEngine, load_policy

    tasks = [item.question for item in split_items(Benchmark.GSM8K, split="train")[:2]]
    engine: PolicyEngine = "llamacpp" if side.startswith("llamacpp") else "transformers"
    policy = load_policy("learned", engine=engine)
    loading = time.perf_counter()
    model = await policy.backend.model()  # type: ignore[attr-defined]
    loaded = time.perf_counter()
    decision = await policy.write_spec(tasks[0])
    done = time.perf_counter()
    out: dict[str, Any] = {
        "side": side,
        "policy_s": done - started,
        "load_s": loaded - loading,
        "write_spec_s": done - loaded,
        "spec": decision.text,
        "label": policy.label,
    }
    if engine == "llamacpp":
        _stamped_llama(policy, model, tasks[1], out)
    else:
        _stamped_transformers(policy, model, tasks[1], out)
    return out


def _run_child(side: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", side],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"side {side} failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


_FIGURES = (
    "policy_s",
    "load_s",
    "write_spec_s",
    "first_token_s",
    "decode_tokens_per_s",
    "unconstrained_s",
    "constrained_s",
    "mask_ms_per_token",
    "guide_build_s",
)


def measure(rounds: int, sides: tuple[str, ...]) -> dict[str, Any]:
    from lemon.backends.exporting import exported_path, policy_gguf
    from lemon.policy.shipped import shipped_policy

    cached = exported_path(shipped_policy()).is_file()
    started = time.perf_counter()
    gguf = policy_gguf(shipped_policy(), quiet=True)
    export_s = 0.0 if cached else time.perf_counter() - started
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for index in range(rounds):
        order = sides if index % 2 == 0 else tuple(reversed(sides))
        for side in order:
            runs[side].append(_run_child(side))
    medians = {
        side: {
            key: round(statistics.median(r[key] for r in results), 4)
            for key in _FIGURES
            if all(key in r for r in results)
        }
        for side, results in runs.items()
    }
    for figures in medians.values():
        figures["constraint_overhead"] = harness.ratio(
            figures["constrained_s"], figures["unconstrained_s"]
        )
    ratios: dict[str, dict[str, float]] = {}
    for slow in (s for s in sides if s.startswith("transformers")):
        for fast in (s for s in sides if s.startswith("llamacpp")):
            a, b = medians[slow], medians[fast]
            ratios[f"{slow}/{fast}"] = {
                key: harness.ratio(a[key], b[key])
                for key in ("policy_s", "load_s", "write_spec_s", "first_token_s")
            } | {"decode_speed": harness.ratio(b["decode_tokens_per_s"], a["decode_tokens_per_s"])}
    head = ("transformers", "llamacpp")
    return {
        "benchmark": "policy",
        "policy": "learned (svamp-tables@grpo-credit-cs-s0-to20)",
        "gguf": gguf.name,
        "export_s": round(export_s, 2),
        "rounds": rounds,
        "ratio": ratios.get("/".join(head), {}).get("policy_s"),
        "goal": "llamacpp policy_s < 10 s on this 2-core machine",
        "median": medians,
        "ratios": ratios,
        "same_spec": len({r["spec"] for rs in runs.values() for r in rs}) == 1,
        "same_constrained_text": len({r["constrained_text"] for rs in runs.values() for r in rs})
        == 1,
        "labels": {side: results[0]["label"] for side, results in runs.items()},
        "runs": runs,
    }


def _child_main(side: str) -> int:
    """A side's process (``bench_policy.py --child SIDE``): its figures as one JSON line."""
    print(json.dumps(asyncio.run(_child(side))))
    return 0


def main(argv: list[str] | None = None) -> int:
    bench = harness.Harness("policy", __doc__, rounds=2, rounds_help="rounds (default 2)")
    bench.parser.add_argument(
        "--sides", default=",".join(SIDES), help=f"comma-separated, of {', '.join(SIDES)}"
    )
    args = bench.parse(argv)
    sides = tuple(s for s in args.sides.split(",") if s)
    unknown = [s for s in sides if s not in SIDES]
    if unknown:
        bench.parser.error(f"unknown sides {unknown}")
    result = measure(args.rounds, sides)
    return bench.finish(
        args,
        result,
        text=lambda r: "\n".join(
            [f"policy_s transformers/llamacpp: {r['ratio']}"]
            + [f"{side}: {figures}" for side, figures in r["median"].items()]
        ),
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        raise SystemExit(_child_main(sys.argv[2]))
    raise SystemExit(main())
