"""SFT step time: one optimiser step of ``lemon train sft`` on the packaged SmolLM2 (CPU or GPU).

Sizes the real-data SFT run. Builds rows in the policy's real prompt format (the system prompt
with the role library, a task padded to reach ``--length`` tokens, a canonical spec as the
completion), then runs the same trainer ``lemon train sft`` runs (completion-only loss, AdamW,
float32 on CPU, bf16 on CUDA) for ``--steps`` measured steps after one warm-up step. Reports
the median wall time per optimiser step and the tokens it processed. No checkpoint is saved
inside the measured steps. Not a side-by-side comparison, so no ``ratio``.

Run: ``lemon bench sft-step --json`` (``--base-model``, ``--batch``, ``--length``, ``--lora``).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import harness


def _rows(tokenizer: Any, count: int, length: int) -> list[dict[str, Any]]:
    from lemon.policy.prompt import policy_messages, spec_completion
    from lemon.spec.validation import parse_spec

    examples = sorted((harness.ROOT / "examples" / "specs").glob("*.yaml"))
    parsed = [parse_spec(path.read_text(), source=str(path)) for path in examples]
    rows = []
    for index in range(count):
        spec = parsed[index % len(parsed)]
        completion = [{"role": "assistant", "content": spec_completion(spec.spec, spec.output)}]
        task = f"Problem {index}: a shop sells pens at 3 dollars each."
        for _ in range(4 * length):
            prompt = policy_messages(task)
            text = tokenizer.apply_chat_template(prompt + completion, tokenize=False)
            if len(tokenizer(text, add_special_tokens=False)["input_ids"]) >= length:
                break
            task += " Each customer buys a different number of pens and pays in cash."
        rows.append({"prompt": prompt, "completion": completion})
    return rows


def run(base_model: str, batch: int, length: int, steps: int, lora: bool) -> dict[str, Any]:
    import torch
    from transformers import TrainerCallback

    from lemon.learning.training_config import TrainingConfig
    from lemon_train.loading import load_tokenizer
    from lemon_train.sft import build_trainer

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []
            self.started = 0.0

        def on_step_begin(self, *_: Any, **__: Any) -> None:
            self.started = time.perf_counter()

        def on_step_end(self, *_: Any, **__: Any) -> None:
            self.times.append(time.perf_counter() - self.started)

    tokenizer = load_tokenizer(base_model)
    with tempfile.TemporaryDirectory(prefix="bench-sft-") as work:
        data = Path(work) / "rows.jsonl"
        rows = _rows(tokenizer, batch * (steps + 1), length)
        data.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        config = TrainingConfig.model_validate(
            {
                "stage": "sft",
                "base_model": base_model,
                "data": str(data),
                "output_dir": str(Path(work) / "v"),
                "lora": {} if lora else None,
                "hyperparameters": {
                    "max_steps": steps + 1,
                    "per_device_batch_size": batch,
                    "max_length": length,
                    "save_steps": 10_000,
                    "logging_steps": 10_000,
                },
            }
        )
        trainer, _, _ = build_trainer(config, metrics_path=Path(work) / "metrics.jsonl")
        timer = StepTimer()
        trainer.add_callback(timer)
        trainer.train()
        tokens = sum(len(trainer.train_dataset[i]["input_ids"]) for i in range(batch))  # type: ignore[index,misc]
        device = "cuda" if torch.cuda.is_available() else "cpu"
    measured = timer.times[1:]
    return {
        "benchmark": "sft-step",
        "model": base_model,
        "device": device,
        "threads": torch.get_num_threads(),
        "lora": lora,
        "batch": batch,
        "length": length,
        "tokens_per_step": tokens,
        "steps_measured": len(measured),
        "seconds_per_step": round(statistics.median(measured), 3),
        "seconds_per_step_all": [round(t, 3) for t in measured],
        "warmup_step_s": round(timer.times[0], 3),
    }


def main(argv: list[str] | None = None) -> int:
    bench = harness.Harness("sft-step", __doc__)
    bench.parser.add_argument("--base-model", default="packaged")
    bench.parser.add_argument("--batch", type=int, default=4)
    bench.parser.add_argument("--length", type=int, default=512)
    bench.parser.add_argument("--steps", type=int, default=3)
    bench.parser.add_argument("--lora", action="store_true", help="LoRA (r=16, all-linear)")
    args = bench.parse(argv)
    result = run(args.base_model, args.batch, args.length, args.steps, args.lora)
    return bench.finish(
        args,
        result,
        text=lambda r: (
            f"{r['model']} on {r['device']}: {r['seconds_per_step']} s per step "
            f"(batch {r['batch']}, {r['tokens_per_step']} tokens)"
        ),
    )


if __name__ == "__main__":
    raise SystemExit(main())
