"""Does counterfactual credit make GRPO learn faster? Simulator v2, paired seeds, four arms.

The environment is :mod:`lemon.learning.simulator_v2` (a simulator, not a benchmark: closed-form
R_orch, optimum known, needs the task read). Each seed has its own SFT warm start (a small GRU
encoder-decoder policy, :class:`simloop.GruPolicy` in ``simloop.py`` beside this file, initialised
and trained with the seed, on its own draw of the simulator's stingy teacher rows: right roles and
duties, each tier one too low with probability 0.6) and its own λ calibration on that warm start,
so the bootstrap over seeds covers the warm start's variance as well as the sampling's. Then, per
seed, four GRPO arms start from that seed's warm start with the same task stream
(``tasks_per_step`` fresh tasks per step, the same for every arm of a seed) and the same sampling
generator seed:

- ``global``: plain GRPO (group-normalised advantages only), group size ``G``;
- ``paper``: counterfactual credit with the paper's kinds (``drop_dependency``,
  ``rollback_role``, ``downgrade_capacity``), per-mutant ``Δc = R − R(m)``;
- ``two_way``: counterfactual credit with the two-way edits added (``upgrade_capacity``,
  ``remove_agent``): a capacity field is scored at every tier and credited ``R − mean over
  tiers``, presence fields ``R(present) − R(absent)`` (:func:`lemon_train.credit.field_credits`);
- ``global_cost``: plain GRPO with ``G`` raised until it spends as many worker calls as
  ``two_way`` (calls counted with a reuse cache living for one generation batch, as the
  engine's cache would answer them; calibrated on the warm start's samples).

The loop is ``simloop.py`` beside this file (the trainer's reward function and credit
functions, TRL's dapo loss gradient at ratio 1; see there for what differs from
``lemon train grpo``).
Every ``eval_every`` steps the greedy policy writes a spec for each of 64 fixed held-out tasks;
its expected R over them, divided by their optimum R* (Σ R / Σ R*), is the curve. From it:
steps to reach ``target`` (0.8) of R* (linear interpolation between evaluations; a run that
never gets there counts as ``steps + eval_every``, flagged), the cumulative worker calls at that
point, and the area under the curve (its mean level over the run).

Headline figures (ratios of means over seeds, each with a 95% bootstrap interval over seeds,
resampled as pairs; paired differences beside them):

- ``ratio``: steps to 80%, ``two_way`` / ``global`` (equal G; goal ≤ 0.6);
- ``cost_ratio``: worker calls to 80%, ``two_way`` / ``global_cost``;
- ``paper_kinds_ratio``: steps to 80%, ``paper`` / ``global``;
- ``task_blind_share``: the best task-blind spec's share of R* on the held-out tasks
  (goal ≤ 0.7), beside a uniform-random policy's, the best policy that reads roles and duties
  but fixes every tier (``fixed_tier_share``), and the stingy teacher's greedy spec's.

Run: ``lemon bench learning --json`` (``--save`` writes ``results/`` beside this file);
``--quick`` for a smoke run. Uses ``--workers`` processes (default 2, one torch thread each).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
HELD_OUT_SEED = 777
SFT_SEED = 500
STREAM_SEED = 10_000
CALIBRATION_SEED = 20_000
ARMS = ("global", "paper", "two_way", "global_cost")


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="lemon bench learning", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true", help="tiny settings (a smoke run)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=75, help="GRPO steps per arm")
    parser.add_argument(
        "--eval-every", type=int, default=5, help="steps between greedy evaluations"
    )
    parser.add_argument("--tasks-per-step", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=8, help="G of the equal-G arms")
    parser.add_argument("--lr", type=float, default=3e-4, help="GRPO learning rate (Adam)")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--lambda-cf", default="auto", help="a number, or auto: 1 / σ_group")
    parser.add_argument("--target", type=float, default=0.8, help="share of R* to reach")
    parser.add_argument("--sft-steps", type=int, default=600)
    parser.add_argument("--sft-lr", type=float, default=3e-3)
    parser.add_argument("--sft-rows", type=int, default=2048)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--held-out", type=int, default=64)
    parser.add_argument("--max-new", type=int, default=100, help="completion tokens at most")
    parser.add_argument("--max-group", type=int, default=96, help="cap on the cost-matched G")
    parser.add_argument("--workers", type=int, default=2, help="processes running arms")
    parser.add_argument("--bootstrap", type=int, default=10_000)
    parser.add_argument("--workdir", help="keep files here (default: a temporary directory)")
    parser.add_argument("--save", action="store_true", help=f"write the result under {RESULTS}")
    parser.add_argument("--name", default="result", help="file name (NAME.json) for --save")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.steps, args.eval_every = 2, 4, 2
        args.tasks_per_step, args.group_size, args.sft_steps = 2, 4, 150
        args.sft_rows, args.held_out, args.max_group, args.bootstrap = 256, 8, 16, 200
    return args


# ── the simulator's own figures ──────────────────────────────────────────────────────────


def simulator_figures(held: list[Any]) -> dict[str, Any]:
    from lemon.learning import simulator_v2
    from lemon.spec.formatting import format_spec

    optimum = [simulator_v2.optimal(t)[1] for t in held]
    blind, blind_share = simulator_v2.task_blind_best(held)
    return {
        "optimum_mean": round(statistics.fmean(optimum), 4),
        "task_blind_share": round(blind_share, 4),
        "task_blind_spec": format_spec(blind),
        "uniform_share": round(simulator_v2.uniform_share(held), 4),
        "fixed_tier_share": round(simulator_v2.fixed_tier_best(held)[1], 4),
        "teacher_mode_share": round(simulator_v2.teacher_mode_share(held), 4),
    }


# ── the warm start and the calibration (main process) ────────────────────────────────────


def tokenizer_dir(work: Path) -> Path:
    """The policies' tokenizer (trained deterministically), saved under ``work``."""
    from lemon_testing.tiny_models import train_tokenizer

    tok_dir = work / "tokenizer"
    train_tokenizer().save_pretrained(tok_dir)
    return tok_dir


