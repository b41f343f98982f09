"""``lemon train grpo``: counterfactual GRPO on R_orch.

TRL's :class:`~trl.GRPOTrainer` samples ``group_size`` specs per task and scores them with an
async reward function (:mod:`lemon_train.rewards`: parse, execute or simulate, R_orch). With
counterfactual credit on, the reward function also scores up to K single-field mutants of each
valid spec and leaves, per completion, ``Δc = R(spec) − R(mutant)`` with the token positions
of the edited field. :class:`CounterfactualGRPOTrainer` hooks the one place where TRL has both
the group-normalised advantages and the padded completions
(``_generate_and_score_completions``) and replaces the ``(B,)`` advantages by ``(B, T)`` ones:
``A_i + λ_cf · Σ Δc`` on the span tokens (:mod:`lemon_train.credit`). TRL's ``_compute_loss``
takes 2-D advantages as they are (tested with trl 1.16), and importance sampling stays at token
level (``importance_sampling_level="token"``), so each token's ratio meets its own advantage.

Batch sizes: ``per_device_batch_size`` counts *tasks* per device step; TRL's batch is
``per_device_batch_size × group_size`` completions.

Data: ``synthetic:<N>`` (simulator v1, :mod:`lemon.learning.simulator`: closed-form R_orch,
short prompts), ``synthetic-v2:<N>`` (simulator v2, :mod:`lemon.learning.simulator_v2`) or
JSONL task rows ``{"task", "answer", "benchmark", "id"}`` or ``benchmark:<name>[:<split>[:<limit>
[:<offset>]]]`` (a shipped benchmark's items; prompted with
:func:`lemon.policy.prompt.policy_messages`, executed on ``profile``'s backends and scored as
``lemon eval`` scores them: HumanEval programs run their tests in the sandbox).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from trl import GRPOConfig, GRPOTrainer

from lemon.jsonl import JsonLineError, json_lines
from lemon.learning import simulator_v2
from lemon.learning.simulator import make_tasks, parse_synthetic_data, synthetic_messages
from lemon.learning.training_config import TrainingConfig
from lemon_train.common import (
    AtomicCheckpointMixin,
    MetricsCallback,
    TrainingError,
    checkpoint_step,
    load_model_and_tokenizer,
    lora_config,
    metrics_callback,
    save_version,
    start_run,
    trainer_arguments,
)
from lemon_train.credit import (
    SpanCredit,
    credit_matrix,
    span_advantages,
    span_share,
    token_offsets,
)
from lemon_train.distributed import barrier
from lemon_train.rewards import EngineReward, SimulatorV2Reward, SpecReward, SyntheticReward

__all__ = [
    "CREDIT_FILE",
    "CounterfactualGRPOTrainer",
    "build_trainer",
    "grpo_arguments",
    "load_tasks",
    "record_credit",
    "run",
]

CREDIT_FILE = "credit.jsonl"
"""Written beside the metrics file: per generation batch, the sampled specs and where their
counterfactual credit landed (:func:`record_credit`)."""


SPAN_TERM = "cf_span_term"
"""Key of the ``(B, T)`` span terms ``λ_cf · Σ Δc`` in a generation batch."""
GLOBAL_ADVANTAGE = "cf_global_advantages"
"""Key of TRL's own ``(B,)`` group advantages, kept beside the combined ones."""


