"""Where a GRPO step on the outcome tables spends its time, and what two remedies save.

With the tables answering the rollouts, a step is the policy's own sampling, the loss's forward
and backward passes and the optimizer (a py-spy profile of the credit arm: sampling 56%,
backward 26%, forward 18%, reward under 1%). TRL's transformers path prefills every sampled row's
prompt, ``group_size`` times per task; :mod:`lemon_train.sampling` prefills each task once.
The loss pass scores the completions; :mod:`lemon_train.logprobs` runs the LM head on them only.

Two measurements on the same trainer and weights, the sides alternating (the order flips every
repeat), so drifts of a shared machine's speed cancel in each pair:

- **sampling**: ``generate`` for ``--tasks`` tasks × ``--group`` samples of the policy prompt,
  TRL's way (every row padded and prefilled) against one prefill per task. A fresh set of tasks
  each repeat, the same tasks and seed for both sides of a pair.
- **scoring**: the loss's forward and backward passes over one generation batch, through TRL's
  fused LM head (on a CPU it projects every prompt position too) against the head over the
  completions only (:mod:`lemon_train.logprobs`).
- **step**: one whole GRPO step as ``Trainer.train`` runs it, minus the data loader: sampling,
  the table reward (``live_calls: false``: every rollout is a lookup), counterfactual credit,
  advantages, the loss, backward and an AdamW step on the LoRA weights; TRL's way against both
  remedies.

``speedup`` is TRL-path time / shared time of the same pair; reported as the mean over pairs
with a 95% bootstrap interval (2,000 resamples of the pairs). The greedy tokens of both paths are
compared once on the first tasks (``greedy_equal``).

Run: ``lemon bench grpo-sampling --json`` (``--base-model``, ``--table``, ``--config``,
``--repeats``, ``--steps``, ``--threads``).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import harness

DEFAULT_CONFIG = harness.ROOT / "experiments/policy-tables/svamp/grpo-credit-s0-long.yaml"
DEFAULT_POLICY = harness.ROOT / "src/lemon/policy/learned"


def _harness() -> harness.Harness:
    bench = harness.Harness("grpo-sampling", __doc__, repeats=8, repeats_help="sampling pairs")
    parser = bench.parser
    parser.add_argument(
        "--config",
        default=str(DEFAULT_CONFIG),
        help="a GRPO training config on an outcome table (its data, rewards, credit, LoRA)",
    )
    parser.add_argument(
        "--base-model",
        default=str(DEFAULT_POLICY),
        help="the policy to sample from (default: the shipped --policy learned)",
    )
    parser.add_argument("--tasks", type=int, default=4, help="tasks per step")
    parser.add_argument("--group", type=int, default=4, help="samples per task")
    parser.add_argument("--max-tokens", type=int, default=64, help="completion tokens at most")
    parser.add_argument("--steps", type=int, default=6, help="whole-step pairs (0: none)")
    parser.add_argument("--threads", type=int, default=1)
    return bench


def summary(trl: list[float], shared: list[float]) -> dict[str, Any]:
    """Per-pair speedups (TRL time / shared time), their mean with a 95% interval (the pairs
    resampled, 2,000 times), and the medians of each side."""
    speedups = [a / b for a, b in zip(trl, shared, strict=True)]
    return {
        "speedup": round(statistics.fmean(speedups), 4),
        "speedup_ci95": harness.interval(lambda x: float(x.mean()), speedups),
        "trl_s_median": round(statistics.median(trl), 4),
        "shared_s_median": round(statistics.median(shared), 4),
        "pairs": len(speedups),
        "speedups": [round(s, 4) for s in speedups],
    }


def _trainer(args: argparse.Namespace, work: Path) -> Any:
    from lemon.learning.training_config import load_config
    from lemon_train.grpo import build_trainer

    config = load_config(
        args.config,
        base_model=args.base_model,
        output_dir=str(work / "out"),
        heldout=None,
    )
    hp = config.hyperparameters.model_copy(
        update={
            "per_device_batch_size": args.tasks,
            "group_size": args.group,
            "max_completion_length": args.max_tokens,
            "live_calls": False,
        }
    )
    config = config.model_copy(update={"hyperparameters": hp})
    trainer, _, tokenizer = build_trainer(config)
    trainer.model.train()  # type: ignore[union-attr]
    trainer.current_gradient_accumulation_steps = 1  # Trainer.train() sets it
    return trainer, tokenizer


def _batch(trainer: Any, start: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """``args.tasks`` dataset rows from ``start`` (wrapping), each repeated ``args.group``
    times, as TRL's RepeatSampler feeds a generation batch."""
    data = trainer.train_dataset
    rows = [data[(start + i) % len(data)] for i in range(args.tasks)]
    return [row for row in rows for _ in range(args.group)]


def _prompt_ids(trainer: Any, tokenizer: Any, batch: list[dict[str, Any]]) -> list[list[int]]:
    ids = []
    for row in batch:
        text = tokenizer.apply_chat_template(
            row["prompt"], add_generation_prompt=True, tokenize=False
        )
        ids.append(list(tokenizer(text, add_special_tokens=False)["input_ids"]))
    return ids


def _sample(trainer: Any, prompt_ids: list[list[int]], shared: bool, seed: int) -> float:
    import torch

    trainer.shared_prefill = shared
    torch.manual_seed(seed)
    started = time.perf_counter()
    trainer._generate_single_turn(prompt_ids, None, {}, trainer.num_generations)
    return time.perf_counter() - started


