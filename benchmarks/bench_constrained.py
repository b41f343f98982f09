"""Constrained policy decoding: time per token under the spec grammar over unconstrained.

The untrained packaged SmolLM2 (the in-process backend, default dtype) writes a spec for each
of the first N GSM8K test tasks twice, interleaved: once freely (the policy's default
decoding: greedy, stop at a blank line) and once constrained to the spec grammar
(:mod:`lemon.spec.grammar`, llguidance matchers rebuilt per line). Each call decodes one
sequence alone (no batching). A logits processor stamps the start of every decode step on both
sides (masking on the constrained side only), so the time per token is the mean interval
between steps after the first (which holds the prompt's prefill): forward pass, mask and
sampling, the grammar rebuilds at line ends included.

``ratio`` = constrained seconds per decode step / unconstrained (goal <= 1.2), with
``ratio_ci95`` (tasks resampled in pairs);
``valid_rate`` = share of constrained specs that validate (goal 1.0), beside the
unconstrained share; ``mask_ms_per_token`` is the logits processor's own time (mask fill,
apply, and the per-line grammar rebuilds).

Run: ``lemon bench constrained --json [--tasks N] [--max-tokens M]``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import fields, replace
from typing import Any

import harness
from lemon.backends.base import GenerationRequest, Message
from lemon.backends.local import PACKAGED, LocalModel, ModelSource, load_model
from lemon.data import Benchmark, split_items
from lemon.policy.inference import DEFAULT_DECODING, extract_spec_text
from lemon.policy.prompt import policy_messages
from lemon.spec.grammar import SpecGrammar
from lemon.spec.issues import SpecError
from lemon.spec.validation import parse_spec


def _valid(text: str) -> bool:
    try:
        parse_spec(extract_spec_text(text))
    except SpecError:
        return False
    return True


def _ratio_interval(
    constrained: list[tuple[float, int]],
    unconstrained: list[tuple[float, int]],
    *,
    draws: int = 2000,
    seed: int = 0,
) -> list[float]:
    """95% bootstrap interval of ``ratio``, the tasks resampled in pairs (each task's
    constrained and unconstrained calls together; :func:`harness.interval`)."""

    def ratio(c_s: Any, c_t: Any, u_s: Any, u_t: Any) -> float:
        if not (c_t.sum() and u_t.sum() and u_s.sum()):
            return float("nan")  # a draw with no tokens on a side has no ratio
        return float((c_s.sum() / c_t.sum()) / (u_s.sum() / u_t.sum()))

    columns = [
        [float(s) for s, _ in constrained],
        [float(t) for _, t in constrained],
        [float(s) for s, _ in unconstrained],
        [float(t) for _, t in unconstrained],
    ]
    return harness.interval(ratio, *columns, rounds=draws, seed=seed)


class _StepStamped(LocalModel):
    """The model with the (then mask-free) logits processor on unconstrained batches too, so
    both sides' decode steps are stamped by the same code."""

    def _guided(self, requests: Sequence[GenerationRequest]) -> bool:
        return True


def measure(tasks: int, max_tokens: int) -> dict[str, Any]:
    loaded = load_model(ModelSource(PACKAGED))
    model = _StepStamped(**{f.name: getattr(loaded, f.name) for f in fields(loaded)})
    decoding = replace(DEFAULT_DECODING, max_tokens=max_tokens)
    grammar = SpecGrammar.build(budget=max_tokens)
    items = split_items(Benchmark.GSM8K, split="test")[:tasks]
    warm = GenerationRequest(
        tuple(Message(m["role"], m["content"]) for m in policy_messages(items[0].question)),  # type: ignore[arg-type]
        replace(decoding, max_tokens=4),
        constraint=grammar,
    )
    model.generate_batch([warm])  # loads llguidance's tokenizer and fills the prefix cache
    sides: dict[str, dict[str, Any]] = {
        name: {"seconds": 0.0, "tokens": 0, "generated": 0, "valid": 0, "per_task": [], "pairs": []}
        for name in ("unconstrained", "constrained")
    }
    mask_s = 0.0
    for item in items:
        messages = tuple(
            Message(m["role"], m["content"])  # type: ignore[arg-type]
            for m in policy_messages(item.question)
        )
        for name in ("unconstrained", "constrained"):
            request = GenerationRequest(
                messages, decoding, constraint=grammar if name == "constrained" else None
            )
            (generation,) = model.generate_batch([request])
            stamps = model.last_guide.stamps
            seconds = stamps[-1] - stamps[0]
            side = sides[name]
            side["seconds"] += seconds
            side["tokens"] += len(stamps) - 1
            side["generated"] += generation.completion_tokens
            side["valid"] += _valid(generation.text)
            side["per_task"].append(seconds / max(len(stamps) - 1, 1))
            side["pairs"].append((seconds, len(stamps) - 1))
            if name == "constrained":
                mask_s += model.last_guide.mask_s
    per_token = {n: s["seconds"] / max(s["tokens"], 1) for n, s in sides.items()}
    return {
        "benchmark": "constrained",
        "model": "packaged SmolLM2-135M-Instruct (untrained), in-process, "
        f"{model.source.resolved_dtype()}",
        "tasks": tasks,
        "max_tokens": max_tokens,
        "ratio": harness.ratio(per_token["constrained"], per_token["unconstrained"]),
        "ratio_ci95": _ratio_interval(
            sides["constrained"]["pairs"], sides["unconstrained"]["pairs"]
        ),
        "goal": "ratio <= 1.2 and valid_rate == 1.0",
        "valid_rate": sides["constrained"]["valid"] / tasks,
        "unconstrained_valid_rate": sides["unconstrained"]["valid"] / tasks,
        "ms_per_token": {n: round(1000 * v, 2) for n, v in per_token.items()},
        "median_ratio_per_task": round(
            statistics.median(
                c / u
                for c, u in zip(
                    sides["constrained"]["per_task"],
                    sides["unconstrained"]["per_task"],
                    strict=True,
                )
            ),
            4,
        ),
        "steps_timed": {n: s["tokens"] for n, s in sides.items()},
        "tokens": {n: s["generated"] for n, s in sides.items()},
        "mask_ms_per_token": round(1000 * mask_s / max(sides["constrained"]["tokens"], 1), 3),
    }


def main(argv: list[str] | None = None) -> int:
    bench = harness.Harness("constrained", __doc__)
    bench.parser.add_argument("--tasks", type=int, default=4)
    bench.parser.add_argument("--max-tokens", type=int, default=384)
    args = bench.parse(argv)
    result = measure(args.tasks, args.max_tokens)
    return bench.finish(
        args,
        result,
        text=lambda r: (
            f"constrained/unconstrained time per token: {r['ratio']} "
            f"({r['ms_per_token']}); valid {r['valid_rate']:.2f} constrained, "
            f"{r['unconstrained_valid_rate']:.2f} unconstrained"
        ),
    )


if __name__ == "__main__":
    raise SystemExit(main())