class CounterfactualGRPOTrainer(AtomicCheckpointMixin, GRPOTrainer):
    """GRPOTrainer whose advantages carry counterfactual span credit, ``(B, T)``.

    ``spec_reward`` must be one of the trainer's reward functions; after each generation batch
    its pending span credits are turned into per-token advantages. With ``lambda_cf == 0`` or
    no credits the advantages stay TRL's own ``(B,)`` tensor.
    """

    def __init__(
        self,
        *args: Any,
        spec_reward: SpecReward,
        lambda_cf: float,
        credit_path: Path | None = None,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        self.spec_reward = spec_reward
        self.lambda_cf = lambda_cf
        self.credit_path = credit_path
        """Where :func:`record_credit` appends each batch's credit (None: not recorded)."""

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output: dict[str, Any] = super()._generate_and_score_completions(inputs)
        advantages: torch.Tensor = output["advantages"]
        mask: torch.Tensor = output["completion_mask"]
        credits = self.spec_reward.take_pending(advantages.shape[0])
        if self.credit_path is not None:
            pairs = zip(output["completion_ids"], mask, strict=True)
            rows = [ids[keep.bool()].tolist() for ids, keep in pairs]
            tokenizer: Any = self.processing_class
            rewards = list(getattr(getattr(self.spec_reward, "last", None), "rewards", []))
            record_credit(
                self.credit_path,
                step=self.state.global_step + 1,
                completions=rows,
                decode=lambda ids: str(tokenizer.decode(list(ids), skip_special_tokens=True)),
                rewards=rewards if len(rewards) == len(rows) else None,
                credits=credits,
            )
        if self.lambda_cf == 0 or not any(credits):
            return output
        credit = credit_matrix(credits, mask.shape[1]).to(advantages.device)
        combined = span_advantages(advantages, credit, self.lambda_cf, mask)
        trained: Any = self.model
        mode = "train" if trained.training else "eval"
        self._metrics[mode]["cf/span_tokens"].append(float((credit != 0).sum()))
        output[SPAN_TERM] = combined - advantages.unsqueeze(1)
        output[GLOBAL_ADVANTAGE] = advantages
        output["advantages"] = combined
        return output

    def _get_per_token_logps_and_entropies(self, *args: Any, **kwargs: Any) -> Any:
        found = super()._get_per_token_logps_and_entropies(*args, **kwargs)
        self._last_logps = found[0]
        return found

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        """TRL's loss, plus ``cf/span_share``: the span terms' share of the gradient w.r.t. the
        sampled tokens' logits (:func:`lemon_train.credit.span_share`), from the log-probs the
        loss itself computed."""
        compute: Any = super()._compute_loss
        loss: torch.Tensor = compute(model, inputs)
        trained: Any = self.model
        mode = "train" if trained.training else "eval"
        term = inputs.get(SPAN_TERM)
        logps = getattr(self, "_last_logps", None)
        if term is None or logps is None:
            self._metrics[mode]["cf/span_share"].append(0.0)
            return loss
        share = span_share(inputs[GLOBAL_ADVANTAGE], term, inputs["completion_mask"], logps)
        self._metrics[mode]["cf/span_share"].append(share)
        return loss


def record_credit(
    path: Path,
    *,
    step: int,
    completions: Sequence[Sequence[int]],
    decode: Callable[[Sequence[int]], str],
    rewards: Sequence[float] | None,
    credits: Sequence[Sequence[SpanCredit]],
) -> None:
    """Append one generation batch's counterfactual credit to ``path`` (JSONL), for people to
    read (``lemon ui`` draws it over the spec's text); training never reads it back.

    One line per batch: ``{"step": N, "samples": [{"completion": TEXT, "reward": R | null,
    "credit": [{"kind", "agent", "delta", "spans": [[START, END], ...]}]}]}``, a sample per
    completion in the batch's order. ``spans`` are character ranges of ``TEXT`` (0-based, end
    exclusive): the decoded characters of the tokens the credit ``delta`` (Δc) was added to,
    adjacent tokens merged; ``kind`` is the mutation kind (``capacity`` for a field scored at
    every tier) and ``agent`` the agent whose entry holds the span. ``step`` is the optimiser
    step the batch trains (as in the metrics file). After a resume a step may appear again:
    the later lines of a step replace the earlier ones.
    """
    from lemon.spec.issues import SpecError
    from lemon.spec.source import read_document

    samples = []
    for index, (ids, items) in enumerate(zip(completions, credits, strict=True)):
        text = decode(ids)
        offsets = token_offsets(decode, ids) if items else []
        agents: list[tuple[int, int, str]] = []
        if items:
            try:
                data, source_map, _ = read_document(text, source="<completion>")
                body = data.get("spec", data) if isinstance(data, dict) else {}
                base: tuple[str, ...] = ("spec",) if body is not data else ()
                for i, agent in enumerate(body.get("agents") or []):
                    start, end = source_map.span((*base, "agents", i))
                    agents.append((start, end, str(agent.get("name", ""))))
            except (SpecError, KeyError, AttributeError, TypeError):  # names no agent then
                agents = []
        entries = []
        for item in items:
            spans: list[list[int]] = []
            for token in sorted(item.tokens):
                if token >= len(offsets) or offsets[token][0] == offsets[token][1]:
                    continue
                start, end = offsets[token]
                if spans and spans[-1][1] >= start:
                    spans[-1][1] = max(spans[-1][1], end)
                else:
                    spans.append([start, end])
            first = spans[0][0] if spans else -1
            agent = next((name for s, e, name in agents if s <= first < e), "")
            entries.append({"kind": item.kind, "agent": agent, "delta": item.delta, "spans": spans})
        reward = rewards[index] if rewards is not None else None
        samples.append({"completion": text, "reward": reward, "credit": entries})
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"step": step, "samples": samples}, ensure_ascii=False) + "\n")


