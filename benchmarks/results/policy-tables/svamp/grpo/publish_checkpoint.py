"""Publish a GRPO run's step-40 checkpoint as a policy version (how the seed-1 arms were published).

The runs were stopped after their step-40 checkpoint for CPU time; resuming them with
``max_steps: 40`` to publish went on training instead (a step 41 that had not finished after
five minutes), so this copies the checkpoint's adapter and tokenizer, the run's metrics and
credit records, and writes ``policy.json`` (the fields ``lemon_train.publishing`` writes).

Run: ``python benchmarks/results/policy-tables/svamp/grpo/publish_checkpoint.py ARM`` (credit or
global), from the repository root.
"""

import json
import shutil
import sys
from pathlib import Path

from lemon.policy.version import PolicyMetadata, file_sha256, write_metadata

arm = sys.argv[1]
root = Path("policies/tables")
run = root / f"svamp-grpo-{arm}-s1"
checkpoint = Path(f"{run}.checkpoints") / "checkpoint-40"
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
held = [r for r in rows if "heldout/reward" in r]
meta = PolicyMetadata(
    policy="svamp-tables",
    version=f"grpo-{arm}-s1",
    stage="grpo",
    base_model=str(root / "svamp-sft-s1"),
    adapter=True,
    prompt_format="lemon-policy-prompt/v2",
    data_sha256=file_sha256("benchmarks/results/tables/svamp-train/cells.jsonl"),
    parent="svamp-tables@sft-s1",
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
