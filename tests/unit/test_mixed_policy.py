"""experiments/mixed-policy's choice and summary on hand-made inputs: tiny tables of real SVAMP
and AQuA items, hand-written lemon eval records and GRPO metrics, every figure by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import mixed_policy as mp
from lemon.evals import mixed
from lemon.evals.table_report import table_report
from lemon.tables.store import Table
from lemon.tasks import TaskKind
from tests.unit.test_mixed_report import World, _table

# team -> (cost, greedy right on item k, replica right on item k), ten items; train = test
SVAMP: World = {
    "single-small": (10.0, lambda k: k % 5 == 0, lambda k: k == 0),
    "single-medium": (30.0, lambda k: k < 4, lambda k: k < 4),
    "single-large": (100.0, lambda k: k % 2 == 0, lambda k: k % 2 == 0),
    "pot-large": (50.0, lambda k: k < 7, lambda k: k < 3),
}
AQUA: World = {
    "single-small": (10.0, lambda k: False, lambda k: False),
    "single-medium": (30.0, lambda k: k < 2, lambda k: k < 2),
    "single-large": (100.0, lambda k: k < 4, lambda k: k < 4),
    "quick-large": (60.0, lambda k: k < 6, lambda k: k < 6),
}
EXPERT = {"svamp": "pot-large", "aqua": "quick-large"}
# validation reward by step (the worker budget ends credit's runs at step 30, global's at 40),
# and the runs' distinct worker calls and tokens, which grow by a fortieth of these a step
HELD = {
    ("global", 0): {0: -0.5, 10: -0.3, 20: -0.2, 30: -0.1, 40: 0.0},
    ("credit", 0): {0: -0.5, 10: -0.2, 20: 0.0, 30: 0.1},
    ("global", 1): {0: -0.4, 10: -0.2, 20: 0.0, 30: 0.05, 40: 0.1},
    ("credit", 1): {0: -0.4, 10: 0.2, 20: 0.5, 30: 0.4},
    ("global", 2): {0: -0.6, 10: 0.0, 20: 0.1, 30: 0.15, 40: 0.2},
    ("credit", 2): {0: -0.6, 10: 0.0, 20: 0.1, 30: 0.2},
}
CALLS = {"global": (100, 120, 110), "credit": (250, 300, 260)}
TOKENS = {"global": (1000, 1200, 1100), "credit": (3000, 3600, 3300)}


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tables")
    for split in ("train", "test"):
        _table(root / f"svamp-{split}", "svamp", split, TaskKind.MATH, SVAMP)
        _table(root / f"aqua-{split}", "aqua", split, TaskKind.MULTIPLE_CHOICE, AQUA)
    return root


def _records(tables: Path, bench: str, team: str, own: float = 0.0) -> list[dict[str, Any]]:
    """A policy that writes ``team`` on every test item, ``own`` tokens of its own an item."""
    table = Table.open(tables / f"{bench}-test")
    out = []
    for item in table.meta.items:
        cell = table.cell(item, team)
        assert cell is not None
        out.append({"id": item, "correct": cell.success >= 0.5, "tokens": int(cell.priced_tokens),
                    "priced_tokens": cell.priced_tokens, "policy_priced_tokens": own,
                    "full_cost": cell.priced_tokens + own, "spec": ""})  # fmt: skip
    return out


def _metrics(res: Path, arm: str, seed: int, *, finished: bool = True, tokens: bool = True) -> None:
    """A run's metrics.jsonl as lemon train writes it; ``finished``: with the trainer's
    closing row, before the held-out score of the last step (else it died after step 30)."""
    rows: list[dict[str, Any]] = []
    last = max(HELD[(arm, seed)])
    for step, reward in HELD[(arm, seed)].items():
        if not finished and step > 30:
            continue
        if step:
            rows.append(
                {
                    "step": step,
                    "worker_calls_total": CALLS[arm][seed] * step / 40,
                    "worker_calls": 1.0,
                    "worker_tokens": 123.0,
                }
                | ({"worker_priced_tokens_total": TOKENS[arm][seed] * step / 40} if tokens else {})
            )
        if finished and step == last:
            rows.append({"step": step, "train_runtime": 12.5, "train_loss": 0.1})
        rows.append({"step": step, "heldout/reward": reward, "heldout/tasks": 6.0})
    path = res / "grpo" / f"{arm}-s{seed}" / "metrics.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _plan(res: Path) -> None:
    res.mkdir(parents=True, exist_ok=True)
    (res / "plan.json").write_text(json.dumps({"benchmarks": ["svamp", "aqua"], "steps": 40}))


def _write_evals(res: Path, tables: Path, run: str, teams: dict[str, str], own: float) -> None:
    for bench, team in teams.items():
        path = res / "evals" / run / bench / "items.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps(r) for r in _records(tables, bench, team, own)]
        path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def full(tables: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every input: six finished GRPO runs, their test evaluations (global: single-large
    everywhere; credit and the chosen cut: each benchmark's max expert), the mixed report, the
    per-benchmark reports, the command log."""
    res = tmp_path_factory.mktemp("mixed-policy")
    _plan(res)
    for arm, seed in HELD:
        _metrics(res, arm, seed)
    chosen = mp.choose(res)
    (res / "chosen.json").write_text(json.dumps(chosen))
    for seed in mp.SEEDS:
        _write_evals(res, tables, f"grpo-global-s{seed}", dict.fromkeys(EXPERT, "single-large"), 0)
        _write_evals(res, tables, f"grpo-credit-s{seed}", EXPERT, 0)
    _write_evals(res, tables, chosen["run"], EXPERT, 5.0)
    benches = [
        mixed.load_bench(Table.open(a), Table.open(b))
        for a, b in mixed.discover(str(tables), ["svamp", "aqua"])
    ]
    policies = {}
    for run in sorted(p.name for p in (res / "evals").iterdir()):
        policies[run] = {
            b: [json.loads(x) for x in (res / "evals" / run / b / "items.jsonl").open()]
            for b in EXPERT
        }
    policies["chosen"] = policies[chosen["run"]]
    report = mixed.mixed_report(benches, policies=policies)
    (res / "report").mkdir()
    (res / "report" / "report.json").write_text(json.dumps(report))
    # per benchmark, the lemon report TABLE of the chosen run, by hand: policy and kNN control
    for bench, (mine, control) in {"svamp": (0.62, 0.48), "aqua": (0.70, 0.44)}.items():
        path = res / "reports" / chosen["run"] / f"{bench}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"methods": {
            bench: {"kind": "policy", "auroc": mine},
            "knn": {"kind": "router", "auroc": 0.5, "shuffled_auroc": control},
        }}))  # fmt: skip
    (res / "commands.log").write_text("2026-12-07T00:00:00Z abc bash run.sh rows\n")
    return {"chosen": chosen, "report": report, "summary": mp.summary(res), "res": res}


