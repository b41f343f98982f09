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
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from lemon.learning.training_config import TrainingConfig
from lemon.learning.training_data import TableData
from lemon_train.arguments import lora_config, trainer_arguments
from lemon_train.checkpoints import AtomicCheckpointMixin, checkpoint_step, start_run
from lemon_train.credit import (
    SpanCredit,
    byte_level_pieces,
    credit_matrix,
    span_advantages,
    span_share,
    token_offsets,
)
from lemon_train.distributed import barrier, current
from lemon_train.errors import TrainingError
from lemon_train.loading import load_model_and_tokenizer
from lemon_train.logprobs import completion_logps
from lemon_train.progress import MetricsCallback, metrics_callback
from lemon_train.publishing import save_version
from lemon_train.rewards import (
    EngineReward,
    SimulatorV2Reward,
    SpecReward,
    SyntheticReward,
    TableReward,
)
from lemon_train.sampling import shared_prefix_generate
from lemon_train.task_rows import RowKind, load_tasks

__all__ = [
    "CREDIT_FILE",
    "CounterfactualGRPOTrainer",
    "build_trainer",
    "grpo_arguments",
    "keep_rows",
    "record_credit",
    "run",
    "signal_rows",
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
        skip_flat_groups: bool = False,
        shared_prefill: bool = True,
        completion_head: bool = True,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        self.completion_head = completion_head
        """On a CPU, score the loss pass with the LM head over the completion positions only
        (:mod:`lemon_train.logprobs`)."""
        self.shared_prefill = shared_prefill
        """Sample each group from one prefill of its prompt (:mod:`lemon_train.sampling`) on
        TRL's transformers path; vLLM, continuous batching and images keep TRL's own."""
        self.spec_reward = spec_reward
        self.lambda_cf = lambda_cf
        self.skip_flat_groups = (
            skip_flat_groups
            and self.accelerator.num_processes == 1
            and getattr(self.args, "steps_per_generation", 1) == 1  # a GRPOConfig field
        )
        """Drop groups with no signal from the loss (:func:`signal_rows`; one process only:
        the ranks' batches must stay the same size otherwise)."""
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
                token_bytes=self.spec_reward.token_bytes,
            )
        trained: Any = self.model
        mode = "train" if trained.training else "eval"
        if self.lambda_cf != 0 and any(credits):
            credit = credit_matrix(credits, mask.shape[1]).to(advantages.device)
            combined = span_advantages(advantages, credit, self.lambda_cf, mask)
            self._metrics[mode]["cf/span_tokens"].append(float((credit != 0).sum()))
            output[SPAN_TERM] = combined - advantages.unsqueeze(1)
            output[GLOBAL_ADVANTAGE] = advantages
            output["advantages"] = combined
        if self.skip_flat_groups:
            rewards = list(getattr(getattr(self.spec_reward, "last", None), "rewards", []))
            group = int(self.num_generations or 1)
            keep = signal_rows(rewards, credits, group, self.lambda_cf != 0)
            self._metrics[mode]["groups_skipped"].append(float((len(rewards) - len(keep)) // group))
            output = keep_rows(output, keep)
        return output

    def _generate_single_turn(
        self,
        prompt_ids: list[list[int]],
        images: Any,
        multimodal_fields: dict[str, Any],
        num_generations: int,
        has_tool_images: bool = False,
    ) -> tuple[list[list[int]], Any]:
        """TRL's sampling, with each distinct prompt prefilled once on the transformers path
        (:func:`~lemon_train.sampling.shared_prefix_generate`); logs ``gen/prompts_prefilled``."""
        plain = (
            not self.shared_prefill
            or self.use_vllm
            or self.use_transformers_continuous_batching
            or multimodal_fields
            or (images is not None and any(image is not None for image in images))
        )
        if plain:
            trl_sampling: Any = super()._generate_single_turn
            found: tuple[list[list[int]], Any] = trl_sampling(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
            return found
        from trl.extras.profiling import profiling_context
        from trl.models.utils import unwrap_model_for_generation

        args: Any = self.args
        with (
            profiling_context(self, "transformers.generate"),
            unwrap_model_for_generation(
                self.model_wrapped,
                self.accelerator,
                gather_deepspeed3_params=args.ds3_gather_for_generation,
                generation_kwargs=self.generation_kwargs,
                gradient_checkpointing_kwargs=args.gradient_checkpointing_kwargs,
            ) as unwrapped,
            self._dist.summon_full_params(self.model_wrapped, recurse=False),
        ):
            completions, prefilled = shared_prefix_generate(
                unwrapped,
                prompt_ids,
                self.generation_config,
                pad_token_id=self._tokenizer.pad_token_id,
                eos_token_ids=self.eos_token_ids,
            )
        trained: Any = self.model
        mode = "train" if trained.training else "eval"
        self._metrics[mode]["gen/prompts_prefilled"].append(float(prefilled))
        return completions, None

    def _get_per_token_logps_and_entropies(
        self,
        model: Any,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        logits_to_keep: int,
        batch_size: int | None = None,
        compute_entropy: bool = False,
        compute_aux_loss: bool = False,
        **multimodal: Any,
    ) -> Any:
        """TRL's scoring pass; on a CPU, with the LM head over the completions only
        (:func:`~lemon_train.logprobs.completion_logps`: TRL's fused head projects every prompt
        position there). Keeps the log-probs for ``cf/span_share``."""
        compact = (
            self.completion_head
            and input_ids.device.type == "cpu"
            and not compute_aux_loss
            and all(value is None for value in multimodal.values())
        )
        if compact:
            with self.accelerator.autocast():
                logps, entropies = completion_logps(
                    model,
                    input_ids,
                    attention_mask,
                    logits_to_keep,
                    temperature=self.temperature,
                    compute_entropy=compute_entropy,
                    batch_size=batch_size,
                )
            found: Any = (logps, entropies, None)
        else:
            scoring: Any = super()._get_per_token_logps_and_entropies
            found = scoring(
                model,
                input_ids,
                attention_mask,
                logits_to_keep,
                batch_size=batch_size,
                compute_entropy=compute_entropy,
                compute_aux_loss=compute_aux_loss,
                **multimodal,
            )
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


def signal_rows(
    rewards: Sequence[float],
    credits: Sequence[Sequence[SpanCredit]],
    group: int,
    credit_on: bool,
) -> list[int]:
    """The rows of the groups that carry a learning signal: a spread of rewards within the
    group, or (with credit on) a non-zero Δc on some sample. The rest have zero advantage on
    every token, so the loss would spend a forward and backward pass on them for nothing. When
    no group has a signal, the first group is kept (its loss is zero), so the step still runs.
    """
    keep: list[int] = []
    for start in range(0, len(rewards), group):
        rows = range(start, min(start + group, len(rewards)))
        spread = max(rewards[i] for i in rows) - min(rewards[i] for i in rows) > 1e-12
        credited = credit_on and any(c.delta != 0 for i in rows for c in credits[i])
        if spread or credited:
            keep.extend(rows)
    return keep or list(range(min(group, len(rewards))))


def keep_rows(output: dict[str, Any], keep: Sequence[int]) -> dict[str, Any]:
    """``output`` (a generation batch) restricted to the rows ``keep``: every tensor whose
    first dimension is the batch is indexed, and ``num_items_in_batch`` (the loss normaliser,
    completion tokens) is recounted."""
    mask: torch.Tensor = output["completion_mask"]
    size = mask.shape[0]
    if len(keep) == size:
        return output
    index = torch.tensor(list(keep), dtype=torch.long, device=mask.device)
    kept = {
        key: value.index_select(0, index)
        if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] == size
        else value
        for key, value in output.items()
    }
    kept["num_items_in_batch"] = kept["completion_mask"].sum()
    return kept


def record_credit(
    path: Path,
    *,
    step: int,
    completions: Sequence[Sequence[int]],
    decode: Callable[[Sequence[int]], str],
    rewards: Sequence[float] | None,
    credits: Sequence[Sequence[SpanCredit]],
    token_bytes: Callable[[int], bytes] | None = None,
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
        offsets = token_offsets(decode, ids, token_bytes=token_bytes) if items else []
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


def vllm_arguments(config: TrainingConfig) -> dict[str, Any]:
    """``GRPOConfig``'s vLLM keywords for ``config.generation`` (none for transformers)."""
    gen = config.generation
    if gen.backend != "vllm":
        return {"use_vllm": False}
    out: dict[str, Any] = {"use_vllm": True, "vllm_mode": gen.vllm_mode}
    if gen.vllm_mode == "server":
        out["vllm_server_base_url"] = gen.vllm_server_base_url
    else:
        out["vllm_gpu_memory_utilization"] = gen.vllm_gpu_memory_utilization
        out["vllm_tensor_parallel_size"] = gen.vllm_tensor_parallel_size
    return out


def check_generation(config: TrainingConfig) -> None:
    """Refuse, before any model is loaded, a vLLM backend this machine cannot run: vLLM needs
    a CUDA device and the ``vllm`` package (neither is on the CPU machines LEMON is tested on,
    so there only this check and the keywords above are exercised)."""
    import importlib.util

    if config.generation.backend != "vllm":
        return
    if not torch.cuda.is_available():
        raise TrainingError(
            "generation.backend: vllm needs a CUDA device; this machine has none "
            "(use backend: transformers, the default, or give the pods nvidia.com/gpu)"
        )
    if importlib.util.find_spec("vllm") is None:
        raise TrainingError(
            "generation.backend: vllm needs the vllm package in the training image "
            "(pip install vllm; TRL's GRPOTrainer imports it)"
        )


def grpo_arguments(config: TrainingConfig) -> GRPOConfig:
    hp = config.hyperparameters
    return GRPOConfig(
        **trainer_arguments(config),
        **vllm_arguments(config),
        per_device_train_batch_size=hp.per_device_batch_size * hp.group_size,
        num_generations=hp.group_size,
        max_completion_length=hp.max_completion_length,
        temperature=hp.temperature,
        beta=hp.beta,
        loss_type=hp.loss_type,
        importance_sampling_level="token",
        scale_rewards="group",
    )


def make_reward(config: TrainingConfig, tokenizer: Any, *, kind: RowKind) -> SpecReward:
    reward = _make_reward(config, tokenizer, kind=kind)
    reward.token_bytes = byte_level_pieces(tokenizer)
    return reward


def _make_reward(config: TrainingConfig, tokenizer: Any, *, kind: RowKind) -> SpecReward:
    def decode(ids: Any) -> str:
        text: str = tokenizer.decode(list(ids), skip_special_tokens=True)
        return text

    common: dict[str, Any] = {
        "rewards": config.rewards,
        "counterfactual": config.counterfactual,
        "seed": config.hyperparameters.seed,
    }
    if kind is RowKind.SIMULATOR_V2:
        return SimulatorV2Reward(decode, **common)
    if kind is RowKind.SIMULATOR_V1:
        return SyntheticReward(decode, **common)
    engine: dict[str, Any] = {
        "profile": config.profile,
        "profiles_file": config.profiles_file,
        "worker_max_tokens": config.hyperparameters.worker_max_tokens,
    }
    if kind is RowKind.TABLE:
        assert isinstance(config.data, TableData)
        return TableReward(
            decode, table=config.data.path, live=config.hyperparameters.live_calls, **engine,
            **common,
        )  # fmt: skip
    return EngineReward(decode, **engine, **common)


def heldout_callback(config: TrainingConfig, tokenizer: Any, metrics_path: Path) -> Any:
    """The held-out scorer of ``config.heldout`` (a reward of its own, no mutants)."""
    from lemon.learning.training_config import CounterfactualConfig
    from lemon_train.heldout import HeldoutCallback
    from lemon_train.task_rows import load_tasks as rows_of

    assert config.heldout is not None
    held = config.model_copy(
        update={
            "data": config.heldout,
            "counterfactual": CounterfactualConfig(enabled=False),
        }
    )
    rows, kind = rows_of(held)
    return HeldoutCallback(
        rows=rows,
        reward=make_reward(held, tokenizer, kind=kind),
        tokenizer=tokenizer,
        every=config.heldout_steps,
        metrics_path=metrics_path,
        max_new_tokens=config.hyperparameters.max_completion_length,
    )


class WorkerBudget(TrainerCallback):
    """Stops a run after the step at which its tier-priced worker tokens (every distinct call
    the reward has read, :attr:`TableReward.distinct_tokens`) reach ``budget``, saving that
    step as the final checkpoint: ``hyperparameters.max_worker_tokens``."""

    def __init__(self, reward: TableReward, budget: float) -> None:
        self.reward = reward
        self.budget = budget
        self.stopped_at: int | None = None
        """The step the budget stopped the run at (None: it did not)."""

    def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> Any:
        if self.reward.distinct_tokens[1] >= self.budget:
            self.stopped_at = state.global_step
            control.should_training_stop = True
            control.should_save = True
        return control


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

    rows, kind = load_tasks(config)
    if model is None or tokenizer is None:
        model, tokenizer = load_model_and_tokenizer(config.base_model)
    reward = make_reward(config, tokenizer, kind=kind)
    cf = config.counterfactual
    metrics = metrics_callback(config, path=metrics_path, is_main=is_main)
    callbacks: list[Any] = [metrics]
    budget = config.hyperparameters.max_worker_tokens
    if budget is not None:  # before the held-out scorer, which scores the step it stops at
        if not isinstance(reward, TableReward):
            raise TrainingError("hyperparameters.max_worker_tokens needs table: data")
        if current().world_size > 1:
            raise TrainingError(
                "hyperparameters.max_worker_tokens: one process only (each rank counts the "
                "worker calls it read, so the ranks would stop at different steps)"
            )
        callbacks.append(WorkerBudget(reward, budget))
    if config.heldout is not None and is_main:
        callbacks.append(heldout_callback(config, tokenizer, metrics.path))
    trainer = CounterfactualGRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=grpo_arguments(config),
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=lora_config(config, model),
        callbacks=callbacks,
        spec_reward=reward,
        lambda_cf=cf.lambda_cf if cf.enabled else 0.0,
        credit_path=metrics_path.with_name(CREDIT_FILE) if metrics_path and is_main else None,
        skip_flat_groups=config.hyperparameters.skip_flat_groups,
        shared_prefill=config.hyperparameters.shared_prefill,
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


def carry_totals(reward: TableReward, metrics_path: Path) -> None:
    """A resumed run's worker totals go on from those logged up to its checkpoint (the
    metrics file is already cut back to it), so a worker budget counts the whole run."""
    last: dict[str, float] = {}
    if metrics_path.is_file():
        for line in metrics_path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            for key in ("worker_calls_total", "worker_tokens_total", "worker_priced_tokens_total"):
                if isinstance(row, dict) and isinstance(row.get(key), (int, float)):
                    last[key] = float(row[key])
    reward.carry_over(
        int(last.get("worker_calls_total", 0)),
        int(last.get("worker_tokens_total", 0)),
        last.get("worker_priced_tokens_total", 0.0),
    )


def run(config: TrainingConfig) -> Path:
    """Train, publish the version at ``config.output_dir`` (rank 0) and return its path."""
    check_generation(config)
    info, staging, resume, metrics_path = start_run(config, "grpo")
    trainer, metrics, tokenizer = build_trainer(
        config, metrics_path=metrics_path, is_main=info.is_main
    )
    if resume is not None and isinstance(trainer.spec_reward, TableReward):
        carry_totals(trainer.spec_reward, metrics_path)
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
            "max_worker_tokens": config.hyperparameters.max_worker_tokens,
            "stopped_by_worker_budget_at": next(
                (
                    c.stopped_at
                    for c in trainer.callback_handler.callbacks
                    if isinstance(c, WorkerBudget)
                ),
                None,
            ),
            "runtime_s": output.metrics.get("train_runtime"),
        }
        save_version(trainer, tokenizer, staging, config, stage="grpo", metrics=summary)
    barrier()
    return final