def load_tasks(config: TrainingConfig) -> tuple[list[dict[str, Any]], bool]:
    """The GRPO dataset rows and whether they are the simulator's (located errors otherwise)."""
    try:
        count = parse_synthetic_data(config.data)
        count_v2 = simulator_v2.parse_data(config.data)
    except ValueError as exc:
        raise TrainingError(f"data: {exc}") from None
    if count_v2 is not None:
        tasks = simulator_v2.make_tasks(count_v2, seed=config.hyperparameters.seed)
        rows_v2 = [
            {"prompt": synthetic_messages(t.text), **simulator_v2.task_row(t)} for t in tasks
        ]
        return rows_v2, True
    if count is not None:
        rows: list[dict[str, Any]] = [
            {
                "prompt": synthetic_messages(task),
                "task": task.text,
                "id": task.id,
                "domain": task.domain.value,
                "difficulty": task.difficulty.value,
                "tricky": task.tricky,
                "strict": task.strict,
            }
            for task in make_tasks(count, seed=config.hyperparameters.seed)
        ]
        return rows, True
    from lemon.policy.prompt import policy_messages

    if config.data.startswith("benchmark:"):
        return benchmark_tasks(config.data), False
    path = Path(config.data)
    rows = []
    try:
        for where, _, row in json_lines(path):
            if not isinstance(row, dict) or not isinstance(row.get("task"), str):
                raise TrainingError(f"{where}: a task row is an object with a string 'task'")
            rows.append(
                {
                    "prompt": policy_messages(row["task"]),
                    "task": row["task"],
                    "answer": None if row.get("answer") is None else str(row["answer"]),
                    "benchmark": str(row.get("benchmark", "")),
                    "id": str(row.get("id", f"{path.name}:{where.rsplit(':', 1)[1]}")),
                }
            )
    except OSError as exc:
        raise TrainingError(f"data: {path}: cannot read: {exc.strerror or exc}") from None
    except JsonLineError as exc:
        raise TrainingError(str(exc)) from None
    if not rows:
        raise TrainingError(f"data: {path}: no task rows")
    return rows, False


def parse_benchmark_data(data: str) -> tuple[str, str, int, int]:
    """``benchmark:<name>[:<split>[:<limit>[:<offset>]]]`` as (name, split, limit, offset);
    split defaults to train (the held-in items), limit 0 means every item."""
    parts = data.split(":")
    if parts[0] != "benchmark" or not 2 <= len(parts) <= 5 or not parts[1]:
        raise TrainingError(
            f"data: {data!r}: expected benchmark:<name>[:<split>[:<limit>[:<offset>]]]"
        )
    name, split = parts[1], parts[2] if len(parts) > 2 and parts[2] else "train"
    numbers = []
    for label, text in zip(("limit", "offset"), parts[3:], strict=False):
        if not text.isdigit():
            raise TrainingError(f"data: {data!r}: {label} must be a whole number, not {text!r}")
        numbers.append(int(text))
    limit, offset = [*numbers, 0, 0][:2]
    return name, split, limit, offset


def benchmark_tasks(data: str) -> list[dict[str, Any]]:
    """GRPO task rows for a shipped benchmark's items (``lemon data`` lists them); the reward
    finds each row's item again by ``benchmark`` and ``id`` (HumanEval tests, prefills)."""
    from lemon.data import Benchmark, DataError, Split, split_items
    from lemon.data.items import ChoiceItem, NumericItem
    from lemon.policy.prompt import policy_messages
    from lemon.tasks import task_text

    name, split, limit, offset = parse_benchmark_data(data)
    try:
        items = split_items(Benchmark(name), split=Split(split))
    except ValueError as exc:  # unknown benchmark or split; DataError is a ValueError too
        known = ", ".join(b.value for b in Benchmark)
        kind = "data" if isinstance(exc, DataError) else "benchmark or split"
        raise TrainingError(f"data: {data!r}: {kind}: {exc} (benchmarks: {known})") from None
    items = items[offset : offset + limit if limit else None]
    if not items:
        raise TrainingError(f"data: {data!r}: no items selected")
    rows: list[dict[str, Any]] = []
    for item in items:
        task = task_text(item)
        answer = (
            item.answer_text
            if isinstance(item, NumericItem)
            else item.answer
            if isinstance(item, ChoiceItem)
            else None
        )
        rows.append(
            {
                "prompt": policy_messages(task),
                "task": task,
                "answer": answer,
                "benchmark": item.benchmark.value,
                "id": item.id,
            }
        )
    return rows


