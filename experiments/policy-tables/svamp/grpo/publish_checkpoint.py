"""Publish a GRPO run's checkpoint as a policy version (how the seed-1 arms were published, and
the long credit arm of seed 0, stopped at step 44 once its held-out reward had stopped moving).

The runs were stopped after their step-40 checkpoint for CPU time; resuming them with
``max_steps: 40`` to publish went on training instead (a step 41 that had not finished after
five minutes), so this copies the checkpoint's adapter and tokenizer, the run's metrics and
credit records, and writes ``policy.json`` (the fields ``lemon_train.publishing`` writes).

Run: ``python experiments/policy-tables/svamp/grpo/publish_checkpoint.py ARM [RUN SFT
STEP]`` from the repository root: ARM credit or global; RUN the run's name after ``grpo-ARM-``
(default ``s1``), SFT the warm start's version (default ``sft-s1``), STEP the checkpoint's step
(default 40); e.g. ``credit s0-long sft-s0-fit 40``.
"""

import json
import shutil
import sys
from pathlib import Path

from lemon.policy.version import PolicyMetadata, file_sha256, write_metadata

arm = sys.argv[1]
run_name, sft, step = (sys.argv[2:5] + ["s1", "sft-s1", "40"][len(sys.argv[2:5]) :])[:3]
root = Path("policies/tables")
run = root / f"svamp-grpo-{arm}-{run_name}"
checkpoint = Path(f"{run}.checkpoints") / f"checkpoint-{step}"
staging = Path(f"{run}.publishing")
shutil.rmtree(staging, ignore_errors=True)
staging.mkdir()
for name in (
    "adapter_config.json",
    "adapter_model.safetensors",
    "chat_template.jinja",
    "tokenizer.json",
    "tokenizer_config.json",
):
    shutil.copy2(checkpoint / name, staging / name)
for name in ("metrics.jsonl", "credit.jsonl"):
    if (Path(f"{run}.partial") / name).is_file():
        shutil.copy2(Path(f"{run}.partial") / name, staging / name)
state = json.loads((checkpoint / "trainer_state.json").read_text())
rows = [json.loads(line) for line in (staging / "metrics.jsonl").read_text().splitlines()]
held = [r for r in rows if "heldout/reward" in r and int(r["step"]) <= state["global_step"]]
meta = PolicyMetadata(
    policy="svamp-tables",
    version=f"grpo-{arm}-{run_name}",
    stage="grpo",
    base_model=str(root / f"svamp-{sft}"),
    adapter=True,
    prompt_format="lemon-policy-prompt/v2",
    data_sha256=file_sha256("tables/svamp-train/cells.jsonl"),
    parent=f"svamp-tables@{sft}",
    metrics={
        "steps": state["global_step"],
        "heldout_reward": held[-1]["heldout/reward"],
        "published_from": str(checkpoint),
    },
)
write_metadata(staging, meta)
if run.exists():
    shutil.rmtree(run)
staging.rename(run)
print(run)