def test_the_run_and_step_are_chosen_on_validation(full: dict[str, Any]) -> None:
    chosen = full["chosen"]
    # credit seed 1 peaks at step 20 (0.5), above every other run's every step
    assert (chosen["run"], chosen["step"], chosen["validation_reward"]) == (
        "grpo-credit-s1-at20", 20, 0.5,
    )  # fmt: skip
    # each seed's SFT (step 0) is one candidate, not one per arm; 3 global runs x 4 steps,
    # 3 credit runs x 3 steps, 3 SFTs
    names = [c["run"] for c in chosen["candidates"]]
    assert len(names) == len(set(names)) == 24
    assert "sft-s2" in names


def test_a_tie_goes_to_the_earlier_step_then_global(tmp_path: Path) -> None:
    _plan(tmp_path)
    for arm, seed in HELD:
        _metrics(tmp_path, arm, seed)
    rows = tmp_path / "grpo" / "credit-s1" / "metrics.jsonl"
    rows.write_text(rows.read_text().replace('"heldout/reward": 0.5', '"heldout/reward": 0.2'))
    # now the best is 0.4, at credit s1's last step (30, where its budget ended it)
    assert mp.choose(tmp_path)["run"] == "grpo-credit-s1"
    # every run at most 0.2: global s2 at step 40, credit s2 at 30, credit s1 at 10, 20, 30
    rows.write_text(rows.read_text().replace('"heldout/reward": 0.4', '"heldout/reward": 0.2'))
    assert mp.choose(tmp_path)["run"] == "grpo-credit-s1-at10"


