"""The web view's screenshots in docs/ui/, and the recorded runs they show.

``python -m tests.browser.screenshots record`` records what the pages show into docs/ui/data/:
two real runs on the embedded tiers (``lemon run``, the sample GSM8K item, with the template's
team and with examples/specs/03-debate-aggregate.yaml) and a small real GRPO run (a tiny Llama
policy warm-started by SFT, then counterfactual GRPO on the synthetic environment, which
writes the credit record), minutes on two cores.

``python -m tests.browser.screenshots shoot`` starts ``lemon ui`` over docs/ui/data and
experiments/, opens the four pages in headless Chromium and writes docs/ui/*.png.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from tests.browser.chromium import ensure_chromium
from tests.browser.conftest import start_ui, wait_ready
from tests.conftest import LEMON, ROOT

DOCS = ROOT / "docs" / "ui"
DATA = DOCS / "data"
RESULTS = ROOT / "experiments"


def record() -> None:
    runs = DATA / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    for name, extra in (
        ("sample-run.jsonl", []),
        ("debate-run.jsonl", ["--spec", "examples/specs/03-debate-aggregate.yaml"]),
    ):
        (runs / name).unlink(missing_ok=True)
        subprocess.run(
            [str(LEMON), "run", *extra, "--trace", str(runs / name)], cwd=ROOT, check=True
        )
    _grpo(DATA / "training")


def _grpo(out: Path) -> None:
    from lemon.learning.simulator import canonical_specs, make_tasks, synthetic_messages
    from lemon.learning.training_config import TrainingConfig
    from lemon.spec.formatting import format_spec
    from lemon_testing.tiny_models import tiny_policy_model
    from lemon_train import sft

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base = tiny_policy_model(work / "tiny-policy", hidden_size=32)
        tasks = make_tasks(64, seed=11)
        spec = format_spec(canonical_specs(tasks[0])[-1])
        rows = [
            {
                "prompt": synthetic_messages(t),
                "completion": [{"role": "assistant", "content": spec}],
            }
            for t in tasks
        ]
        (work / "sft.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        warm = sft.run(
            TrainingConfig.model_validate(
                {
                    "stage": "sft",
                    "base_model": str(base),
                    "data": str(work / "sft.jsonl"),
                    "output_dir": str(work / "sft"),
                    "hyperparameters": {
                        "max_steps": 80, "per_device_batch_size": 8, "learning_rate": 1e-2,
                        "save_steps": 1000, "max_length": 256,
                    },
                }
            )
        )  # fmt: skip
        config = {
            "stage": "grpo",
            "base_model": str(warm),
            "data": "synthetic:32",
            "output_dir": str(work / "grpo"),
            "hyperparameters": {
                "max_steps": 8, "per_device_batch_size": 2, "group_size": 4,
                "max_completion_length": 64, "temperature": 0.7, "learning_rate": 1e-3,
                "save_steps": 100,
            },
            "counterfactual": {
                "max_mutants": 4, "lambda_cf": 1.0,
                "kinds": ["drop_dependency", "rollback_role", "downgrade_capacity",
                          "upgrade_capacity"],
            },
        }  # fmt: skip
        (work / "grpo.yaml").write_text(yaml.safe_dump(config))
        env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
        subprocess.run(
            [str(LEMON), "train", "grpo", "--config", str(work / "grpo.yaml")], env=env, check=True
        )
        out.mkdir(parents=True, exist_ok=True)
        for name in ("metrics.jsonl", "credit.jsonl"):
            shutil.copy(work / "grpo" / name, out / name)


def shoot() -> None:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        served = start_ui(DATA, RESULTS, log=Path(tmp) / "ui.log")
        try:
            runs = served.get("/ui/api/runs").json()["runs"]
            debate = next(r for r in runs if r["source"].endswith("debate-run.jsonl"))
            evals = served.get("/ui/api/evals").json()["evals"]
            single = next(e for e in evals if e["label"].endswith("pipeline/gsm8k-single-large"))
            trainings = served.get("/ui/api/training").json()["trainings"]
            training = next(t for t in trainings if t["credit"])
            pages = {
                "runs": "/ui/",
                "run": f"/ui/runs/{debate['id']}",
                "evaluation": f"/ui/evals/{single['id']}",
                "training": f"/ui/training/{training['id']}",
            }
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=str(ensure_chromium()))
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                for name, path in pages.items():
                    page.goto(served.url(path))
                    wait_ready(page)
                    if name == "evaluation":
                        page.hover(".point[data-run='gsm8k-grpo-real']")
                    page.screenshot(path=str(DOCS / f"{name}.png"), full_page=True)
                    print(DOCS / f"{name}.png")
                browser.close()
        finally:
            served.stop()


if __name__ == "__main__":
    {"record": record, "shoot": shoot}[sys.argv[1]]()
