"""Scoring the policy on held-out tasks while GRPO trains (``heldout`` in the config).

Every ``heldout_steps`` optimiser steps, :class:`HeldoutCallback` writes the greedy spec for each
held-out task (the policy's own decoding at inference: greedy, stopped at the first blank line
and extracted as :func:`lemon.policy.inference.spec_region` reads it), scores them with a reward
function of its own (no counterfactual mutants, its worker calls not counted in the run's) and
appends ``heldout/reward``, ``heldout/success``, ``heldout/validity`` and
``heldout/worker_tokens`` to the metrics file, at that step. The training run's learning curve
in worker calls reads these against ``worker_calls_total``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from lemon_train.rewards import SpecReward

__all__ = ["HeldoutCallback", "greedy_completions"]


def greedy_completions(
    model: Any, tokenizer: Any, prompts: Sequence[Sequence[dict[str, str]]], *, max_new_tokens: int
) -> list[list[int]]:
    """The greedy completion (token ids, without padding or the end token) of each chat prompt."""
    texts = [
        tokenizer.apply_chat_template(list(p), tokenize=False, add_generation_prompt=True)
        for p in prompts
    ]
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    try:
        batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    finally:
        tokenizer.padding_side = side
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model.generate(
                **batch.to(model.device),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id,
            )
    finally:
        model.train(was_training)
    width = batch["input_ids"].shape[1]
    stop = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    rows = []
    for ids in out[:, width:].tolist():
        cut = next((i for i, token in enumerate(ids) if token in stop), len(ids))
        rows.append(ids[:cut])
    return rows


class HeldoutCallback(TrainerCallback):
    """Scores the greedy policy on ``rows`` every ``every`` steps, at step 0 and at the last."""

    def __init__(
        self,
        *,
        rows: list[dict[str, Any]],
        reward: SpecReward,
        tokenizer: Any,
        every: int,
        metrics_path: Path | None,
        max_new_tokens: int = 128,
        batch: int = 16,
    ) -> None:
        self.rows = rows
        self.reward = reward
        self.tokenizer = tokenizer
        self.every = every
        self.metrics_path = metrics_path
        self.max_new_tokens = max_new_tokens
        self.batch = batch
        self.history: list[dict[str, Any]] = []

    def score(self, model: Any) -> dict[str, float]:
        rewards: list[float] = []
        valid: list[bool] = []
        success: list[float] = []
        tokens: list[int] = []
        for start in range(0, len(self.rows), self.batch):
            rows = self.rows[start : start + self.batch]
            ids = greedy_completions(
                model,
                self.tokenizer,
                [r["prompt"] for r in rows],
                max_new_tokens=self.max_new_tokens,
            )
            columns = {key: [r.get(key) for r in rows] for key in rows[0] if key != "prompt"}
            rewards += asyncio.run(
                self.reward([r["prompt"] for r in rows], [None] * len(rows), ids, **columns)
            )
            stats = self.reward.last
            valid += stats.valid
            success += stats.success + [0.0] * (len(rows) - len(stats.success))
            tokens += stats.worker_tokens
        return {
            "heldout/reward": statistics.fmean(rewards),
            "heldout/validity": statistics.fmean(map(float, valid)),
            "heldout/success": statistics.fmean(success),
            "heldout/worker_tokens": statistics.fmean(tokens) if tokens else 0.0,
            "heldout/tasks": float(len(rewards)),
        }

    def _record(self, step: int, model: Any) -> None:
        row = {"step": step, **self.score(model)}
        self.history.append(row)
        if self.metrics_path is not None:
            self.metrics_path.parent.mkdir(parents=True, exist_ok=True)
            with self.metrics_path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(row) + "\n")

    def on_train_begin(
        self, args: Any, state: Any, control: Any, model: Any = None, **_: Any
    ) -> None:
        if model is not None and state.global_step == 0:
            self._record(0, model)

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **_: Any) -> None:
        if model is not None and state.global_step % self.every == 0:
            self._record(state.global_step, model)

    def on_train_end(
        self, args: Any, state: Any, control: Any, model: Any = None, **_: Any
    ) -> None:
        """The last step too, where the run stopped between two scores (a worker budget)."""
        done = self.history[-1]["step"] if self.history else None
        if model is not None and state.global_step > 0 and done != state.global_step:
            self._record(state.global_step, model)