def test_the_policy_against_the_fixed_teams(full: dict[str, Any]) -> None:
    s = full["summary"]
    # single-large is the one team both run best on train (0.45 over the two); the chosen
    # policy writes each benchmark's max expert, 5 tokens of its own per item:
    # SVAMP pot-large 0.7 vs single-large 0.5, AQuA quick-large 0.6 vs 0.4
    assert s["best_fixed_team"] == "single-large"
    assert s["vs_best_fixed"] == pytest.approx(0.2)
    assert s["vs_max_expert"] == 0.0
    assert s["vs_max_expert_ci95"] == [0.0, 0.0]
    lo, hi = s["vs_best_fixed_ci95"]
    assert lo < 0.2 < hi
    assert s["policy_accuracy"] == pytest.approx(0.65)
    assert s["policy_cost"] == pytest.approx((50 + 60) / 2 + 5)
    assert s["best_fixed_cost"] == 100.0
    assert s["per_benchmark"]["svamp"]["vs_best_fixed"] == pytest.approx(0.2)


def test_the_normalised_scores_over_the_mix(full: dict[str, Any]) -> None:
    s = full["summary"]
    # mix hull: (10, 0.1), (30, 0.3), (100, 0.45); at 60: 0.3 + 0.15 * 30/70; replicated
    # oracle over the mix (0.8 + 0.6) / 2
    hull = 0.3 + 0.15 * 30 / 70
    assert s["policy_score"] == pytest.approx((0.65 - hull) / (0.7 - hull), abs=1e-4)
    assert s["knn_score"] == full["report"]["mix"]["score"]["knn"]
    assert s["knn_score"] is not None


def test_headroom_below_the_noise_is_said(full: dict[str, Any]) -> None:
    s = full["summary"]
    # replicated oracle − max expert: SVAMP +0.1 (item 8), AQuA 0; mix 0.05, its interval
    # reaches 0 on 20 items with one gain
    assert s["headroom"] == 0.05
    assert s["headroom_ci95"][0] == 0.0
    assert s["headroom_statement"].startswith("no headroom above the noise")


def test_auroc_within_each_benchmark(full: dict[str, Any]) -> None:
    s = full["summary"]
    assert s["auroc_within_kind"] == {
        "per_benchmark": {"svamp": 0.62, "aqua": 0.70}, "mean": 0.66,
    }  # fmt: skip
    assert s["shuffled_auroc_within_kind"]["mean"] == pytest.approx(0.46)


def test_credit_against_global(full: dict[str, Any]) -> None:
    s = full["summary"]
    # final validation rewards (credit at step 30, global at 40: each run's last, at the
    # budget), credit − global: s0 0.1, s1 0.3, s2 0.0; mean 0.1333, sd 0.152753, t(2) 4.303:
    # half width 4.303 * 0.152753 / sqrt(3) = 0.37949
    assert s["credit_minus_global_reward"] == pytest.approx(0.1333)
    assert s["credit_minus_global_reward_ci95"] == pytest.approx([-0.2462, 0.5128], abs=1e-4)
    first = s["credit_minus_global_reward_per_seed"][0]
    assert first["steps"] == {"global": 40, "credit": 30}
    assert first["worker_tokens"] == {"global": 1000.0, "credit": 2250.0}
    # at equal steps (30, credit's last): tokens (3000 + 3600 + 3300) * 30/40 over
    # (1000 + 1200 + 1100) * 30/40, calls 810 / 330
    assert s["credit_token_overhead"] == 3.0
    assert s["credit_overhead_per_seed"]["tokens"]["0"] == [2250.0, 750.0]
    assert s["credit_calls_overhead"] == pytest.approx(2.4545)
    # test: global writes single-large (0.45 at 100, 100 worker tokens), credit the experts
    # (0.65 at (50 + 60) / 2 = 55)
    assert s["final_test"]["global"]["accuracy"] == pytest.approx(0.45)
    assert s["final_test"]["global"]["worker_tokens"] == 100.0
    assert s["final_test"]["credit"]["cost"] == pytest.approx(55.0)
    assert s["final_test"]["credit"]["worker_tokens"] == 55.0
    assert s["chosen_test"]["cost"] == pytest.approx(60.0)
    assert s["commands"] == ["2026-12-07T00:00:00Z abc bash run.sh rows"]
    assert any(name.endswith("report/report.json") for name in s["inputs"])
    assert any(name.endswith("grpo/credit-s2/metrics.jsonl") for name in s["inputs"])
    assert not s["missing"] or set(s["missing"]) <= {"knn_score", "policy_score"}


