"""One learned policy over the mixed workload (issue 48): configs, the choice on validation, and
the figures the runs give.

``python experiments/mixed-policy/mixed_policy.py configs`` decides which benchmarks take part
(those whose train and test tables are complete, as ``lemon report --mix`` decides:
:func:`lemon.evals.mixed.discover`, :func:`~lemon.evals.mixed.load_bench`,
:func:`~lemon.evals.mixed.ready`), pins them and their teams in ``plan.json`` and writes the
configs: per seed (0, 1, 2) an SFT warm start of its own on the router teacher's rows of every
benchmark's fit part (``lemon teacher tables --router logistic``: per item the team a text
router cross-fitted on the kind's fit items picks; prompt ``lemon-policy-prompt/v3``, every item
taught once per cost weight of :data:`COST_WEIGHTS`; ``balance`` draws :data:`SFT_ROWS` of them,
an equal share per benchmark, for one pass of :data:`SFT_STEPS` steps; at 150 steps these rows
beat the cost-sensitive ones by +0.109 [+0.007, +0.211] on validation, README "The third
pilot"), then two GRPO arms from it, plain GRPO
(``global``) and two-way counterfactual credit (``credit``), on the fit part of every train
table, each row drawing its cost weight, scored on the validation part
(:func:`lemon.data.splits.validation_ids`) every :data:`HELDOUT_STEPS` steps and at the last;
both arms train to the same worker tokens (:data:`WORKER_BUDGET`), so they compare there.

``choose`` reads the six GRPO runs' held-out (validation) curves and picks the run and step
with the best validation reward (step 0 is the seed's SFT warm start): the headline policy,
chosen without reading a test table. A step before a run's last is published from that run's
checkpoint (``lemon train grpo --config ... --checkpoint STEP``: the weights that were scored;
the runs keep every checkpoint, saved at each scored step).

``summary`` reads what the runs wrote (``report/report.json``: ``lemon report --mix`` with the
policies' test evaluations; ``reports/<run>/<benchmark>.json``: ``lemon report TABLE`` with the
chosen run's; ``grpo/<arm>-s<seed>/metrics.jsonl``; ``evals/``; ``chosen.json``;
``commands.log``) and writes ``summary.json`` (README.md says what each key is). A key whose
input is missing is null, and ``missing`` says which input and why; nothing is estimated in
its place.

The run commands are in ``run.sh``; this file runs no model.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent
PROMPT = "lemon-policy-prompt/v3"
COST_WEIGHTS = (0.0, 0.02, 0.1, 0.2)
"""R_orch's cost per 1,000 tier-priced worker tokens the rows and GRPO's tasks state: free,
R_orch's default (what a v3 prompt states when none is given, so what ``lemon eval`` asks at),
and two at which a large agent's ~1,000 tier-priced tokens weigh a tenth and a fifth of a
success."""
REWARDS = {"token_cost": 0.02, "agent_cost": 0.01, "edge_cost": 0.005}
"""R_orch's weights; ``token_cost`` is replaced per task by its drawn cost weight."""
SEEDS = (0, 1, 2)
ARMS = ("global", "credit")
STEPS = 80
"""A GRPO run's step cap; :data:`WORKER_BUDGET` ends it first."""
WORKER_BUDGET = 200_000.0
"""Both arms train to the same worker tokens (``hyperparameters.max_worker_tokens``): each run
stops after the step at which its tier-priced worker tokens (every distinct worker call read,
from the table or live, counted once) reach this. The third pilot read about 6,500 a step with
credit and 5,300 without, so credit stops near step 31 and global near 38: the arms compare at
equal worker tokens, not at equal steps."""
HELDOUT_STEPS = 10
"""Validation every 10 steps (and at step 0, the SFT warm start): the steps a run can be cut
at when its validation reward peaks before its last step."""
SFT_STEPS = 300
"""The SFT warm start's step budget: one pass over :data:`SFT_ROWS` balanced rows (two epochs of
every row, 3,033 steps over the three first benchmarks, take about 17 hours a seed on two CPU
cores; the pilot's 120 steps were too few to tell the kinds apart)."""
SFT_BATCH = 8
SFT_ROWS = SFT_STEPS * SFT_BATCH
"""Rows drawn for SFT (``balance``), the same number from every benchmark: the rows weighed by
fit items taught AQuA (7% of them) too little to write its teams."""
TASKS_PER_STEP = 4
GROUP_SIZE = 4
SPEC_TOKENS = 192
"""The longest library spec (a vote of three teams and its voter) is about 460 characters."""
LORA = {"r": 16, "alpha": 32, "dropout": 0.0, "top_layers": 8, "merge": False}
POLICIES = "policies/mixed"
TABLES = "tables"
CHOSEN = "chosen"
"""The chosen run's name in the mixed report."""
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
        9: 2.262, 10: 2.228}  # fmt: skip