def warm_start(
    args: argparse.Namespace, work: Path, tok_dir: Path, seed: int
) -> tuple[Path, dict[str, Any]]:
    """Seed ``seed``'s SFT'd policy saved under ``work`` (its own rows, initialisation and
    batch order); the SFT report."""
    import torch
    from transformers import AutoTokenizer

    from lemon.learning import simulator_v2
    from simloop import Encoder, GruPolicy, evaluate_greedy, sample, sft

    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    encoder = Encoder(tokenizer)
    rng = random.Random(SFT_SEED + seed)
    rows = [
        (encoder.prompt(t.text), encoder.completion(simulator_v2.teacher_spec(t, rng)))
        for t in simulator_v2.make_tasks(args.sft_rows, seed=SFT_SEED + seed)
    ]
    torch.manual_seed(seed)
    policy = GruPolicy(len(tokenizer), hidden=args.hidden, bos=tokenizer.bos_token_id)
    started = time.perf_counter()
    losses = sft(
        policy, rows, steps=args.sft_steps, batch=32, lr=args.sft_lr, seed=seed, pad=encoder.pad
    )
    wall = time.perf_counter() - started
    base = work / f"sft-seed-{seed}.pt"
    torch.save(policy.state_dict(), base)
    held = simulator_v2.make_tasks(args.held_out, seed=HELD_OUT_SEED)
    fresh = simulator_v2.make_tasks(128 if not args.quick else 8, seed=HELD_OUT_SEED + 1)
    gen = torch.Generator().manual_seed(0)
    outs = sample(
        policy,
        [encoder.prompt(t.text) for t in fresh],
        eos=encoder.eos,
        max_new=args.max_new,
        temperature=args.temperature,
        generator=gen,
    )
    invalid = sum(not _valid(encoder, ids) for ids in outs) / len(outs)
    from lemon.reward import RewardConfig

    greedy = evaluate_greedy(policy, encoder, held, max_new=args.max_new, rewards=RewardConfig())
    return (
        base,
        {
            "seed": seed,
            "steps": args.sft_steps,
            "rows": args.sft_rows,
            "loss_first": round(losses[0], 4),
            "loss_last": round(statistics.fmean(losses[-20:]), 4),
            "invalid_rate": round(invalid, 4),
            "invalid_samples": len(outs),
            "greedy_optimum_share": round(greedy, 4),
            "wall_s": round(wall, 1),
        },
    )