def test_missing_inputs_give_null_and_say_why(tmp_path: Path) -> None:
    _plan(tmp_path)
    for arm, seed in HELD:
        if (arm, seed) == ("credit", 2):
            continue
        # the runs log no worker_priced_tokens_total; global s2 died after step 30
        _metrics(tmp_path, arm, seed, tokens=False, finished=(arm, seed) != ("global", 2))
    s = mp.summary(tmp_path)
    for key in ("vs_best_fixed", "vs_best_fixed_ci95", "policy_cost", "best_fixed_cost",
                "vs_max_expert", "vs_max_expert_ci95", "policy_score", "knn_score",
                "auroc_within_kind", "shuffled_auroc_within_kind", "credit_minus_global_reward",
                "credit_minus_global_reward_ci95", "credit_token_overhead", "chosen"):  # fmt: skip
        assert s[key] is None, key
    why = s["missing"]
    assert "report/report.json: missing" in why["report"]
    assert "chosen.json: missing" in why["chosen"]
    assert "grpo/credit-s2/metrics.jsonl: missing" in why["credit_minus_global_reward"]
    assert "not finished (last validation score: step 30)" in why["credit_minus_global_reward"]
    assert "grpo/credit-s2/metrics.jsonl: missing" in why["credit_token_overhead"]
    assert s["final_test"]["global"]["accuracy"] is None
    assert "commands" in why
    # the two seeds both arms finished are listed, the mean is not taken over them
    assert [p["seed"] for p in s["credit_minus_global_reward_per_seed"]] == [0, 1]
    with pytest.raises(SystemExit, match="every GRPO run finished"):
        mp.choose(tmp_path)


def test_token_overhead_needs_the_runs_to_log_tokens(tmp_path: Path) -> None:
    _plan(tmp_path)
    for arm, seed in HELD:
        _metrics(tmp_path, arm, seed, tokens=False)
    out = mp.token_overhead(tmp_path)
    assert out["tokens"] is None
    assert out["calls"] == pytest.approx(810 / 330, abs=1e-4)
    assert "worker_priced_tokens_total: not logged by every run" in out["missing"]


def test_what_lemon_report_table_writes_is_what_summary_reads(tables: Path, tmp_path: Path) -> None:
    """A policy writing one team for every item routes at chance (AUROC 0.5); the kNN router's
    shuffled control sits under ``knn``."""
    run = tmp_path / "svamp"
    run.mkdir()
    lines = [json.dumps(r) for r in _records(tables, "svamp", "pot-large")]
    (run / "items.jsonl").write_text("\n".join(lines) + "\n")
    report = table_report(
        Table.open(tables / "svamp-test"), train=Table.open(tables / "svamp-train"),
        teams=list(SVAMP), policies=[run],
    )  # fmt: skip
    policies = [m for m in report["methods"].values() if m["kind"] == "policy"]
    assert len(policies) == 1
    assert policies[0]["auroc"] == 0.5
    assert 0.0 <= report["methods"]["knn"]["shuffled_auroc"] <= 1.0


def test_configs_pin_the_complete_benchmarks(
    tables: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mp, "RESULTS", tmp_path)
    written = mp.configs(tables)
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["benchmarks"] == ["aqua", "svamp"]
    assert plan["teams"]["aqua"] == list(AQUA)
    assert len(written) == 1 + 3 * 3
    from lemon.learning.training_config import load_config

    grpo = load_config(tmp_path / "configs" / "grpo-credit-s1.yaml")
    assert str(grpo.data).endswith("aqua-train,tables/svamp-train:0:0:fit")
    assert str(grpo.heldout).endswith(":0:0:validation")
    assert grpo.counterfactual.enabled
    assert grpo.hyperparameters.cost_weights == list(mp.COST_WEIGHTS)
    assert grpo.base_model == "policies/mixed/sft-s1"
    # both arms train to one worker budget, under a step cap
    assert grpo.hyperparameters.max_worker_tokens == mp.WORKER_BUDGET
    assert grpo.hyperparameters.max_steps == mp.STEPS
    assert plan["worker_budget"] == mp.WORKER_BUDGET
    assert not load_config(tmp_path / "configs" / "grpo-global-s1.yaml").counterfactual.enabled