"""Student's t, 97.5th percentile, by degrees of freedom."""


def _write(path: Path, data: dict[str, Any], comment: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(f"# {line}\n" for line in comment.splitlines())
    path.write_text(text + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


# -- which benchmarks --------------------------------------------------------------------------


def complete_benchmarks(tables: Path) -> tuple[dict[str, list[str]], dict[str, str]]:
    """The benchmarks whose tables are complete, with their teams (the greedy teams complete
    on both tables), and why each other benchmark waits: what ``lemon report --mix`` reads."""
    from lemon.evals import mixed
    from lemon.tables.store import Table, TableError

    ready: dict[str, list[str]] = {}
    waiting: dict[str, str] = {}
    for train, test in mixed.discover(str(tables)):
        name = Path(test).name.removesuffix("-test")
        try:
            bench = mixed.load_bench(Table.open(train), Table.open(test))
        except (ValueError, TableError) as exc:
            waiting[name] = str(exc)
            continue
        why = mixed.ready(bench)
        if why is None:
            ready[bench.name] = list(bench.teams)
        else:
            waiting[bench.name] = why
    return ready, waiting


def plan(res: Path = RESULTS) -> dict[str, Any]:
    path = res / "plan.json"
    if not path.is_file():
        raise SystemExit(f"{_rel(path)}: none yet (python {_rel(Path(__file__))} configs)")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


# -- configs -----------------------------------------------------------------------------------


def _train_tables(benchmarks: Sequence[str]) -> str:
    return ",".join(f"{TABLES}/{b}-train" for b in benchmarks)


def grpo_config(benchmarks: Sequence[str], arm: str, seed: int) -> dict[str, Any]:
    tables = _train_tables(benchmarks)
    name = f"grpo-{arm}-s{seed}"
    return {
        "stage": "grpo",
        "base_model": f"{POLICIES}/sft-s{seed}",
        "data": f"table:{tables}:0:0:fit",
        "heldout": f"table:{tables}:0:0:validation",
        "heldout_steps": HELDOUT_STEPS,
        "output_dir": f"{POLICIES}/{name}",
        "policy": "mixed",
        "version": name,
        "prompt_format": PROMPT,
        "lora": LORA,
        "profile": "embedded",
        "rewards": REWARDS,
        "hyperparameters": {
            "learning_rate": 5.0e-5,
            "lr_scheduler": "constant",
            "max_steps": STEPS,
            "max_worker_tokens": WORKER_BUDGET,
            "per_device_batch_size": TASKS_PER_STEP,
            "group_size": GROUP_SIZE,
            "max_completion_length": SPEC_TOKENS,
            "temperature": 1.0,  # at 0.7 plain GRPO changed no greedy spec (the fourth pilot)
            "loss_type": "dapo",
            "save_steps": HELDOUT_STEPS,  # a checkpoint at every scored step, all kept:
            "keep_checkpoints": None,  # the chosen step is published from its checkpoint
            "seed": seed,
            "worker_max_tokens": 300,
            "live_calls": False,
            "skip_flat_groups": True,
            "cost_weights": list(COST_WEIGHTS),
        },
        "counterfactual": {
            "enabled": arm == "credit",
            "lambda_cf": 1.0,
            "kinds": [
                "drop_dependency",
                "rollback_role",
                "downgrade_capacity",
                "upgrade_capacity",
                "remove_agent",
            ],
            "max_mutants": 2,
        },
    }


def configs(tables: Path = ROOT / TABLES) -> list[Path]:
    ready, waiting = complete_benchmarks(tables)
    if not ready:
        raise SystemExit(f"{tables}: no benchmark is complete yet ({waiting})")
    benchmarks = list(ready)
    (RESULTS / "plan.json").write_text(
        json.dumps(
            {"benchmarks": benchmarks, "teams": ready, "waiting": waiting,
             "cost_weights": list(COST_WEIGHTS), "seeds": list(SEEDS), "arms": list(ARMS),
             "steps": STEPS, "worker_budget": WORKER_BUDGET, "heldout_steps": HELDOUT_STEPS},
            indent=1,
        ) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    written = [RESULTS / "plan.json"]
    what = ", ".join(benchmarks)
    for seed in SEEDS:
        sft = {
            "stage": "sft",
            "base_model": "packaged",
            "data": "experiments/mixed-policy/rows-router.jsonl",
            "output_dir": f"{POLICIES}/sft-s{seed}",
            "policy": "mixed",
            "version": f"sft-s{seed}",
            "prompt_format": PROMPT,
            "lora": LORA,
            "hyperparameters": {
                "learning_rate": 2.0e-4,
                "epochs": 1,  # one pass over the SFT_ROWS balanced rows: SFT_STEPS steps
                "per_device_batch_size": SFT_BATCH,
                "max_length": 768,
                "save_steps": 25,
                "seed": seed,
            },
        }
        path = RESULTS / "configs" / f"sft-s{seed}.yaml"
        _write(
            path,
            sft,
            f"SFT warm start on the router teacher's rows, seed {seed}: fit parts of {what}",
        )
        written.append(path)
        for arm in ARMS:
            path = RESULTS / "configs" / f"grpo-{arm}-s{seed}.yaml"
            kind = "plain GRPO" if arm == "global" else "two-way counterfactual credit"
            _write(
                path,
                grpo_config(benchmarks, arm, seed),
                f"GRPO, {kind}, seed {seed}, from that seed's SFT: fit parts of {what}; "
                "validation parts held out",
            )
            written.append(path)
    return written


def balance(
    rows: Path, benchmarks: Sequence[str], total: int = SFT_ROWS, seed: int = 0
) -> list[dict[str, Any]]:
    """``total`` SFT rows, an equal share from each benchmark's ``rows/<benchmark>.jsonl``
    (cost-sensitive: a team's rows already repeat in proportion to its reward), or, when
    ``rows`` is a file (the router teacher's rows of every benchmark), from its rows of each
    benchmark (``provenance.benchmark``); drawn without replacement while a benchmark has rows
    left, then again from all of them; shuffled."""
    import random

    if not benchmarks:
        raise ValueError("no benchmark to draw rows from")
    rng = random.Random(seed)
    share, extra = divmod(total, len(benchmarks))
    pools: dict[str, list[dict[str, Any]]] = {}
    if rows.is_file():
        for line in rows.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                pools.setdefault(str(row["provenance"]["benchmark"]), []).append(row)
    drawn: list[dict[str, Any]] = []
    for k, bench in enumerate(benchmarks):
        path = rows if rows.is_file() else rows / f"{bench}.jsonl"
        if not path.is_file():
            raise FileNotFoundError(f"{_rel(path)}: missing (run.sh rows)")
        pool = pools.get(bench, []) if rows.is_file() else [
            json.loads(line) for line in path.read_text().splitlines() if line.strip()
        ]  # fmt: skip
        if not pool:
            raise ValueError(f"{_rel(path)}: no rows" + (f" of {bench}" if rows.is_file() else ""))
        want = share + (1 if k < extra else 0)
        while want > 0:
            take = rng.sample(pool, min(want, len(pool)))
            drawn += take
            want -= len(take)
    rng.shuffle(drawn)
    return drawn


# -- reading the runs --------------------------------------------------------------------------


def _metrics(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def metrics_path(arm: str, seed: int, res: Path = RESULTS) -> Path:
    return res / "grpo" / f"{arm}-s{seed}" / "metrics.jsonl"


def heldout(rows: Sequence[dict[str, Any]]) -> dict[int, float]:
    """Validation reward by step (the last row of a step wins: a resumed run logs it again)."""
    return {int(r["step"]): float(r["heldout/reward"]) for r in rows if "heldout/reward" in r}


def last_step(rows: Sequence[dict[str, Any]]) -> int | None:
    """The step a finished run ended at (its worker budget's or the step cap): the trainer's
    closing row (``train_runtime``); None while it runs or after it died."""
    ends = [int(r["step"]) for r in rows if "train_runtime" in r]
    return ends[-1] if ends else None


def _run_state(
    arm: str, seed: int, res: Path = RESULTS
) -> tuple[dict[int, float] | None, int | None, str | None]:
    """A finished run's validation reward by step, its last step, or why there is none."""
    path = metrics_path(arm, seed, res)
    rows = _metrics(path)
    if not rows:
        return None, None, f"{_rel(path)}: missing"
    held = heldout(rows)
    last = last_step(rows)
    if last is None:
        seen = max(held, default=None)
        return None, None, f"{_rel(path)}: not finished (last validation score: step {seen})"
    if last not in held:
        return None, None, f"{_rel(path)}: no validation score at its last step, {last}"
    return held, last, None


def _at_step(rows: Sequence[dict[str, Any]], key: str, step: int) -> float | None:
    """``key``'s value logged at ``step`` (the last such row wins), if any."""
    values = [float(r[key]) for r in rows if key in r and int(r["step"]) == step]
    return values[-1] if values else None


def choose(res: Path = RESULTS) -> dict[str, Any]:
    """The best validation reward over every run and scored step (step 0: the SFT warm start);
    ties to the earlier step, then global before credit, then the lower seed."""
    candidates: list[dict[str, Any]] = []
    missing = []
    for seed in SEEDS:
        for arm in ARMS:
            held, last, why = _run_state(arm, seed, res)
            if held is None:
                missing.append(why)
                continue
            for step, reward in sorted(held.items()):
                if step == 0:
                    name = f"sft-s{seed}"
                elif step == last:
                    name = f"grpo-{arm}-s{seed}"
                else:
                    name = f"grpo-{arm}-s{seed}-at{step}"
                candidates.append({"run": name, "arm": arm if step else "sft", "seed": seed,
                                   "step": step, "validation_reward": reward})  # fmt: skip
    if missing:
        raise SystemExit("choose needs every GRPO run finished: " + "; ".join(map(str, missing)))
    order = {arm: k for k, arm in enumerate(("sft", *ARMS))}
    best = min(
        candidates,
        key=lambda c: (-c["validation_reward"], c["step"], order[c["arm"]], c["seed"]),
    )
    return {
        **best,
        "rule": "the highest validation reward (heldout/reward in the GRPO runs' metrics.jsonl, "
        "the greedy policy on the train tables' validation parts) over every run and scored "
        "step, step 0 being the seed's SFT warm start; ties to the earlier step, then global "
        "before credit, then the lower seed. No test table is read.",
        "candidates": list({c["run"]: c for c in reversed(candidates)}.values())[::-1],
    }


def t_interval(values: Sequence[float]) -> list[float] | None:
    """Student's t 95% interval of the mean (None from fewer than two values)."""
    n = len(values)
    if n < 2 or n - 1 not in T975:
        return None
    half = T975[n - 1] * statistics.stdev(values) / math.sqrt(n)
    mean = statistics.fmean(values)
    return [round(mean - half, 4), round(mean + half, 4)]


def reward_difference(res: Path = RESULTS) -> dict[str, Any]:
    """Credit's final validation reward minus global's, paired by seed: each run's last step,
    where its worker budget ended it (so at equal worker tokens)."""
    per_seed: list[dict[str, Any]] = []
    diffs: list[float] = []
    why: list[str | None] = []
    for seed in SEEDS:
        finals: dict[str, float] = {}
        lasts: dict[str, int] = {}
        tokens: dict[str, float | None] = {}
        for arm in ARMS:
            held, last, reason = _run_state(arm, seed, res)
            if held is None or last is None:
                why.append(reason)
            else:
                finals[arm], lasts[arm] = held[last], last
                rows = _metrics(metrics_path(arm, seed, res))
                tokens[arm] = _at_step(rows, "worker_priced_tokens_total", last)
        if len(finals) == len(ARMS):
            diff = finals["credit"] - finals["global"]
            diffs.append(round(diff, 4))
            per_seed.append({"seed": seed, "global": round(finals["global"], 4),
                             "credit": round(finals["credit"], 4),
                             "difference": round(diff, 4), "steps": lasts,
                             "worker_tokens": tokens})  # fmt: skip
    every = len(per_seed) == len(SEEDS)  # a mean over some seeds is not the figure asked for
    return {
        "value": round(statistics.fmean(diffs), 4) if every else None,
        "ci95": t_interval(diffs) if every else None,
        "per_seed": per_seed,
        "missing": why,
    }


def token_overhead(res: Path = RESULTS) -> dict[str, Any]:
    """Credit's worker cost over global's at equal steps (both arms' cumulative figures at the
    earlier of their two last steps, the paper's reading of its training curves): tokens where
    the runs log their distinct calls' tokens (``worker_priced_tokens_total``), and distinct
    worker calls (``worker_calls_total``), each a ratio of sums over the seeds both arms
    finished."""
    totals: dict[str, dict[str, list[float]]] = {
        key: {arm: [] for arm in ARMS}
        for key in ("worker_priced_tokens_total", "worker_calls_total")
    }
    why = []
    seeds = []
    for seed in SEEDS:
        rows = {arm: _metrics(metrics_path(arm, seed, res)) for arm in ARMS}
        done = {arm: _run_state(arm, seed, res) for arm in ARMS}
        if any(held is None for held, _, _ in done.values()):
            why += [reason for held, _, reason in done.values() if held is None]
            continue
        seeds.append(seed)
        step = min(last for _, last, _ in done.values() if last is not None)
        for key, by_arm in totals.items():
            for arm in ARMS:
                value = _at_step(rows[arm], key, step)
                by_arm[arm].append(math.nan if value is None else value)
    out: dict[str, Any] = {"seeds": seeds, "missing": why}  # per seed: [credit, global]
    for key, name in (("worker_priced_tokens_total", "tokens"), ("worker_calls_total", "calls")):
        credit, plain = totals[key]["credit"], totals[key]["global"]
        if len(seeds) < len(SEEDS) or any(math.isnan(v) for v in credit + plain):
            out[name] = None
            if len(seeds) == len(SEEDS):
                out["missing"] = [*out["missing"], f"{key}: not logged by every run"]
            continue
        out[name] = round(sum(credit) / sum(plain), 4) if sum(plain) else None
        out[f"{name}_per_seed"] = {
            str(s): [c, p] for s, c, p in zip(seeds, credit, plain, strict=True)
        }
    return out


def _items(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def versus(a: str, b: str, benchmarks: Sequence[str], where: Path, seed: int = 0) -> dict[str, Any]:
    """Version ``a`` minus version ``b`` on the items both answered under ``where``
    (``validation/`` or ``evals/``: ``<version>/<benchmark>/items.jsonl``): per benchmark and
    over the mix (each benchmark weighing the same), the paired difference in accuracy and its
    95% bootstrap interval (the mixed report's: items resampled, each weighted 1 / its
    benchmark's item count), and both versions' mean full cost."""
    import numpy as np

    from lemon.scoring.stats import paired_bootstrap

    diffs: list[Any] = []
    weights: list[Any] = []
    out: dict[str, Any] = {}
    cost: dict[str, list[float]] = {a: [], b: []}
    for bench in benchmarks:
        got = {}
        for name in (a, b):
            path = where / name / bench / "items.jsonl"
            if not path.is_file():
                raise FileNotFoundError(f"{_rel(path)}: missing")
            got[name] = {str(r["id"]): r for r in _items(path)}
        ids = sorted(set(got[a]) & set(got[b]))
        if not ids:
            raise ValueError(f"{bench}: {a} and {b} answered no item in common")
        d = np.array([float(bool(got[a][i]["correct"])) - float(bool(got[b][i]["correct"]))
                      for i in ids])  # fmt: skip
        for name in (a, b):
            cost[name].append(statistics.fmean(float(got[name][i]["full_cost"]) for i in ids))
        out[bench] = {"n": len(ids), "difference": round(float(d.mean()), 4)}
        diffs.append(d)
        weights.append(np.full(len(ids), 1.0 / len(ids)))
    d_all, w_all = np.concatenate(diffs), np.concatenate(weights)
    lo, hi = paired_bootstrap(lambda d, w: float((d * w).sum() / w.sum()), d_all, w_all, seed=seed)
    out["mix"] = {
        "difference": round(float((d_all * w_all).sum() / w_all.sum()), 4),
        "ci95": [round(lo, 4), round(hi, 4)],
        "cost": {name: round(statistics.fmean(c), 1) for name, c in cost.items()},
    }
    return out


def test_figures(
    name: str, run: str, report: dict[str, Any] | None, benchmarks: Sequence[str], res: Path
) -> tuple[dict[str, Any] | None, str | None]:
    """The test accuracy and cost over the mix of the policy ``name`` in the mixed report, and
    the mean raw worker tokens per item of its evaluations ``evals/<run>/`` (equal weight per
    benchmark), or why not."""
    if report is None:
        return None, "report/report.json: missing"
    mix = report.get("mix", {}).get(name)
    if mix is None or "accuracy" not in mix:
        return None, f"report/report.json: no mix figures for {name} ({mix})"
    tokens = []
    for bench in benchmarks:
        path = res / "evals" / run / bench / "items.jsonl"
        if not path.is_file():
            return None, f"{_rel(path)}: missing"
        tokens.append(statistics.fmean(float(r["tokens"]) for r in _items(path)))
    return {
        "accuracy": mix["accuracy"],
        "cost": mix["cost"],
        "worker_tokens": round(statistics.fmean(tokens), 2),
    }, None


def summary(res: Path = RESULTS) -> dict[str, Any]:
    """Every figure issue 48 asks for, from the runs' outputs under ``res``."""
    missing: dict[str, str] = {}
    inputs: list[Path] = []
    the_plan = plan(res)
    inputs.append(res / "plan.json")
    benchmarks = list(the_plan["benchmarks"])
    out: dict[str, Any] = {"benchmarks": benchmarks}

    chosen_path = res / "chosen.json"
    chosen = json.loads(chosen_path.read_text()) if chosen_path.is_file() else None
    if chosen is None:
        missing["chosen"] = f"{_rel(chosen_path)}: missing (run.sh choose)"
    else:
        inputs.append(chosen_path)
    out["chosen"] = chosen

    report_path = res / "report" / "report.json"
    report = json.loads(report_path.read_text()) if report_path.is_file() else None
    if report is None:
        missing["report"] = f"{_rel(report_path)}: missing (run.sh report)"
    else:
        inputs.append(report_path)
    policy = None if report is None else report.get("mix", {}).get(CHOSEN)
    mix_keys = ("vs_best_fixed", "vs_best_fixed_ci95", "vs_max_expert", "vs_max_expert_ci95")
    if report is not None and (policy is None or "accuracy" not in policy):
        why = f"{_rel(report_path)}: no mix figures for {CHOSEN!r} ({policy})"
        policy = None
        for key in (*mix_keys, "policy_cost", "policy_accuracy", "policy_score"):
            missing[key] = why
    for key in mix_keys:
        out[key] = None if policy is None else policy[key]
    out["policy_accuracy"] = None if policy is None else policy["accuracy"]
    out["policy_cost"] = None if policy is None else policy["cost"]
    best = None if report is None else report["mix"].get("best_fixed")
    out["best_fixed_team"] = None if report is None else report.get("best_fixed_team")
    out["best_fixed_accuracy"] = None if best is None else best["accuracy"]
    out["best_fixed_cost"] = None if best is None else best["cost"]
    scores = {} if report is None else report["mix"].get("score", {})
    out["policy_score"] = None if policy is None else scores.get(CHOSEN)
    out["knn_score"] = scores.get("knn")
    null_score = (
        "report/report.json: the mix's score of {} is null (no replicated oracle on every "
        "benchmark, or no gap between it and the fixed teams' hull)"
    )
    if report is not None and scores.get("knn") is None:
        missing["knn_score"] = null_score.format("knn")
    if report is not None and policy is not None and scores.get(CHOSEN) is None:
        missing["policy_score"] = null_score.format(CHOSEN)
    out["per_benchmark"] = None
    if report is not None and policy is not None:
        out["per_benchmark"] = {
            b: {k: (report[b].get(CHOSEN) or {}).get(k) for k in ("accuracy", "cost", *mix_keys)}
            for b in benchmarks
        }
        out["pooled"] = {
            k: report["pooled"][CHOSEN].get(k) for k in ("accuracy", "cost", *mix_keys)
        }

    # headroom: is there anything above the noise for a router to win?
    ci = None if report is None else report["mix"].get("headroom_ci95")
    out["headroom"] = None if report is None else report["mix"].get("headroom")
    out["headroom_ci95"] = ci
    if ci is None:
        out["headroom_statement"] = None
        if report is not None:
            missing["headroom"] = (
                "the mixed report has no headroom (no replicas on every benchmark)"
            )
    elif ci[0] <= 0.0:
        out["headroom_statement"] = (
            f"no headroom above the noise: replicated oracle − max expert {out['headroom']:+.4f} "
            f"[{ci[0]:+.4f}, {ci[1]:+.4f}] reaches 0, so a router has nothing to find and the "
            "AUROC lines are not asked (still given where their inputs exist)"
        )
    else:
        out["headroom_statement"] = (
            f"headroom above the noise: {out['headroom']:+.4f} [{ci[0]:+.4f}, {ci[1]:+.4f}]"
        )

    # routing AUROC within each benchmark (so within its kind)
    auroc: dict[str, float | None] = {}
    shuffled: dict[str, float | None] = {}
    for bench in benchmarks:
        if chosen is None:
            break
        path = res / "reports" / chosen["run"] / f"{bench}.json"
        if not path.is_file():
            missing[f"auroc_within_kind.{bench}"] = f"{_rel(path)}: missing (run.sh report)"
            continue
        inputs.append(path)
        table = json.loads(path.read_text())
        mine = [m for m in table["methods"].values() if m["kind"] == "policy"]
        auroc[bench] = mine[0].get("auroc") if len(mine) == 1 else None
        shuffled[bench] = table["methods"].get("knn", {}).get("shuffled_auroc")
    full = chosen is not None and len(auroc) == len(benchmarks)
    for key, values in (("auroc_within_kind", auroc), ("shuffled_auroc_within_kind", shuffled)):
        known = [v for v in values.values() if v is not None]
        out[key] = (
            {"per_benchmark": values, "mean": round(statistics.fmean(known), 4)}
            if full and len(known) == len(benchmarks)
            else None
        )
        if out[key] is None:
            missing.setdefault(key, "no per-benchmark report for every benchmark (or no AUROC)")

    # the two arms, on validation and on test
    diff = reward_difference(res)
    out["credit_minus_global_reward"] = diff["value"]
    out["credit_minus_global_reward_ci95"] = diff["ci95"]
    out["credit_minus_global_reward_per_seed"] = diff["per_seed"]
    if diff["value"] is None:
        missing["credit_minus_global_reward"] = "; ".join(map(str, diff["missing"]))
    elif diff["ci95"] is None:
        missing["credit_minus_global_reward_ci95"] = "fewer than two seeds with both arms"
    overhead = token_overhead(res)
    out["credit_token_overhead"] = overhead["tokens"]
    out["credit_calls_overhead"] = overhead["calls"]
    out["credit_overhead_per_seed"] = {
        "tokens": overhead.get("tokens_per_seed"),
        "calls": overhead.get("calls_per_seed"),
    }
    if overhead["tokens"] is None:
        missing["credit_token_overhead"] = (
            "; ".join(map(str, overhead["missing"]))
            or "the GRPO runs log no worker_priced_tokens_total"
        )
    for arm in ARMS:
        for seed in SEEDS:
            if metrics_path(arm, seed, res).is_file():
                inputs.append(metrics_path(arm, seed, res))
    final: dict[str, Any] = {}
    for arm in ARMS:
        per_seed = {}
        for seed in SEEDS:
            name = f"grpo-{arm}-s{seed}"
            figures, reason = test_figures(name, name, report, benchmarks, res)
            if figures is None:
                missing[f"final_test.{arm}.s{seed}"] = str(reason)
            per_seed[str(seed)] = figures
        got = [f for f in per_seed.values() if f is not None]
        final[arm] = {
            "per_seed": per_seed,
            **{
                key: round(statistics.fmean(f[key] for f in got), 4)
                if len(got) == len(SEEDS)
                else None
                for key in ("accuracy", "cost", "worker_tokens")
            },
        }
    out["final_test"] = final
    out["chosen_test"] = None
    if chosen is not None:
        out["chosen_test"], reason = test_figures(CHOSEN, chosen["run"], report, benchmarks, res)
        if reason is not None:
            missing["chosen_test"] = reason
    if report is not None:
        inputs += [ROOT / name for name in report.get("inputs", {})]
        out["report_command"] = report.get("command")
    log = res / "commands.log"
    out["commands"] = log.read_text().splitlines() if log.is_file() else []
    if not out["commands"]:
        missing["commands"] = f"{_rel(log)}: missing or empty"
    out["inputs"] = {
        _rel(p): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in dict.fromkeys(inputs)
        if p.is_file()
    }
    out["missing"] = missing
    out["notes"] = NOTES
    return out


NOTES = {
    "credit_minus_global_reward": "each seed's final validation reward (heldout/reward at the "
    "run's last step, where the worker budget both arms share ended it: equal worker tokens, "
    "not equal steps) of the credit arm minus the global arm's, then the mean over seeds; "
    "paired by seed because both arms of a seed start from the same SFT warm start and score "
    "the same "
    "validation items at the same drawn cost weights. The runs log only the mean reward over "
    "the validation items, so the pairing cannot be per item; the interval is Student's t over "
    "the seeds' differences (2 degrees of freedom for three seeds: wide, and it says so), not "
    "a bootstrap (over three seeds that is only their range).",
    "credit_token_overhead": "credit's worker tokens over global's at equal steps (both runs' "
    "totals at the earlier of their last steps: the whole of credit's run, which the shared "
    "budget ends first), a ratio of sums over seeds, from worker_priced_tokens_total (the "
    "tier-priced tokens of every distinct "
    "worker call a run read) where the runs log it; credit_calls_overhead is the same for "
    "worker_calls_total (distinct worker calls). The per-step worker_tokens is a mean over "
    "valid rollouts only (mutants' tokens are not in it), so it is not used.",
    "test": "a policy's test figures are lemon eval on every test table, at the v3 prompt's "
    "default cost weight (0.02, R_orch's default), read through lemon report --mix: accuracy "
    "and full cost (tier-priced, the policy's own tokens included) with equal weight per "
    "benchmark; worker_tokens is raw worker tokens per item, equal weight per benchmark.",
}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("configs", help="pin the complete benchmarks; write the SFT and GRPO configs")
    sub.add_parser("benchmarks", help="print the pinned benchmarks and their teams")
    bal = sub.add_parser("balance", help=f"{SFT_ROWS} SFT rows, an equal share per benchmark")
    bal.add_argument("--rows", default="rows", help="a folder of <benchmark>.jsonl, or one file")
    bal.add_argument("--out", default="rows.jsonl", help="beside this script (default rows.jsonl)")
    sub.add_parser("choose", help="choose the run and step on validation: chosen.json")
    sub.add_parser("summary", help="write summary.json from the runs' outputs")
    vs = sub.add_parser("versus", help="version A minus version B, paired, on validation or test")
    vs.add_argument("a")
    vs.add_argument("b")
    vs.add_argument("--test", action="store_true", help="evals/ (the test tables), not validation/")
    args = parser.parse_args(argv)
    if args.action == "versus":
        where = RESULTS / ("evals" if args.test else "validation")
        print(json.dumps(versus(args.a, args.b, plan()["benchmarks"], where), indent=1))
        return 0
    if args.action == "configs":
        for path in configs():
            print(_rel(path))
        return 0
    if args.action == "benchmarks":
        the_plan = plan()
        for bench in the_plan["benchmarks"]:
            print(bench, ",".join(the_plan["teams"][bench]))
        return 0
    if args.action == "balance":
        drawn = balance(RESULTS / args.rows, plan()["benchmarks"])
        text = "".join(json.dumps(row) + "\n" for row in drawn)
        (RESULTS / args.out).write_text(text, encoding="utf-8")
        counts: dict[str, int] = {}
        for row in drawn:
            bench = row["provenance"]["benchmark"]
            counts[bench] = counts.get(bench, 0) + 1
        print(f"{_rel(RESULTS / args.out)}: {len(drawn)} rows {counts}")
        return 0
    if args.action == "choose":
        data = choose()
        (RESULTS / "chosen.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(data["run"])
        return 0
    data = summary()
    (RESULTS / "summary.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: data[k] for k in ("vs_best_fixed", "policy_cost", "missing")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
