"""Simulator v1 through TRL: the first learning measurement, kept to reproduce its results.

``lemon bench learning`` (``bench_learning.py``) is the current measurement (simulator v2,
paired seeds, four arms). This one runs :mod:`lemon.learning.simulator` (simulator v1) through
``lemon_train.grpo.run``, TRL's trainer, and reproduces ``results/v1/`` beside this file.

For each seed: a tiny random Llama (with a small byte-level BPE trained on the simulator's
text, :mod:`lemon_testing.tiny_models`) is SFT-warm-started on
teacher specs of the simulator (:mod:`lemon.learning.simulator`: valid specs with the right
role but random tiers, duties and verifier), its invalid-spec rate is measured on fresh tasks
(sampled at the GRPO temperature), then GRPO runs twice from that same SFT version: global-only
(``counterfactual.enabled: false``) and with counterfactual span credit. Both runs go through
``lemon_train.sft.run`` / ``lemon_train.grpo.run`` (the code ``lemon train`` runs).

Per GRPO step the reward function logs ``optimum_ratio``: the batch's mean of R(spec)/R*(task)
(R* the task's known optimum; an invalid spec counts with ``invalid_reward``). Smoothed over
``--window`` steps, the first step where it reaches 0.9 is that run's steps-to-90%; a run
that never gets there counts as ``steps + 1`` (censored, flagged ``reached: false``).
``ratio`` = mean steps-to-90% with counterfactual credit / mean steps-to-90% global-only
(goal ≤ 0.7). This is a simulator: it says whether the machinery learns, not how well a real
policy orchestrates.

Run: ``lemon bench learning-v1 --json`` (about 20 min on 2 CPU cores); ``--quick`` for a smoke
run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "v1"


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="lemon bench learning-v1", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true", help="tiny settings (about a minute)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--sft-steps", type=int, default=300)
    parser.add_argument("--steps", type=int, default=150, help="GRPO steps per run")
    parser.add_argument("--tasks-per-step", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-3, help="GRPO learning rate")
    parser.add_argument("--sft-lr", type=float, default=3e-3)
    parser.add_argument("--lambda-cf", type=float, default=2.0)
    parser.add_argument("--max-mutants", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=0.8, help="sampling temperature")
    parser.add_argument("--hidden", type=int, default=64, help="tiny model hidden size")
    parser.add_argument("--window", type=int, default=5, help="smoothing window (steps)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--workdir", help="keep runs here (default: a temporary directory)")
    parser.add_argument(
        "--reuse-sft", action="store_true", help="keep an SFT version already in --workdir"
    )
    parser.add_argument("--save", action="store_true", help=f"write the result under {RESULTS}")
    parser.add_argument("--name", default="result", help="file name (NAME.json) for --save")
    parser.add_argument(
        "--kinds",
        default="drop_dependency,rollback_role,downgrade_capacity",
        help="mutation kinds of the counterfactual arm (comma-separated)",
    )
    parser.add_argument(
        "--token-cost",
        type=float,
        default=None,
        help="R_orch cost per 1,000 worker tokens (default: RewardConfig's)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.sft_steps, args.steps = 1, 8, 2
        args.group_size, args.tasks_per_step, args.window = 4, 1, 1
    return args


def _sft_rows(path: Path, count: int, seed: int) -> None:
    from lemon.learning.simulator import make_tasks, synthetic_messages, teacher_spec

    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as handle:
        for task in make_tasks(count, seed=seed):
            row = {
                "prompt": synthetic_messages(task),
                "completion": [{"role": "assistant", "content": teacher_spec(task, rng)}],
            }
            handle.write(json.dumps(row) + "\n")


def invalid_rate(
    policy: Path, *, seed: int, count: int, max_tokens: int, temperature: float
) -> float:
    """Share of sampled completions (GRPO's temperature, fresh tasks) failing ``parse_spec``."""
    import torch

    from lemon.learning.simulator import make_tasks, synthetic_messages
    from lemon.spec.issues import SpecError
    from lemon.spec.validation import parse_spec
    from lemon_train.loading import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(str(policy))
    tokenizer.padding_side = "left"
    tasks = make_tasks(count, seed=seed)
    prompts = [
        tokenizer.apply_chat_template(
            synthetic_messages(t), add_generation_prompt=True, tokenize=False
        )
        for t in tasks
    ]
    batch = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(  # type: ignore[operator]
            **batch, do_sample=True, temperature=temperature, top_k=0, max_new_tokens=max_tokens
        )
    texts = tokenizer.batch_decode(out[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
    bad = 0
    for text in texts:
        try:
            parse_spec(text)
        except SpecError:
            bad += 1
    return bad / len(texts)


def _curve(metrics: Path) -> list[float]:
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    return [row["optimum_ratio"] for row in rows if "optimum_ratio" in row]


def steps_to(curve: list[float], target: float, window: int) -> int | None:
    """First step (1-based) whose trailing ``window``-step mean reaches ``target``."""
    for end in range(window, len(curve) + 1):
        if statistics.fmean(curve[end - window : end]) >= target:
            return end
    return None


def _grpo(
    args: argparse.Namespace, base: Path, out: Path, seed: int, counterfactual: bool
) -> dict[str, Any]:
    from lemon.learning.training_config import TrainingConfig
    from lemon_train import grpo

    config = TrainingConfig.model_validate(
        {
            "stage": "grpo",
            "base_model": str(base),
            "data": "synthetic:256",
            "output_dir": str(out),
            "resume": False,
            "termination_log": str(out.with_name(out.name + ".termination")),
            "hyperparameters": {
                "max_steps": args.steps,
                "per_device_batch_size": args.tasks_per_step,
                "group_size": args.group_size,
                "max_completion_length": 48,
                "temperature": args.temperature,
                "learning_rate": args.lr,
                "seed": seed,
                "save_steps": 10_000,
                "loss_type": "dapo",
            },
            "rewards": {} if args.token_cost is None else {"token_cost": args.token_cost},
            "counterfactual": {
                "enabled": counterfactual,
                "lambda_cf": args.lambda_cf,
                "max_mutants": args.max_mutants,
                "kinds": [kind for kind in args.kinds.split(",") if kind],
            },
        }
    )
    started = time.perf_counter()
    grpo.run(config)
    wall = time.perf_counter() - started
    curve = _curve(out / config.metrics_file)
    reached = steps_to(curve, 0.9, args.window)
    milestones = {
        f"steps_to_{int(target * 100)}": steps_to(curve, target, args.window)
        for target in (0.5, 0.75)
    }
    tail = curve[-args.window :] if curve else [0.0]
    return {
        "steps_to_90": reached if reached is not None else args.steps + 1,
        "reached": reached is not None,
        **milestones,
        "final_optimum_ratio": round(statistics.fmean(tail), 4),
        "first_optimum_ratio": round(curve[0], 4) if curve else None,
        "curve": [round(v, 3) for v in curve],
        "wall_s": round(wall, 1),
    }


def warm_start(args: argparse.Namespace, work: Path) -> tuple[Path, dict[str, Any]]:
    """The one SFT warm start every seed's GRPO runs start from, and its invalid-spec rate."""
    from lemon.learning.training_config import TrainingConfig
    from lemon_testing.tiny_models import tiny_policy_model
    from lemon_train import sft

    tiny = tiny_policy_model(work / f"tiny-h{args.hidden}", hidden_size=args.hidden)
    data = work / "sft.jsonl"
    _sft_rows(data, 1024, seed=1000)
    sft_out = work / "sft"
    config = TrainingConfig.model_validate(
        {
            "stage": "sft",
            "base_model": str(tiny),
            "data": str(data),
            "output_dir": str(sft_out),
            "resume": False,
            "termination_log": str(work / "sft.termination"),
            "hyperparameters": {
                "max_steps": args.sft_steps,
                "per_device_batch_size": 16,
                "learning_rate": args.sft_lr,
                "save_steps": 10_000,
                "max_length": 256,
            },
        }
    )
    started = time.perf_counter()
    if not (args.reuse_sft and (sft_out / "policy.json").is_file()):
        sft.run(config)
    wall = time.perf_counter() - started
    count = 8 if args.quick else 128
    rate = invalid_rate(
        sft_out, seed=2000, count=count, max_tokens=48, temperature=args.temperature
    )
    return sft_out, {
        "invalid_rate": rate,
        "samples": count,
        "temperature": args.temperature,
        "steps": args.sft_steps,
        "wall_s": round(wall, 1),
    }


def run_seed(args: argparse.Namespace, work: Path, base: Path, seed: int) -> dict[str, Any]:
    return {
        "seed": seed,
        "global": _grpo(args, base, work / f"grpo-global-{seed}", seed, False),
        "counterfactual": _grpo(args, base, work / f"grpo-cf-{seed}", seed, True),
    }


def main(argv: list[str] | None = None) -> int:
    args = _arguments(list(sys.argv[1:] if argv is None else argv))
    import torch

    torch.set_num_threads(args.threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lemon-bench-learning-") as temp:
        work = Path(args.workdir) if args.workdir else Path(temp)
        work.mkdir(parents=True, exist_ok=True)
        with contextlib.redirect_stdout(sys.stderr):  # trainers print their logs
            base, sft_report = warm_start(args, work)
            seeds = [run_seed(args, work, base, seed) for seed in range(args.seeds)]
    cf_steps = statistics.fmean(s["counterfactual"]["steps_to_90"] for s in seeds)
    global_steps = statistics.fmean(s["global"]["steps_to_90"] for s in seeds)
    report: dict[str, Any] = {
        "benchmark": "learning",
        "environment": "synthetic orchestration simulator (lemon.learning.simulator)",
        "ratio": round(cf_steps / global_steps, 4),
        "goal": "ratio <= 0.7; sft_invalid_rate < 0.05",
        "sft_invalid_rate": round(sft_report["invalid_rate"], 4),
        "sft": sft_report,
        "seeds": args.seeds,
        "mean_steps_to_90": {"counterfactual": cf_steps, "global": global_steps},
        "final_optimum_ratio": {
            arm: round(statistics.fmean(s[arm]["final_optimum_ratio"] for s in seeds), 4)
            for arm in ("global", "counterfactual")
        },
        "per_seed": seeds,
        "settings": {
            key: getattr(args, key)
            for key in (
                "quick",
                "sft_steps",
                "steps",
                "tasks_per_step",
                "group_size",
                "lr",
                "sft_lr",
                "lambda_cf",
                "temperature",
                "max_mutants",
                "hidden",
                "window",
                "threads",
                "token_cost",
                "kinds",
            )
        },
        "wall_s": round(time.perf_counter() - started, 1),
    }
    if args.save:
        RESULTS.mkdir(parents=True, exist_ok=True)
        target = RESULTS / f"{args.name}.json"
        temp_path = target.with_name(f".{args.name}.json.tmp")
        temp_path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        temp_path.replace(target)
    if args.json:
        print(json.dumps(report))
    else:
        print(
            f"ratio {report['ratio']} (cf/global steps to 90% of optimum), "
            f"SFT invalid {report['sft_invalid_rate']:.1%}, seeds {args.seeds}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
