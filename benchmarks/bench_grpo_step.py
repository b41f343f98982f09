"""Cost of span advantages: one GRPO optimisation step with (B, T) advantages vs TRL's plain one.

Both sides use the same tiny model (:mod:`lemon_testing.tiny_models`), the same batch of
completions and the same fixed rewards, so generation, reward functions and mutant
executions are excluded. One step = build the advantages (plain: TRL's ``(B,)`` group
advantages; span: the same plus ``λ_cf · Δc`` on each completion's span tokens, built from
:class:`~lemon_train.credit.SpanCredit` lists as in training) + ``compute_loss`` of the trainer
(:class:`trl.GRPOTrainer` vs :class:`lemon_train.grpo.CounterfactualGRPOTrainer`) + backward +
AdamW step. Repeats alternate plain/span (the order flips every repeat); ``ratio`` is the median
over repeats of span time / plain time of the same repeat (pairs cancel slow drifts of a shared
machine's load; goal ≤ 1.05); the ratios of medians and of minima are printed beside it.

Run: ``lemon bench grpo-step --json``.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import harness


def _harness() -> harness.Harness:
    bench = harness.Harness("grpo-step", __doc__, repeats=25)
    parser = bench.parser
    parser.add_argument("--batch", type=int, default=16, help="completions per step")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--length", type=int, default=64, help="completion tokens")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    return bench


def build(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Two trainers over copies of one tiny model, fixed inputs and fixed span credits."""
    import copy

    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from lemon.learning.simulator import make_tasks, synthetic_messages
    from lemon.learning.training_config import CounterfactualConfig
    from lemon.reward import RewardConfig
    from lemon_testing.tiny_models import tiny_policy_model
    from lemon_train.grpo import CounterfactualGRPOTrainer
    from lemon_train.loading import load_model_and_tokenizer
    from lemon_train.rewards import SyntheticReward

    path = tiny_policy_model(work / "tiny", hidden_size=args.hidden)
    model, tokenizer = load_model_and_tokenizer(str(path))
    rows = [{"prompt": synthetic_messages(t)} for t in make_tasks(8)]
    config = GRPOConfig(
        output_dir=str(work / "out"),
        per_device_train_batch_size=args.batch,
        num_generations=args.group_size,
        max_completion_length=args.length,
        use_cpu=True,
        report_to=[],
        disable_tqdm=True,
        loss_type="dapo",
        beta=0.0,
    )

    def zero(**_: Any) -> list[float]:
        return [0.0] * args.batch

    plain = GRPOTrainer(
        model=copy.deepcopy(model),
        reward_funcs=[zero],  # type: ignore[list-item]
        args=config,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
    )
    reward = SyntheticReward(
        tokenizer.decode,  # type: ignore[arg-type]
        rewards=RewardConfig(),
        counterfactual=CounterfactualConfig(),
    )
    span = CounterfactualGRPOTrainer(
        model=copy.deepcopy(model),
        reward_funcs=[zero],
        args=config,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        spec_reward=reward,
        lambda_cf=1.0,
    )
    return {"plain": plain, "span": span, **_inputs(args, tokenizer, rows[0]["prompt"])}


def _inputs(args: argparse.Namespace, tokenizer: Any, prompt: Any) -> dict[str, Any]:
    """One fixed generation batch: the prompt repeated, random completions, rewards and span
    credits (seeded), shared by both trainers."""
    import torch

    from lemon_train.credit import SpanCredit, group_advantages

    generator = torch.Generator().manual_seed(0)
    text = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
    prompt_ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
    prompt_ids = prompt_ids.repeat(args.batch, 1)
    completion_ids = torch.randint(
        3, len(tokenizer), (args.batch, args.length), generator=generator
    )
    rng = random.Random(0)
    credits = [
        [
            SpanCredit("downgrade_capacity", tuple(range(s, s + 2)), rng.uniform(-0.5, 0.5))
            for s in rng.sample(range(args.length - 2), 4)
        ]
        for _ in range(args.batch)
    ]
    base = {
        "prompt_ids": prompt_ids,
        "prompt_mask": torch.ones_like(prompt_ids),
        "completion_ids": completion_ids,
        "completion_mask": torch.ones_like(completion_ids),
        "num_items_in_batch": torch.tensor(args.batch * args.length),
    }
    return {
        "base": base,
        "rewards": torch.rand(args.batch, generator=generator),
        "credits": credits,
        "group_advantages": group_advantages,
    }


def step(setup: dict[str, Any], which: str, optimizers: dict[str, Any]) -> float:
    from lemon_train.credit import credit_matrix, span_advantages

    trainer = setup[which]
    inputs = dict(setup["base"])
    started = time.perf_counter()
    advantages = setup["group_advantages"](setup["rewards"], trainer.num_generations)
    if which == "span":
        credit = credit_matrix(setup["credits"], inputs["completion_ids"].shape[1])
        advantages = span_advantages(advantages, credit, 1.0, inputs["completion_mask"])
    inputs["advantages"] = advantages
    loss = trainer.compute_loss(trainer.model, inputs)
    loss.backward()
    optimizers[which].step()
    optimizers[which].zero_grad(set_to_none=True)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    bench = _harness()
    args = bench.parse(argv)
    import torch

    torch.set_num_threads(args.threads)
    with (
        tempfile.TemporaryDirectory(prefix="lemon-bench-grpo-step-") as temp,
        contextlib.redirect_stdout(sys.stderr),
    ):
        setup = build(args, Path(temp))
        optimizers = {
            name: torch.optim.AdamW(setup[name].model.parameters(), lr=1e-4)
            for name in ("plain", "span")
        }
        for name in ("plain", "span"):
            setup[name].model.train()
            setup[name].current_gradient_accumulation_steps = 1  # Trainer.train() sets it
            step(setup, name, optimizers)  # warm-up
        times: dict[str, list[float]] = {"plain": [], "span": []}
        for index in range(args.repeats):
            for name in harness.alternating(index, "plain", "span"):
                times[name].append(step(setup, name, optimizers))
    plain, span = statistics.median(times["plain"]), statistics.median(times["span"])
    paired = [s / p for s, p in zip(times["span"], times["plain"], strict=True)]
    report = {
        "benchmark": "grpo-step",
        "ratio": round(statistics.median(paired), 4),
        "ratio_of_medians": harness.ratio(span, plain),
        "ratio_of_minima": harness.ratio(min(times["span"]), min(times["plain"])),
        "goal": "ratio <= 1.05",
        "timed": "advantages + compute_loss + backward + AdamW step of one batch",
        "not_timed": "generation, reward functions, mutant executions (scoring)",
        "plain_step_s": round(plain, 5),
        "span_step_s": round(span, 5),
        "repeats": args.repeats,
        "batch": args.batch,
        "completion_tokens": args.length,
        "model": f"tiny Llama, hidden {args.hidden}, 2 layers (lemon_testing.tiny_models)",
        "threads": args.threads,
    }
    return bench.finish(
        args,
        report,
        text=lambda r: f"span/plain step time {r['ratio']} ({span:.4f} s vs {plain:.4f} s)",
    )


if __name__ == "__main__":
    raise SystemExit(main())
