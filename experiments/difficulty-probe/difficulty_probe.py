"""Can the policy model read difficulty at all? A linear probe on its hidden states.

The learned policies' routing AUROC is 0.5 on the outcome tables (``lemon report``): they send
the items the cheap team fails to the same teams as the rest. That is either a model that cannot
see which items are hard, or training that did not teach it to act on what it sees. This script
separates the two: for each benchmark's train and test tables, the label is "the cheap team
fails this item" (SVAMP: single-medium; MMLU: quick-medium); the features are what the policy
reads, its prompt (``lemon-policy-prompt/v2`` with the task) through the policy model, the hidden
state of the prompt's last token and the mean over the prompt's tokens, at the middle and the
last layer; an L2 logistic regression (its C chosen by 5-fold cross-validation on the train
table) is fitted on the train items and scored on the test items: the test AUROC with its
bootstrap 95% interval, and the mean AUROC of the same probe fitted on train labels shuffled
across items (5 permutations: the control). Beside it, the same probe on TF-IDF features of the
task text (the routers' features) and on three surface features (the task's length in words,
its count of numbers, its count of answer options).

    python experiments/difficulty-probe/difficulty_probe.py --bench svamp --model packaged \\
        --model gguf:qwen2.5-coder-0.5b-instruct --out experiments/difficulty-probe

writes ``<out>/<bench>.json``. ``packaged`` is the 135M policy's base (SmolLM2-135M-Instruct),
``gguf:NAME`` a fetched tier model dequantized (the 0.5B policy's base). No worker model runs:
the labels come from the tables.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[2]
TABLES = ROOT / "tables"
CHEAP = {"svamp": "single-medium", "mmlu": "quick-medium"}
SHUFFLES = 5
ROUNDS = 2000

Array = npt.NDArray[np.float64]


def _split(bench: str, split: str) -> tuple[list[str], Array]:
    """The table's task texts and labels (1: the cheap team fails the item)."""
    from lemon.data import Benchmark
    from lemon.scoring import item_index
    from lemon.tables.store import Table
    from lemon.tasks import task_text

    table = Table.open(TABLES / f"{bench}-{split}")
    cheap = CHEAP[bench]
    items = table.covered(cheap)
    index = item_index(Benchmark(table.meta.benchmark))
    tasks = [task_text(index[i]) for i in items]
    labels = np.array([1.0 - table.cells[(i, cheap)].success for i in items])
    return tasks, labels


def _auroc(scores: Array, labels: Array) -> float:
    from lemon.tables.routers import auroc

    value = auroc(scores, labels > 0.5)
    if value is None:
        raise ValueError("one class is empty")
    return value


def _bootstrap(scores: Array, labels: Array, seed: int = 0) -> list[float]:
    """The AUROC's 95% interval: items resampled (:func:`lemon.scoring.stats.paired_bootstrap`,
    scores and labels together). A draw with one class only has no AUROC and stops it (never at
    these tables' sizes)."""
    from lemon.scoring.stats import paired_bootstrap

    lo, hi = paired_bootstrap(_auroc, scores, labels, rounds=ROUNDS, seed=seed)
    return [round(lo, 4), round(hi, 4)]


def probe(train_x: Array, train_y: Array, test_x: Array, test_y: Array) -> dict[str, Any]:
    """The logistic probe's test AUROC, its interval, and its shuffled-label control's."""
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    def fit(labels: Array) -> Array:
        model = make_pipeline(
            StandardScaler(),
            LogisticRegressionCV(Cs=np.logspace(-4, 2, 13), cv=5, scoring="roc_auc",
                                 max_iter=5000),
        )  # fmt: skip
        model.fit(train_x, labels)
        return np.asarray(model.predict_proba(test_x)[:, 1], dtype=np.float64)

    scores = fit(train_y)
    controls = [
        _auroc(fit(train_y[np.random.default_rng(s).permutation(len(train_y))]), test_y)
        for s in range(SHUFFLES)
    ]
    return {
        "auroc": round(_auroc(scores, test_y), 4),
        "auroc_ci95": _bootstrap(scores, test_y),
        "shuffled_auroc": round(float(np.mean(controls)), 4),
        "shuffled_auroc_range": [round(min(controls), 4), round(max(controls), 4)],
        "features": int(train_x.shape[1]),
    }


