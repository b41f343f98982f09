"""The learned policy on the outcome tables: configs, runs, and the figures they give.

``python experiments/policy-tables/policy_tables.py configs BENCH`` writes the SFT and GRPO
configs of one benchmark's experiment into ``experiments/policy-tables/<bench>/`` (per seed: an
SFT warm start of its own, then two GRPO arms from it, plain GRPO and two-way counterfactual
credit, on the train table's fit items, scored every few steps on its held-out tail);
``python experiments/policy-tables/policy_tables.py paired A B`` prints evaluation A's accuracy
minus B's on the items both answered, with its paired bootstrap 95% interval;
``python experiments/policy-tables/policy_tables.py summary`` reads what the runs wrote and writes
``experiments/policy-tables/summary.json``: per benchmark ``n_test``, ``policy_accuracy``,
``policy_cost``, ``hull_diff_ci95``, ``policy_score``, ``knn_score``, ``auroc``, ``shuffled_auroc``,
``auroc_capability`` (the report's team-level routing AUROCs, by the chosen team's cost and by its
accuracy; from ``lemon report`` on the test table with the policy's evaluation and the control's:
the same SFT on teacher rows whose teams were shuffled across items), and at the top level
``credit_calls_ratio`` and ``credit_calls_ratio_ci95``: the distinct worker calls two-way credit
needed to reach plain GRPO's final held-out reward, over plain GRPO's calls for the whole run (mean
over seeds, 95% bootstrap interval over seeds; no interval from fewer than three). A run that never
reaches the target counts at its whole run's calls (censored: the ratio is then a lower bound). It
reads each GRPO run's ``metrics.jsonl`` from
``experiments/policy-tables/<bench>/grpo/<arm>-s<seed>/`` (copied there from the published
version under ``policies/``, which is not committed).

The run commands are in ``run.sh`` beside the results; this file only writes configs and reads
results (no model runs here).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml

from lemon.scoring.stats import mean_difference_ci, paired_bootstrap

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent
TABLES = ROOT / "tables"
PROMPT = "lemon-policy-prompt/v2"

EXPERIMENTS: dict[str, dict[str, Any]] = {
    # fit items, held-out tail of the train table, GRPO steps, reward weights
    "svamp": {"fit": 180, "heldout": 42, "steps": 40, "tasks_per_step": 4},
    "mmlu": {"fit": 340, "heldout": 60, "steps": 40, "tasks_per_step": 4},
}
"""40 GRPO steps, scored on the held-out tail every 20: what seed 1 ran (cut from 60 for CPU
time: a step is about a minute with both arms side by side at one thread each), so every seed
is compared at the same settings."""
GRPO_TEMPERATURE = 0.7
"""At 1.0 the seed-1 SFT warm start wrote 0-6% valid specs in its first five steps, so every
group was flat and skipped."""
LIVE_CALLS = False
"""Off-table specs score as failed runs: a live team run costs minutes on two cores."""
REWARDS = {"token_cost": 0.2, "agent_cost": 0.01, "edge_cost": 0.005}
"""R_orch's weights for the tables' experiments: a token cost at which a large agent's ~1,000
tier-priced tokens weigh 0.2 of a success (the default 0.02 makes the large tier nearly free,
so no routing would pay)."""
SEEDS = (0, 1, 2)
LORA = {"r": 16, "alpha": 32, "dropout": 0.0, "top_layers": 8, "merge": False}


def _write(path: Path, data: dict[str, Any], comment: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(f"# {line}\n" for line in comment.splitlines())
    path.write_text(text + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def configs(bench: str) -> list[Path]:
    spec = EXPERIMENTS[bench]
    out = RESULTS / bench
    table = f"tables/{bench}-train"
    written = []
    for seed in SEEDS:
        sft = {
            "stage": "sft",
            "base_model": "packaged",
            "data": f"experiments/policy-tables/{bench}/rows.jsonl",
            "output_dir": f"policies/tables/{bench}-sft-s{seed}",
            "policy": f"{bench}-tables",
            "version": f"sft-s{seed}",
            "prompt_format": PROMPT,
            "lora": LORA,
            "hyperparameters": {
                "learning_rate": 2.0e-4,
                "epochs": 2,
                "per_device_batch_size": 8,
                "max_length": 512,
                "save_steps": 25,
                "seed": seed,
            },
        }
        path = out / f"sft-s{seed}.yaml"
        _write(path, sft, f"SFT warm start, seed {seed}, on the {bench} train table's teacher rows")
        written.append(path)
        if seed == SEEDS[0]:  # the control: the same SFT on rows whose teams were shuffled
            control_sft = sft | {
                "data": f"experiments/policy-tables/{bench}/rows-shuffled.jsonl",
                "output_dir": f"policies/tables/{bench}-sft-shuffled",
                "version": "sft-shuffled",
            }
            path = out / "sft-shuffled.yaml"
            _write(
                path,
                control_sft,
                f"the control: SFT, seed {seed}, on rows whose teams were shuffled across "
                f"items, on the {bench} train table's teacher rows",
            )
            written.append(path)
        for arm, credit in (("global", False), ("credit", True), ("paid", True)):
            grpo: dict[str, Any] = {
                "stage": "grpo",
                "base_model": f"policies/tables/{bench}-sft-s{seed}",
                "data": f"table:{table}:{spec['fit']}:0",
                "heldout": f"table:{table}:{spec['heldout']}:{spec['fit']}",
                "heldout_steps": 20,
                "output_dir": f"policies/tables/{bench}-grpo-{arm}-s{seed}",
                "policy": f"{bench}-tables",
                "version": f"grpo-{arm}-s{seed}",
                "prompt_format": PROMPT,
                "lora": LORA,
                "profile": "embedded",
                "rewards": REWARDS,
                "hyperparameters": {
                    "learning_rate": 5.0e-5,
                    "max_steps": spec["steps"],
                    "per_device_batch_size": spec["tasks_per_step"],
                    "group_size": 4,
                    "max_completion_length": 64,
                    "temperature": GRPO_TEMPERATURE,
                    "loss_type": "dapo",
                    "save_steps": 10,
                    "seed": seed,
                    "worker_max_tokens": 300,
                    "live_calls": LIVE_CALLS,
                    "skip_flat_groups": True,
                },
                "counterfactual": {
                    "enabled": credit,
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
            if arm == "paid":  # only the mutants whose calls the run has read already
                grpo["counterfactual"]["mutants"] = "paid"
            path = out / f"grpo-{arm}-s{seed}.yaml"
            what = {
                "global": "plain GRPO (no credit)",
                "credit": "two-way counterfactual credit",
                "paid": "two-way counterfactual credit from paid mutants only (no new calls)",
            }[arm]
            _write(path, grpo, f"GRPO, {what}, seed {seed}, from that seed's SFT warm start")
            written.append(path)
            if credit and seed == SEEDS[0]:
                # the GRPO runs' own shuffled-label control: the same credit arm, from the SFT
                # on the shuffled rows, so what GRPO adds beside the labels is measured too
                control = grpo | {
                    "base_model": f"policies/tables/{bench}-sft-shuffled",
                    "output_dir": f"policies/tables/{bench}-grpo-credit-shuffled",
                    "version": "grpo-credit-shuffled",
                }
                path = out / "grpo-credit-shuffled.yaml"
                _write(
                    path,
                    control,
                    f"GRPO, {what}, seed {seed}, from the shuffled-label SFT (the control)",
                )
                written.append(path)
    return written


def _metrics(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def calls_to_reach(rows: list[dict[str, Any]], target: float) -> float | None:
    """Distinct worker calls when the held-out reward first reaches ``target`` (the calls at
    the step of that evaluation), None if it never does."""
    calls = {
        int(r["step"]): float(r["worker_calls_total"]) for r in rows if "worker_calls_total" in r
    }
    for row in rows:
        if "heldout/reward" in row and float(row["heldout/reward"]) >= target:
            step = int(row["step"])
            return calls.get(step, 0.0 if step == 0 else None)
    return None


def credit_ratio(bench: str, arm: str = "credit") -> dict[str, Any]:
    """The credit arm ``arm`` (``credit``: every mutant scored; ``paid``: paid mutants only)
    against plain GRPO, seed by seed."""
    pairs = []
    per_seed = []
    for seed in SEEDS:
        plain = _metrics(RESULTS / bench / "grpo" / f"global-s{seed}" / "metrics.jsonl")
        credit = _metrics(RESULTS / bench / "grpo" / f"{arm}-s{seed}" / "metrics.jsonl")
        held = [r for r in plain if "heldout/reward" in r]
        totals = [float(r["worker_calls_total"]) for r in plain if "worker_calls_total" in r]
        if not held or not totals or not credit:
            continue
        target = float(held[-1]["heldout/reward"])
        reached = calls_to_reach(credit, target)
        credit_total = max(
            float(r["worker_calls_total"]) for r in credit if "worker_calls_total" in r
        )
        spent = reached if reached is not None else credit_total  # censored at its budget
        pairs.append((spent, totals[-1]))
        per_seed.append({"seed": seed, "target": target, "credit_calls": reached,
                         "credit_total": credit_total, "plain_calls": totals[-1]})  # fmt: skip
    if not pairs:
        return {"credit_calls_ratio": None, "credit_calls_ratio_ci95": None, "per_seed": []}
    if len(pairs) < 3:  # a ratio, but no interval: a bootstrap over 1 or 2 seeds is not one
        return {
            "credit_calls_ratio": round(
                statistics.fmean(a for a, _ in pairs) / statistics.fmean(b for _, b in pairs), 4
            ),
            "credit_calls_ratio_ci95": None,
            "seeds": len(pairs),
            "per_seed": per_seed,
        }
    low, high = paired_bootstrap(
        lambda spent, plain: float(spent.mean() / plain.mean()),
        [a for a, _ in pairs],
        [b for _, b in pairs],
        rounds=2000,
        seed=0,
    )
    ratio = statistics.fmean(a for a, _ in pairs) / statistics.fmean(b for _, b in pairs)
    return {
        "credit_calls_ratio": round(ratio, 4),
        "credit_calls_ratio_ci95": [round(low, 4), round(high, 4)],
        "seeds": len(pairs),
        "per_seed": per_seed,
    }


def benchmark_summary(bench: str) -> dict[str, Any] | None:
    report_path = RESULTS / bench / "report.json"
    if not report_path.is_file():
        return None
    report = json.loads(report_path.read_text())
    policies = {n: m for n, m in report["methods"].items() if m["kind"] == "policy"}
    learned = {n: m for n, m in policies.items() if "shuffled" not in n}
    controls = {n: m for n, m in policies.items() if "shuffled" in n}
    if not learned:
        return None

    def control_of(run: str) -> dict[str, Any] | None:
        """The shuffled-label control trained and evaluated the same way as ``run``: GRPO from
        the shuffled SFT for a GRPO run (where it ran), else the shuffled SFT; free decoding,
        ``-columns`` or ``-constrained`` (its name's suffix after the seed)."""
        mode = run.split("-")[-1] if run.endswith(("-columns", "-constrained")) else ""
        suffix = f"-{mode}" if mode else ""
        # the fitted SFT (``sft-sN-fit``) and the GRPO run long from it (``grpo-*-sN-long``)
        # against the shuffled SFT fitted the same way
        fit = "-fit" if "-fit" in run or run.endswith("-long") else ""
        if run.startswith("sft-cs-"):  # cost-sensitive SFT: its rows shuffled across items
            return controls.get(f"sft-cs-shuffled{suffix}")
        if fit:
            return controls.get(f"sft-shuffled-fit{suffix}")
        if run.startswith("grpo-") and f"grpo-credit-shuffled{suffix}" in controls:
            return controls[f"grpo-credit-shuffled{suffix}"]
        return controls.get(f"sft-shuffled{suffix}")

    # the headline is the best of the policy's runs (by its paired difference from the hull);
    # every run is listed beside it
    name = max(learned, key=lambda n: learned[n]["hull_diff"])
    policy = learned[name]
    knn = report["methods"].get("knn", {})
    from lemon.evals import curves

    at = policy["cost"]
    hull = [tuple(p) for p in report["hull"]]
    oracle = [tuple(p) for p in report["methods"]["oracle"]["curve"]]
    knn_curve = [tuple(p) for p in knn.get("curve", [])]
    knn_at = curves.curve_at(knn_curve, at) if knn_curve else None
    return {
        "n_test": report["n_items"],
        "policy_run": name,
        "policy_accuracy": policy["accuracy"],
        "policy_cost": policy["cost"],
        "policy_own_cost": policy.get("policy_cost"),
        "hull_diff": policy["hull_diff"],
        "hull_diff_ci95": policy["hull_diff_ci95"],
        "policy_score": policy["score"],
        "knn_score": None
        if knn_at is None
        else round(
            curves.normalised_score(knn_at, at, hull, oracle) or 0.0,
            4,
        ),
        "knn_accuracy_at_policy_cost": None if knn_at is None else round(knn_at, 4),
        "auroc": policy.get("auroc"),
        "shuffled_auroc": (control_of(name) or {}).get("auroc"),
        "auroc_capability": policy.get("auroc_capability"),
        "shuffled_auroc_capability": (control_of(name) or {}).get("auroc_capability"),
        "runs": {
            n: {
                key: m.get(key)
                for key in ("accuracy", "cost", "policy_cost", "hull_diff", "hull_diff_ci95")
            }
            | {
                "auroc": m.get("auroc"),
                "shuffled_auroc": (control_of(n) or {}).get("auroc"),
                "auroc_capability": m.get("auroc_capability"),
            }
            for n, m in learned.items()
        },
        "routers": {
            n: {key: m.get(key) for key in ("accuracy", "cost", "hull_diff", "hull_diff_ci95")}
            | {"auroc": m.get("auroc"), "shuffled_auroc": m.get("shuffled_auroc")}
            for n, m in report["methods"].items()
            if m["kind"] == "router"
        },
        "report": str(report_path.relative_to(ROOT)),
    }


def summary() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for bench in EXPERIMENTS:
        found = benchmark_summary(bench)
        if found is not None:
            out[bench] = found
    out |= credit_ratio("svamp")
    out["credit_calls_note"] = (
        "credit_calls_ratio: the credit arm's distinct worker calls when its held-out reward first "
        "reached plain GRPO's final one (its whole run's if never), over plain GRPO's whole run, "
        "means over seeds; on these seeds the credit arm got there only at its last step or "
        "never, so it is in effect the mutants' extra calls per step. credit_calls_ratio_ci95 "
        "is a percentile bootstrap over three seeds: no more than the range of the seeds' own "
        "ratios, not a confidence interval."
    )
    paid = credit_ratio("svamp", "paid")
    out["paid_credit_calls_ratio"] = paid["credit_calls_ratio"]
    out["paid_credit_calls_ratio_ci95"] = paid["credit_calls_ratio_ci95"]
    out["paid_per_seed"] = paid["per_seed"]
    shipped = json.loads((ROOT / "src/lemon/policy/learned/policy.json").read_text())
    out["shipped_policy"] = f"{shipped['policy']}@{shipped['version']} (--policy learned)"
    return out


def _correct(run: Path) -> dict[str, float]:
    rows = [json.loads(line) for line in (run / "items.jsonl").read_text().splitlines() if line]
    return {str(r["id"]): float(bool(r["correct"])) for r in rows}


def paired(a: Path, b: Path, *, resamples: int = 4000, seed: int = 0) -> dict[str, Any]:
    """Accuracy of evaluation ``a`` minus ``b`` on the items both answered, with a percentile
    bootstrap 95% interval over items (:func:`lemon.scoring.stats.mean_difference_ci`,
    ``resamples`` draws of the ids)."""
    left, right = _correct(a), _correct(b)
    ids = sorted(set(left) & set(right))
    if not ids:
        raise ValueError(f"{a} and {b} share no item")
    diffs = [left[i] - right[i] for i in ids]
    lo, hi = mean_difference_ci(
        [left[i] for i in ids], [right[i] for i in ids], rounds=resamples, seed=seed
    )
    return {"n": len(ids), "diff": round(statistics.fmean(diffs), 4),
            "ci95": [round(lo, 4), round(hi, 4)]}  # fmt: skip


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="action", required=True)
    c = sub.add_parser("configs")
    c.add_argument("bench", choices=list(EXPERIMENTS))
    sub.add_parser("summary")
    p = sub.add_parser("paired", help="accuracy of evaluation A minus B, paired on items")
    p.add_argument("a", type=Path, help="an evaluation directory (lemon eval --out/--name)")
    p.add_argument("b", type=Path)
    args = parser.parse_args(argv)
    if args.action == "configs":
        for path in configs(args.bench):
            print(path.relative_to(ROOT))
        return 0
    if args.action == "paired":
        print(json.dumps(paired(args.a, args.b)))
        return 0
    data = summary()
    (RESULTS / "summary.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(data, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