def _valid(encoder: Any, ids: list[int]) -> bool:
    from lemon.spec.issues import SpecError
    from lemon.spec.validation import parse_spec

    try:
        parse_spec(encoder.decode([t for t in ids if t != encoder.eos]))
    except SpecError:
        return False
    return True


def _configs(lam: float) -> dict[str, Any]:
    from lemon.learning.training_config import CounterfactualConfig
    from lemon.spec.mutations import PAPER_KINDS, TWO_WAY_KINDS

    return {
        "global": CounterfactualConfig(enabled=False),
        "paper": CounterfactualConfig(kinds=list(PAPER_KINDS), max_mutants=64, lambda_cf=lam),
        "two_way": CounterfactualConfig(
            kinds=[*PAPER_KINDS, *TWO_WAY_KINDS], max_mutants=64, lambda_cf=lam
        ),
    }


def calibrate(args: argparse.Namespace, tok_dir: Path, base: Path, seed: int) -> dict[str, Any]:
    """λ_cf (auto: 1 / the mean within-group σ of R at the warm start) and the cost-matched G:
    the smallest group size whose samples, counted with the batch's reuse cache, cost as many
    worker calls as ``two_way``'s G samples and their mutants (means over calibration tasks)."""
    import asyncio

    import torch

    from lemon.learning import simulator_v2
    from lemon.reward import RewardConfig
    from lemon_train.rewards import SimulatorV2Reward
    from simloop import group_std, sample

    encoder, policy = _load(args, tok_dir, base)
    tasks = simulator_v2.make_tasks(16 if not args.quick else 2, seed=CALIBRATION_SEED + seed)
    g, top = args.group_size, args.max_group
    gen = torch.Generator().manual_seed(CALIBRATION_SEED + seed)
    outs = sample(
        policy,
        [encoder.prompt(t.text) for t in tasks for _ in range(top)],
        eos=encoder.eos,
        max_new=args.max_new,
        temperature=args.temperature,
        generator=gen,
    )
    configs = _configs(1.0)

    def score(name: str, task: Any, ids: list[list[int]]) -> tuple[list[float], int]:
        reward = SimulatorV2Reward(
            encoder.decode, rewards=RewardConfig(), counterfactual=configs[name]
        )
        row = simulator_v2.task_row(task)
        stripped = [[t for t in c if t != encoder.eos] for c in ids]
        got = asyncio.run(
            reward(
                prompts=[None] * len(ids),
                completions=[None] * len(ids),
                completion_ids=stripped,
                **{k: [v] * len(ids) for k, v in row.items()},
            )
        )
        return got, reward.last.worker_calls

    two_way_calls, global_calls, spreads = [], [], []
    for i, task in enumerate(tasks):
        mine = outs[i * top : (i + 1) * top]
        rewards, calls = score("two_way", task, mine[:g])
        two_way_calls.append(calls)
        spreads.append(group_std(rewards, g))
        global_calls.append([score("global", task, mine[:size])[1] for size in range(1, top + 1)])
    target = statistics.fmean(two_way_calls)
    matched = next(
        (
            size
            for size in range(g, top + 1)
            if statistics.fmean(row[size - 1] for row in global_calls) >= target
        ),
        top,
    )
    sigma = statistics.fmean(spreads)
    # a warm start whose groups never spread (a smoke run) falls back to λ = 1
    auto = 1.0 / sigma if sigma > 0 else 1.0
    lam = auto if args.lambda_cf == "auto" else float(args.lambda_cf)
    return {
        "seed": seed,
        "lambda_cf": round(lam, 4),
        "lambda_rule": "1 / mean within-group σ of R" if args.lambda_cf == "auto" else "given",
        "group_sigma": round(sigma, 4),
        "group_size": g,
        "group_size_cost_matched": matched,
        "calls_per_task_two_way": round(target, 2),
        "calls_per_task_global": round(statistics.fmean(row[g - 1] for row in global_calls), 2),
        "calls_per_task_global_matched": round(
            statistics.fmean(row[matched - 1] for row in global_calls), 2
        ),
        "tasks": len(tasks),
    }