def surface(tasks: list[str]) -> Array:
    return np.array(
        [
            [
                len(t.split()),
                _numbers(t),
                len(re.findall(r"^[A-D]\)", t, re.M)),
            ]
            for t in tasks
        ],
        dtype=np.float64,
    )


def tfidf(train: list[str], test: list[str]) -> tuple[Array, Array]:
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    a = vectorizer.fit_transform(train).toarray()
    return a, vectorizer.transform(test).toarray()


def _numbers(task: str) -> int:
    return len(re.findall(r"\d+(?:\.\d+)?", task))


STUDIED_TEAMS = {
    "svamp": ("single-small", "single-medium", "single-large", "pot-medium", "pot-large"),
    "mmlu": ("quick-small", "quick-medium", "quick-large"),
}


def by_numbers(bench: str, price: float = 0.2 / 1000) -> dict[str, Any]:
    """Does the readable difficulty change which team pays? Items bucketed by their count of
    numbers: each team's accuracy and cost per bucket (train and test tables); the router that
    sends each bucket to the team of the best R_orch on the train table (``price`` per
    tier-priced token: R_orch's token cost 0.2 per 1,000), and the best such bucket router in
    hindsight on the test table (over prices 0 to 0.003), each with its accuracy minus the fixed
    teams' random hull at its cost on the test table."""
    from lemon.evals import curves
    from lemon.evals.table_report import _tasks, default_teams, load_table_matrices
    from lemon.tables.store import Table

    tables = {s: Table.open(TABLES / f"{bench}-{s}") for s in ("train", "test")}
    # the teams this analysis studied (the tier ladder, and program of thought on maths), not
    # every column the tables have since gained: a shipped result must not drift as they grow
    teams = [t for t in default_teams(tables["test"]) if t in STUDIED_TEAMS[bench]]
    data = {s: load_table_matrices(t, teams) for s, t in tables.items()}
    count = {s: np.array([_numbers(t) for t in _tasks(d.table, d.items)]) for s, d in data.items()}
    test, n = data["test"], count["test"]
    hull = curves.upper_envelope(
        [
            (float(test.cost[:, j].mean()), float(test.success[:, j].mean()))
            for j in range(len(teams))
        ]
    )
    rows = np.arange(len(n))

    def pick_for(split: str, lam: float) -> dict[int, int]:
        d, c = data[split], count[split]
        return {
            int(k): int(np.argmax(d.success[c == k].mean(0) - lam * d.cost[c == k].mean(0)))
            for k in sorted(set(c.tolist()))
        }

    def apply(picks: dict[int, int]) -> dict[str, Any]:
        fallback = picks[max(picks)]
        chosen = np.array([picks.get(int(k), fallback) for k in n])
        acc, cost = float(test.success[rows, chosen].mean()), float(test.cost[rows, chosen].mean())
        return {
            "teams": {str(k): teams[j] for k, j in picks.items()},
            "accuracy": round(acc, 4),
            "cost": round(cost, 1),
            "hull_diff": round(acc - curves.curve_at(hull, cost), 4),
        }

    hindsight = max(
        (apply(pick_for("test", lam)) | {"price": round(float(lam), 5)}
         for lam in np.linspace(0, 0.003, 301)),
        key=lambda r: r["hull_diff"],
    )  # fmt: skip
    return {
        "buckets": {
            split: {
                str(k): {"n": int((count[split] == k).sum())}
                | {
                    t: [
                        round(float(d.success[count[split] == k, j].mean()), 3),
                        round(float(d.cost[count[split] == k, j].mean()), 1),
                    ]
                    for j, t in enumerate(teams)
                }
                for k in sorted(set(count[split].tolist()))
            }
            for split, d in data.items()
        },
        "router_from_train": apply(pick_for("train", price)) | {"price": price},
        "best_in_hindsight_on_test": hindsight,
    }