def test_sft_rows_are_balanced_across_benchmarks(tmp_path: Path) -> None:
    """``balance``: the same number of rows from each benchmark, without repeats while a
    benchmark has rows left (a small one's rows are then drawn again), and reproducible."""
    rows = tmp_path / "rows"
    rows.mkdir()
    for bench, n in (("aqua", 5), ("svamp", 40)):
        lines = [json.dumps({"id": f"{bench}:{k}", "provenance": {"benchmark": bench}})
                 for k in range(n)]  # fmt: skip
        (rows / f"{bench}.jsonl").write_text("\n".join(lines) + "\n")
    drawn = mp.balance(rows, ["aqua", "svamp"], total=21, seed=3)
    by = {
        b: [r["id"] for r in drawn if r["provenance"]["benchmark"] == b] for b in ("aqua", "svamp")
    }
    assert (len(by["aqua"]), len(by["svamp"])) == (11, 10)
    assert len(set(by["svamp"])) == 10  # no repeat while rows are left
    assert set(by["aqua"]) == {f"aqua:{k}" for k in range(5)}  # all five, then again
    assert mp.balance(rows, ["aqua", "svamp"], total=21, seed=3) == drawn
    with pytest.raises(FileNotFoundError, match="missing"):
        mp.balance(rows, ["mmlu"], total=4)
    assert mp.SFT_ROWS == mp.SFT_STEPS * mp.SFT_BATCH
    # one file of every benchmark's rows (the router teacher's): the same draw per benchmark
    one = tmp_path / "router.jsonl"
    one.write_text((rows / "svamp.jsonl").read_text() + (rows / "aqua.jsonl").read_text())
    assert mp.balance(one, ["aqua", "svamp"], total=21, seed=3) == drawn
    with pytest.raises(ValueError, match="no rows of mmlu"):
        mp.balance(one, ["aqua", "mmlu"], total=4)


def test_versus_pairs_two_versions_on_the_same_items(tmp_path: Path) -> None:
    """``versus A B``: per benchmark the mean paired difference on the items both answered,
    over the mix the equal-weight mean (AQuA's +1/2 and SVAMP's -1/4 give +1/8), an interval
    around it, and each version's mean full cost on those items; a missing version is named."""
    rows = {
        ("a", "aqua"): [("q1", True, 10.0), ("q2", True, 30.0)],
        ("b", "aqua"): [("q1", True, 100.0), ("q2", False, 100.0), ("q9", True, 5.0)],
        ("a", "svamp"): [(f"s{k}", k != 0, 1.0) for k in range(4)],
        ("b", "svamp"): [(f"s{k}", True, 2.0) for k in range(4)],
    }
    for (version, bench), items in rows.items():
        folder = tmp_path / version / bench
        folder.mkdir(parents=True)
        (folder / "items.jsonl").write_text("".join(
            json.dumps({"id": i, "correct": c, "full_cost": f}) + "\n" for i, c, f in items
        ))  # fmt: skip
    got = mp.versus("a", "b", ["aqua", "svamp"], tmp_path)
    assert got["aqua"] == {"n": 2, "difference": 0.5}
    assert got["svamp"] == {"n": 4, "difference": -0.25}
    assert got["mix"]["difference"] == 0.125
    lo, hi = got["mix"]["ci95"]
    assert lo <= 0.125 <= hi
    assert lo < hi
    assert got["mix"]["cost"] == {"a": 10.5, "b": 51.0}  # (20 + 1) / 2 and (100 + 2) / 2
    with pytest.raises(FileNotFoundError, match=r"c/aqua/items\.jsonl"):
        mp.versus("c", "b", ["aqua"], tmp_path)