def grpo_arguments(config: TrainingConfig) -> GRPOConfig:
    hp = config.hyperparameters
    return GRPOConfig(
        **trainer_arguments(config),
        per_device_train_batch_size=hp.per_device_batch_size * hp.group_size,
        num_generations=hp.group_size,
        max_completion_length=hp.max_completion_length,
        temperature=hp.temperature,
        beta=hp.beta,
        loss_type=hp.loss_type,
        importance_sampling_level="token",
        scale_rewards="group",
    )


def make_reward(config: TrainingConfig, tokenizer: Any, *, synthetic: bool) -> SpecReward:
    def decode(ids: Any) -> str:
        text: str = tokenizer.decode(list(ids), skip_special_tokens=True)
        return text

    common: dict[str, Any] = {
        "rewards": config.rewards,
        "counterfactual": config.counterfactual,
        "seed": config.hyperparameters.seed,
    }
    if synthetic and simulator_v2.parse_data(config.data) is not None:
        return SimulatorV2Reward(decode, **common)
    if synthetic:
        return SyntheticReward(decode, **common)
    return EngineReward(
        decode,
        profile=config.profile,
        profiles_file=config.profiles_file,
        worker_max_tokens=config.hyperparameters.worker_max_tokens,
        **common,
    )


def build_trainer(
    config: TrainingConfig,
    *,
    metrics_path: Path | None = None,
    is_main: bool = True,
    model: Any = None,
    tokenizer: Any = None,
) -> tuple[CounterfactualGRPOTrainer, MetricsCallback, Any]:
    """The configured trainer, its metrics callback and the tokenizer; nothing trained yet.

    ``model``/``tokenizer`` may be passed in (benchmarks reuse one loaded model).
    """
    from datasets import Dataset

    rows, synthetic = load_tasks(config)
    if model is None or tokenizer is None:
        model, tokenizer = load_model_and_tokenizer(config.base_model)
    reward = make_reward(config, tokenizer, synthetic=synthetic)
    cf = config.counterfactual
    metrics = metrics_callback(config, path=metrics_path, is_main=is_main)
    trainer = CounterfactualGRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=grpo_arguments(config),
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=lora_config(config),
        callbacks=[metrics],
        spec_reward=reward,
        lambda_cf=cf.lambda_cf if cf.enabled else 0.0,
        credit_path=metrics_path.with_name(CREDIT_FILE) if metrics_path and is_main else None,
    )
    return trainer, metrics, tokenizer


def summarise(history: list[dict[str, Any]]) -> dict[str, Any]:
    """The version's metrics: last-step values and means over the run of the key figures."""
    keys = ("reward", "validity", "worker_tokens", "cf/delta_mean", "cf/span_share")
    out: dict[str, Any] = {}
    for key in keys:
        values = [row[key] for row in history if isinstance(row.get(key), (int, float))]
        if values:
            out[f"{key}_mean"] = statistics.fmean(values)
            out[f"{key}_last"] = values[-1]
    return out


def run(config: TrainingConfig) -> Path:
    """Train, publish the version at ``config.output_dir`` (rank 0) and return its path."""
    info, staging, resume, metrics_path = start_run(config, "grpo")
    trainer, metrics, tokenizer = build_trainer(
        config, metrics_path=metrics_path, is_main=info.is_main
    )
    try:
        output = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    finally:
        closer = getattr(trainer.spec_reward, "aclose", None)
        if closer is not None:
            import asyncio

            asyncio.run(closer())
    final = Path(config.output_dir).resolve()
    if info.is_main:
        summary = {
            **summarise(metrics.history),
            "steps": trainer.state.global_step,
            "counterfactual": config.counterfactual.enabled,
            "lambda_cf": config.counterfactual.lambda_cf,
            "kinds": [kind.value for kind in config.counterfactual.kinds],
            "loss_type": config.hyperparameters.loss_type,
            "resumed_from_step": checkpoint_step(resume) if resume else None,
            "runtime_s": output.metrics.get("train_runtime"),
        }
        save_version(trainer, tokenizer, staging, config, stage="grpo", metrics=summary)
    barrier()
    return final