def hidden_states(model_name: str, tasks: list[str]) -> dict[str, Array]:
    """Per task, the policy prompt's hidden states: last token and mean, middle and last layer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lemon.policy.prompt import SHORT_PROMPT_FORMAT, policy_messages
    from lemon_train.loading import resolve_base

    path, _ = resolve_base(model_name)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.eval()
    layers = model.config.num_hidden_layers
    middle = layers // 2
    out: dict[str, list[Array]] = {k: [] for k in ("last-final", "last-middle", "mean-final",
                                                   "mean-middle")}  # fmt: skip
    with torch.inference_mode():
        for task in tasks:
            text = tokenizer.apply_chat_template(
                policy_messages(task, format=SHORT_PROMPT_FORMAT),
                tokenize=False,
                add_generation_prompt=True,
            )
            ids = tokenizer(text, return_tensors="pt")
            states = model(**ids, output_hidden_states=True).hidden_states
            for name, layer in (("final", layers), ("middle", middle)):
                h = states[layer][0].float()
                out[f"last-{name}"].append(h[-1].numpy())
                out[f"mean-{name}"].append(h.mean(dim=0).numpy())
    return {k: np.stack(v).astype(np.float64) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bench", choices=sorted(CHEAP), required=True)
    parser.add_argument("--model", action="append", default=[], help="policy base model(s)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = parser.parse_args(argv)
    train_tasks, train_y = _split(args.bench, "train")
    test_tasks, test_y = _split(args.bench, "test")
    result: dict[str, Any] = {
        "bench": args.bench,
        "label": f"{CHEAP[args.bench]} fails",
        "n_train": len(train_y),
        "n_test": len(test_y),
        "train_positive_rate": round(float(train_y.mean()), 4),
        "test_positive_rate": round(float(test_y.mean()), 4),
        "probes": {},
    }
    path = args.out / f"{args.bench}.json"
    earlier = json.loads(path.read_text())["probes"] if path.is_file() else {}
    probes = result["probes"]
    # a model's probes from an earlier run are kept unless that model runs again
    probes |= {k: v for k, v in earlier.items() if "/" in k and k.split("/")[0] not in args.model}
    probes["surface"] = probe(surface(train_tasks), train_y, surface(test_tasks), test_y)
    probes["tfidf"] = probe(*_pair(tfidf(train_tasks, test_tasks), train_y, test_y))
    for model_name in args.model:
        start = time.perf_counter()
        train_h = hidden_states(model_name, train_tasks)
        test_h = hidden_states(model_name, test_tasks)
        seconds = round(time.perf_counter() - start, 1)
        for key in train_h:
            found = probe(train_h[key], train_y, test_h[key], test_y)
            probes[f"{model_name}/{key}"] = found | {"states_s": seconds}
        print(f"{model_name}: {seconds} s", file=sys.stderr)
    result["by_numbers"] = by_numbers(args.bench)
    args.out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")
    for name, p in probes.items():
        ci, control = p["auroc_ci95"], p["shuffled_auroc"]
        print(f"{name:55s} AUROC {p['auroc']:.3f} {ci}  shuffled {control:.3f}")
    print(json.dumps({k: v for k, v in result["by_numbers"].items() if k != "buckets"}))
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


def _pair(
    features: tuple[Array, Array], train_y: Array, test_y: Array
) -> tuple[Array, Array, Array, Array]:
    return features[0], train_y, features[1], test_y


if __name__ == "__main__":
    raise SystemExit(main())