def _score(trainer: Any, inputs: dict[str, Any], compact: bool) -> float:
    """The loss pass of one generation batch: forward (TRL's fused head, or the head over the
    completions only) and backward; the gradient is dropped."""
    trainer.completion_head = compact
    started = time.perf_counter()
    trainer.compute_loss(trainer.model, dict(inputs)).backward()
    elapsed = time.perf_counter() - started
    trainer.model.zero_grad(set_to_none=True)
    return elapsed


def _step(
    trainer: Any, optimizer: Any, batch: list[dict[str, Any]], ours: bool, seed: int
) -> float:
    import torch

    trainer.shared_prefill = ours
    trainer.completion_head = ours
    torch.manual_seed(seed)
    started = time.perf_counter()
    inputs = trainer._generate_and_score_completions(batch)
    loss = trainer.compute_loss(trainer.model, inputs)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - started


def _greedy_equal(trainer: Any, prompt_ids: list[list[int]]) -> bool:
    import torch
    from transformers import GenerationConfig

    from lemon_train.sampling import shared_prefix_generate, until_eos

    tokenizer = trainer.processing_class
    config = GenerationConfig(
        max_new_tokens=trainer.max_completion_length,
        do_sample=False,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=trainer.eos_token_ids,
    )
    model = trainer.model
    width = max(len(ids) for ids in prompt_ids)
    padded = torch.tensor([[tokenizer.pad_token_id] * (width - len(r)) + r for r in prompt_ids])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in prompt_ids])
    with torch.no_grad():
        out = model.generate(input_ids=padded, attention_mask=mask, generation_config=config)
    plain = until_eos(out[:, width:], trainer.eos_token_ids)
    shared, _ = shared_prefix_generate(
        model,
        prompt_ids,
        config,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_ids=trainer.eos_token_ids,
    )
    return plain == shared


def main(argv: list[str] | None = None) -> int:
    bench = _harness()
    args = bench.parse(argv)
    import tempfile

    import torch

    torch.set_num_threads(args.threads)
    with (
        tempfile.TemporaryDirectory(prefix="lemon-bench-grpo-sampling-") as temp,
        contextlib.redirect_stdout(sys.stderr),
    ):
        trainer, tokenizer = _trainer(args, Path(temp))
        first = _prompt_ids(trainer, tokenizer, _batch(trainer, 0, args))
        greedy_equal = _greedy_equal(trainer, first)
        prompt_tokens = [len(ids) for ids in first[:: args.group]]
        _sample(trainer, first, True, 0)  # warm-up
        times: dict[str, list[float]] = {"trl": [], "shared": []}
        for index in range(args.repeats):
            ids = _prompt_ids(trainer, tokenizer, _batch(trainer, index * args.tasks, args))
            for shared in harness.alternating(index, False, True):
                times["shared" if shared else "trl"].append(
                    _sample(trainer, ids, shared, seed=index)
                )
        scoring: dict[str, list[float]] = {"trl": [], "shared": []}
        inputs = trainer._generate_and_score_completions(_batch(trainer, 0, args))
        _score(trainer, inputs, True)  # warm-up
        for index in range(args.repeats):
            for compact in harness.alternating(index, False, True):
                scoring["shared" if compact else "trl"].append(_score(trainer, inputs, compact))
        steps: dict[str, list[float]] = {"trl": [], "shared": []}
        if args.steps:
            trainable = [p for p in trainer.model.parameters() if p.requires_grad]
            optimizer = torch.optim.AdamW(trainable, lr=1e-6)
            for index in range(args.steps):
                batch = _batch(trainer, 1000 + index * args.tasks, args)
                for shared in harness.alternating(index, False, True):
                    steps["shared" if shared else "trl"].append(
                        _step(trainer, optimizer, batch, shared, seed=index)
                    )
    report: dict[str, Any] = {
        "benchmark": "grpo-sampling",
        "sampling": summary(times["trl"], times["shared"]),
        "scoring": summary(scoring["trl"], scoring["shared"]),
        "step": summary(steps["trl"], steps["shared"]) if args.steps else None,
        "greedy_equal": greedy_equal,
        "timed": "sampling: generate of tasks x group rows (TRL: every row prefilled; shared: "
        "one prefill per task); scoring: the loss's forward and backward over one batch (TRL's "
        "fused LM head over every position; ours: over the completions); step: sampling + "
        "table reward + credit + loss + backward + AdamW, TRL's way against both remedies "
        "(data loading not timed)",
        "tasks": args.tasks,
        "group": args.group,
        "max_completion_tokens": args.max_tokens,
        "prompt_tokens": prompt_tokens,
        "base_model": args.base_model,
        "config": args.config,
        "threads": args.threads,
    }
    return bench.finish(args, report, text=_summary)


def _summary(report: dict[str, Any]) -> str:
    return "\n".join(
        [
            f"{part}: TRL's way {found['trl_s_median']:.2f} s, LEMON's "
            f"{found['shared_s_median']:.2f} s (medians); speedup {found['speedup']:.2f}× "
            f"{found['speedup_ci95']} over {found['pairs']} pairs"
            for part in ("sampling", "scoring", "step")
            if (found := report[part])
        ]
        + [f"greedy tokens equal: {report['greedy_equal']}"]
    )


if __name__ == "__main__":
    raise SystemExit(main())