def _load(args: argparse.Namespace, tok_dir: Path, base: Path) -> tuple[Any, Any]:
    import torch
    from transformers import AutoTokenizer

    from simloop import Encoder, GruPolicy

    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    policy = GruPolicy(len(tokenizer), hidden=args.hidden, bos=tokenizer.bos_token_id)
    policy.load_state_dict(torch.load(base))
    return Encoder(tokenizer), policy


# ── one arm of one seed (worker process) ─────────────────────────────────────────────────


def run_arm(job: dict[str, Any]) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    from lemon.learning import simulator_v2
    from lemon.reward import RewardConfig
    from lemon_train.rewards import SimulatorV2Reward
    from simloop import ArmConfig, evaluate_greedy, grpo_step

    args: argparse.Namespace = job["args"]
    seed, name = job["seed"], job["arm"]
    encoder, policy = _load(args, Path(job["tokenizer"]), Path(job["base"]))
    cf = _configs(job["lambda_cf"])["global" if name == "global_cost" else name]
    arm = ArmConfig(name, job["group_size"], cf)
    stream = simulator_v2.make_tasks(args.steps * args.tasks_per_step, seed=STREAM_SEED + seed)
    held = simulator_v2.make_tasks(args.held_out, seed=HELD_OUT_SEED)
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.lr)
    reward = SimulatorV2Reward(encoder.decode, rewards=RewardConfig(), counterfactual=cf, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    curve, calls, history = [job["start"]], [0], []
    total = 0
    started = time.perf_counter()
    for step in range(args.steps):
        tasks = stream[step * args.tasks_per_step : (step + 1) * args.tasks_per_step]
        stats = grpo_step(
            policy,
            optimizer,
            reward,
            encoder,
            tasks,
            arm=arm,
            temperature=args.temperature,
            max_new=args.max_new,
            generator=gen,
        )
        total += stats.worker_calls
        history.append(stats)
        if (step + 1) % args.eval_every == 0:
            curve.append(
                evaluate_greedy(policy, encoder, held, max_new=args.max_new, rewards=RewardConfig())
            )
            calls.append(total)
    wall = time.perf_counter() - started
    print(f"arm {name} seed {seed} (G {job['group_size']}): {wall:.0f} s", file=sys.stderr)
    steps_to, calls_to = first_passage(curve, calls, args.target, args.eval_every)
    steps_90, _ = first_passage(curve, calls, 0.9, args.eval_every)
    first, last = history[: args.eval_every], history[-args.eval_every :]
    kinds = sorted({k for s in history for k in s.delta_by_kind})
    return {
        "seed": seed,
        "arm": name,
        "group_size": job["group_size"],
        "curve": [round(v, 4) for v in curve],
        "worker_calls": calls,
        "steps_to_target": round(steps_to, 2) if steps_to is not None else None,
        "calls_to_target": round(calls_to) if calls_to is not None else None,
        "reached": steps_to is not None,
        "steps_to_90": round(steps_90, 2) if steps_90 is not None else None,
        "auc": round(area(curve), 4),
        "final": round(curve[-1], 4),
        "entropy_first": round(statistics.fmean(s.entropy for s in first), 4),
        "entropy_last": round(statistics.fmean(s.entropy for s in last), 4),
        "zero_spread": round(statistics.fmean(s.zero_spread for s in history), 4),
        "zero_spread_last": round(statistics.fmean(s.zero_spread for s in last), 4),
        "valid_last": round(statistics.fmean(s.valid for s in last), 4),
        "sampled_reward_last": round(statistics.fmean(s.reward for s in last), 4),
        "span_share": round(statistics.fmean(s.span_share for s in history), 4),
        "mutants_per_step": round(statistics.fmean(s.mutants for s in history), 1),
        "delta_by_kind": {
            k: round(
                statistics.fmean(s.delta_by_kind[k] for s in history if k in s.delta_by_kind), 4
            )
            for k in kinds
        },
        "wall_s": round(wall, 1),
    }


def first_passage(
    curve: list[float], calls: list[int], target: float, every: int
) -> tuple[float | None, float | None]:
    """Steps (and cumulative calls) at which the curve first reaches ``target``, linearly
    interpolated between evaluations; ``(None, None)`` when it never does."""
    for i, value in enumerate(curve):
        if value >= target:
            if i == 0:
                return 0.0, 0.0
            low = curve[i - 1]
            frac = (target - low) / (value - low)
            return (i - 1 + frac) * every, calls[i - 1] + frac * (calls[i] - calls[i - 1])
    return None, None


def area(curve: list[float]) -> float:
    """Mean level of the curve over the run (trapezoids, evaluations equally spaced)."""
    if len(curve) < 2:
        return curve[0] if curve else 0.0
    return sum((a + b) / 2 for a, b in itertools.pairwise(curve)) / (len(curve) - 1)


# ── statistics over seeds ────────────────────────────────────────────────────────────────


def _bootstrap(pairs: list[tuple[float, float]], count: int, seed: int = 0) -> dict[str, Any]:
    """Ratio of means and mean paired difference of ``(a, b)`` pairs, with 95% percentile
    bootstrap intervals (seeds resampled with replacement, pairs kept together:
    :func:`lemon.scoring.stats.paired_bootstrap`)."""
    from lemon.scoring.stats import paired_bootstrap

    def ratio_of_means(a: Any, b: Any) -> float:
        return float(a.mean() / b.mean()) if b.mean() else float("inf")

    def difference(a: Any, b: Any) -> float:
        return float((a - b).mean())

    first, second = [a for a, _ in pairs], [b for _, b in pairs]
    a, b = statistics.fmean(first), statistics.fmean(second)

    def ci(statistic: Any) -> list[float]:
        if statistic is ratio_of_means and not any(second):
            return [float("inf"), float("inf")]  # every draw divides by zero
        lo, hi = paired_bootstrap(statistic, first, second, rounds=count, seed=seed)
        return [round(lo, 4), round(hi, 4)]

    return {
        "ratio": round(a / b if b else float("inf"), 4),
        "ratio_ci95": ci(ratio_of_means),
        "difference": round(a - b, 4),
        "difference_ci95": ci(difference),
        "pairs": [[round(a, 2), round(b, 2)] for a, b in pairs],
    }


def _censored(run: dict[str, Any], key: str, cap: float) -> float:
    value = run[key]
    return float(value) if value is not None else cap


def summarise(
    args: argparse.Namespace, runs: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    by = {(r["seed"], r["arm"]): r for r in runs}
    seeds = sorted({r["seed"] for r in runs})
    cap_steps = args.steps + args.eval_every

    def cap_calls(run: dict[str, Any]) -> float:
        # a run that never reaches the target: its calls over the budget plus one interval
        calls: list[int] = run["worker_calls"]
        return calls[-1] + (calls[-1] - calls[-2] if len(calls) > 1 else 0)

    def steps(arm: str, seed: int) -> float:
        return _censored(by[(seed, arm)], "steps_to_target", cap_steps)

    def calls(arm: str, seed: int) -> float:
        run = by[(seed, arm)]
        return _censored(run, "calls_to_target", cap_calls(run))

    headline = {
        "ratio": _bootstrap(
            [(steps("two_way", s), steps("global", s)) for s in seeds], args.bootstrap
        ),
        "cost_ratio": _bootstrap(
            [(calls("two_way", s), calls("global_cost", s)) for s in seeds], args.bootstrap
        ),
        "paper_kinds_ratio": _bootstrap(
            [(steps("paper", s), steps("global", s)) for s in seeds], args.bootstrap
        ),
        "auc_two_way_minus_global": _bootstrap(
            [(by[(s, "two_way")]["auc"], by[(s, "global")]["auc"]) for s in seeds],
            args.bootstrap,
        ),
    }
    arms = {}
    for arm in ARMS:
        mine = [by[(s, arm)] for s in seeds]
        arms[arm] = {
            "group_size": mine[0]["group_size"],
            "reached": sum(r["reached"] for r in mine),
            "steps_to_target": [r["steps_to_target"] for r in mine],
            "steps_to_90": [r["steps_to_90"] for r in mine],
            "mean_steps_to_target": round(statistics.fmean(steps(arm, s) for s in seeds), 2),
            "calls_to_target": [r["calls_to_target"] for r in mine],
            "mean_calls_to_target": round(statistics.fmean(calls(arm, s) for s in seeds)),
            "total_calls": round(statistics.fmean(r["worker_calls"][-1] for r in mine)),
            "auc": round(statistics.fmean(r["auc"] for r in mine), 4),
            "final": round(statistics.fmean(r["final"] for r in mine), 4),
            "entropy_first": round(statistics.fmean(r["entropy_first"] for r in mine), 4),
            "entropy_last": round(statistics.fmean(r["entropy_last"] for r in mine), 4),
            "zero_spread": round(statistics.fmean(r["zero_spread"] for r in mine), 4),
            "zero_spread_last": round(statistics.fmean(r["zero_spread_last"] for r in mine), 4),
            "span_share": round(statistics.fmean(r["span_share"] for r in mine), 4),
            "wall_s": round(statistics.fmean(r["wall_s"] for r in mine), 1),
        }
    return headline, arms


def seed_jobs(
    args: argparse.Namespace, work: Path, started: float
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Each seed's warm start and calibration, and the arms' jobs that start from them."""
    tok_dir = tokenizer_dir(work)
    starts, calibrations, jobs = [], [], []
    for seed in range(args.seeds):
        base, sft_report = warm_start(args, work, tok_dir, seed)
        calibration = calibrate(args, tok_dir, base, seed)
        print(
            f"seed {seed}: warm start and calibration at {time.perf_counter() - started:.0f} s: "
            f"{json.dumps(calibration)}",
            file=sys.stderr,
        )
        starts.append(sft_report)
        calibrations.append(calibration)
        jobs += [
            {
                "args": args,
                "seed": seed,
                "arm": arm,
                "tokenizer": str(tok_dir),
                "base": str(base),
                "lambda_cf": calibration["lambda_cf"],
                "start": sft_report["greedy_optimum_share"],
                "group_size": calibration["group_size_cost_matched"]
                if arm == "global_cost"
                else args.group_size,
            }
            for arm in ("global_cost", "two_way", "paper", "global")
        ]
    return starts, calibrations, jobs


def build_report(
    args: argparse.Namespace,
    runs: list[dict[str, Any]],
    *,
    figures: dict[str, Any],
    starts: list[dict[str, Any]],
    calibrations: list[dict[str, Any]],
    started: float,
    load_start: tuple[float, float, float],
) -> dict[str, Any]:
    """The benchmark's JSON object: the headline ratios, the arms, every seed's runs."""
    headline, arms = summarise(args, runs)
    usage = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(u.ru_utime + u.ru_stime for u in usage)
    report: dict[str, Any] = {
        "benchmark": "learning",
        "environment": "simulator v2 (lemon.learning.simulator_v2), GRU policy, "
        "experiments/credit-in-simulator/simloop.py",
        "ratio": headline["ratio"]["ratio"],
        "ratio_ci95": headline["ratio"]["ratio_ci95"],
        "cost_ratio": headline["cost_ratio"]["ratio"],
        "cost_ratio_ci95": headline["cost_ratio"]["ratio_ci95"],
        "paper_kinds_ratio": headline["paper_kinds_ratio"]["ratio"],
        "paper_kinds_ratio_ci95": headline["paper_kinds_ratio"]["ratio_ci95"],
        "task_blind_share": figures["task_blind_share"],
        "seeds": args.seeds,
        "target": args.target,
        "goal": "ratio <= 0.6; task_blind_share <= 0.7",
        "headline": headline,
        "simulator": figures,
        "sft": starts,
        "calibration": calibrations,
        "arms": arms,
        "per_seed": sorted(runs, key=lambda r: (r["seed"], ARMS.index(r["arm"]))),
        "settings": {
            key: getattr(args, key)
            for key in (
                "quick",
                "seeds",
                "steps",
                "eval_every",
                "tasks_per_step",
                "group_size",
                "lr",
                "temperature",
                "lambda_cf",
                "target",
                "sft_steps",
                "sft_lr",
                "sft_rows",
                "hidden",
                "held_out",
                "max_new",
                "max_group",
                "workers",
            )
        },
        "wall_s": round(time.perf_counter() - started, 1),
        "cpu_s": round(cpu, 1),
        "load_average": {
            "start": [round(x, 2) for x in load_start],
            "end": [round(x, 2) for x in os.getloadavg()],
        },
        "cores": os.cpu_count(),
    }
    return report


def main(argv: list[str] | None = None) -> int:
    args = _arguments(list(sys.argv[1:] if argv is None else argv))
    import torch

    torch.set_num_threads(1)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    started = time.perf_counter()
    load_start = os.getloadavg()
    from lemon.learning import simulator_v2

    with tempfile.TemporaryDirectory(prefix="lemon-bench-learning-") as temp:
        work = Path(args.workdir) if args.workdir else Path(temp)
        work.mkdir(parents=True, exist_ok=True)
        with contextlib.redirect_stdout(sys.stderr):
            held = simulator_v2.make_tasks(args.held_out, seed=HELD_OUT_SEED)
            figures = simulator_figures(held)
            starts, calibrations, jobs = seed_jobs(args, work, started)
            if args.workers > 1:
                with ProcessPoolExecutor(args.workers) as pool:
                    runs = list(pool.map(run_arm, jobs))
            else:
                runs = [run_arm(job) for job in jobs]
    report = build_report(
        args, runs, figures=figures, starts=starts, calibrations=calibrations,
        started=started, load_start=load_start,
    )  # fmt: skip
    if args.save:
        from lemon.atomic import write_json

        RESULTS.mkdir(parents=True, exist_ok=True)
        write_json(RESULTS / f"{args.name}.json", report)
    if args.json:
        print(json.dumps(report))
    else:
        print(
            f"ratio {report['ratio']} {report['ratio_ci95']} (steps to {args.target:.0%} of R*, "
            f"two-way / global), cost_ratio {report['cost_ratio']} {report['cost_ratio_ci95']}, "
            f"paper_kinds_ratio {report['paper_kinds_ratio']}, task_blind_share "
            f"{report['task_blind_share']}, seeds {args.seeds}, {report['wall_s']} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
