"""A fast GRPO loop on simulator v2 with the trainer's own reward and credit code.

``lemon bench learning`` needs 4 arms × 5 seeds × a few hundred steps on two shared CPU cores
in under 20 minutes. TRL's ``GRPOTrainer`` with even the tiny Llama of
:mod:`lemon_testing.tiny_models` takes about a second per step here (most of it Python overhead
of generation), so the benchmark runs this loop instead. What it shares with
``lemon train grpo`` (:mod:`lemon_train.grpo`), line for line:

- the reward function object, :class:`lemon_train.rewards.SimulatorV2Reward`: decoding the
  completion's own token ids, ``parse_spec``, the mutants of the enabled kinds picked per field,
  ``token_offsets`` and ``span_to_token_indices`` on each mutation's ``credit_span``, and
  :func:`lemon_train.credit.field_credits`;
- :func:`~lemon_train.credit.group_advantages` (TRL's formula, ``scale_rewards="group"``),
  :func:`~lemon_train.credit.credit_matrix`, :func:`~lemon_train.credit.span_advantages` and
  :func:`~lemon_train.credit.span_share`;
- the loss gradient: TRL's clipped per-token objective with one optimisation step per
  generation batch (``num_iterations = 1``, so the ratio is 1 and clipping inactive), ``beta =
  0`` and ``loss_type = "dapo"``, whose gradient is ``−Σ A[i, t] ∇log π(y_t) / N`` over the
  batch's ``N`` completion tokens; gradients clipped at norm 1 (TRL's default).

What differs: the policy is :class:`GruPolicy`, a one-layer GRU language model over the same
tokenizer (the simulators' byte-level BPE), sampled by a plain loop; Adam with a constant
learning rate.
"""

from __future__ import annotations

import asyncio
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from lemon.learning import simulator_v2
from lemon.learning.simulator import synthetic_messages
from lemon.learning.training_config import CounterfactualConfig
from lemon.reward import RewardConfig
from lemon.spec.issues import SpecError
from lemon.spec.validation import parse_spec
from lemon_train.credit import credit_matrix, group_advantages, span_advantages, span_share
from lemon_train.rewards import SimulatorV2Reward

__all__ = [
    "ArmConfig",
    "Encoder",
    "GruPolicy",
    "StepStats",
    "evaluate_greedy",
    "grpo_step",
    "sample",
    "sft",
]


class Encoder:
    """The tokenizer's prompt encoding and a decode that joins per-token strings.

    ``decode`` is what the reward function uses for the completion's text and its offsets;
    for the byte-level BPE on ASCII text it equals ``tokenizer.decode(ids,
    skip_special_tokens=True)`` (checked in ``tests/train/test_simloop.py``) at a fraction of
    the cost of decoding every prefix.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.eos = int(tokenizer.eos_token_id)
        self.pad = int(tokenizer.pad_token_id)
        special = set(tokenizer.all_special_ids)
        self.pieces = ["" if i in special else tokenizer.decode([i]) for i in range(len(tokenizer))]

    def prompt(self, text: str) -> list[int]:
        chat = self.tokenizer.apply_chat_template(
            synthetic_messages(text), add_generation_prompt=True, tokenize=False
        )
        ids: list[int] = self.tokenizer(chat, add_special_tokens=False)["input_ids"]
        return ids

    def completion(self, text: str) -> list[int]:
        ids: list[int] = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return [*ids, self.eos]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.pieces[i] for i in ids)


class GruPolicy(nn.Module):
    """A small encoder-decoder language model: a bidirectional GRU reads the prompt, a GRU
    writes the completion and attends over the prompt at every token (dot-product attention);
    the decoder's input at each step is the previous token and the mean embedding of all the
    tokens written so far (what it has already written, e.g. which agents exist).

    A decoder-only GRU of this size had to carry the whole task through 60-odd spec tokens in
    its state and, after 300 SFT steps, still wrote the same agents for every task; with
    attention each spec token can look the task's words up. Without the running mean, half the
    sampled specs listed a dependency on an agent the spec never defined."""

    def __init__(self, vocab: int, *, embed: int = 64, hidden: int = 128, bos: int = 0) -> None:
        super().__init__()
        self.bos = bos
        self.embed = nn.Embedding(vocab, embed)
        self.encoder = nn.GRU(embed, hidden // 2, batch_first=True, bidirectional=True)
        self.decoder = nn.GRU(2 * embed, hidden, batch_first=True)
        self.init = nn.Linear(hidden, hidden)
        self.query = nn.Linear(hidden, hidden)
        self.mix = nn.Linear(2 * hidden, hidden)
        self.head = nn.Linear(hidden, vocab)

    def encode(self, prompts: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """The prompt's states ``(B, P, H)`` and its padding mask ``(B, P)``."""
        ids = _pad(prompts, 0)
        mask = _pad([[1] * len(p) for p in prompts], 0).bool()
        memory, _ = self.encoder(self.embed(ids))
        return memory, mask

    def _initial(self, memory: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        weights = mask.unsqueeze(-1).float()
        mean = (memory * weights).sum(1) / weights.sum(1)
        return torch.tanh(self.init(mean)).unsqueeze(0)

    def _logits(self, out: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        scores = self.query(out) @ memory.transpose(1, 2) / memory.shape[-1] ** 0.5
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
        context = torch.softmax(scores, -1) @ memory
        logits: torch.Tensor = self.head(torch.tanh(self.mix(torch.cat([out, context], -1))))
        return logits

    def forward(
        self, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]], pad: int
    ) -> torch.Tensor:
        """Logits ``(B, Tc, V)``: position ``t`` predicts completion token ``t`` (teacher
        forcing; right padding never reaches earlier positions)."""
        memory, mask = self.encode(prompts)
        inputs = self.embed(_pad([[self.bos, *c[:-1]] for c in completions], pad))
        count = torch.arange(1, inputs.shape[1] + 1, dtype=inputs.dtype).view(1, -1, 1)
        written = torch.cat([inputs, inputs.cumsum(1) / count], -1)
        out, _ = self.decoder(written, self._initial(memory, mask))
        return self._logits(out, memory, mask)

    def start(self, prompts: Sequence[Sequence[int]]) -> tuple[torch.Tensor, Any]:
        """Logits of the first completion token and the decoding state."""
        memory, mask = self.encode(prompts)
        total = torch.zeros(len(prompts), self.embed.embedding_dim)
        state = (self._initial(memory, mask), memory, mask, total, 0)
        tokens = torch.full((len(prompts),), self.bos, dtype=torch.long)
        return self.step(tokens, state)

    def step(self, tokens: torch.Tensor, state: Any) -> tuple[torch.Tensor, Any]:
        hidden, memory, mask, total, count = state
        embedded = self.embed(tokens)
        total, count = total + embedded, count + 1
        written = torch.cat([embedded, total / count], -1).unsqueeze(1)
        out, hidden = self.decoder(written, hidden)
        return self._logits(out, memory, mask)[:, 0], (hidden, memory, mask, total, count)


def _pad(rows: Sequence[Sequence[int]], value: int) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([[*r, *([value] * (width - len(r)))] for r in rows], dtype=torch.long)


@torch.no_grad()
def sample(
    policy: GruPolicy,
    prompts: Sequence[Sequence[int]],
    *,
    eos: int,
    max_new: int,
    temperature: float,
    greedy: bool = False,
    generator: torch.Generator | None = None,
) -> list[list[int]]:
    """One completion per prompt (token ids, ending with ``eos`` unless cut at ``max_new``)."""
    logits, state = policy.start(prompts)
    done = torch.zeros(len(prompts), dtype=torch.bool)
    out: list[list[int]] = [[] for _ in prompts]
    for _ in range(max_new):
        if greedy:
            tokens = logits.argmax(-1)
        else:  # inverse-CDF sampling (torch.multinomial is several times slower on CPU)
            cdf = torch.softmax(logits / temperature, -1).cumsum(-1)
            u = torch.rand(len(prompts), 1, generator=generator) * cdf[:, -1:]
            tokens = torch.searchsorted(cdf, u)[:, 0].clamp(max=cdf.shape[-1] - 1)
        for i in (~done).nonzero()[:, 0].tolist():
            out[i].append(int(tokens[i]))
        done |= tokens == eos
        if bool(done.all()):
            break
        logits, state = policy.step(tokens, state)
    return out


def token_logps(
    policy: GruPolicy,
    prompts: Sequence[Sequence[int]],
    completions: Sequence[Sequence[int]],
    pad: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Log-probs ``(B, Tc)`` of the completion tokens, their mask, and per-token entropies."""
    targets = _pad(completions, pad)
    mask = _pad([[1] * len(c) for c in completions], 0).float()
    logp_all = torch.log_softmax(policy(prompts, completions, pad), -1)
    logps = logp_all.gather(-1, targets.unsqueeze(-1))[..., 0]
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logps, mask, entropy.detach()


def sft(
    policy: GruPolicy,
    rows: Sequence[tuple[list[int], list[int]]],
    *,
    steps: int,
    batch: int,
    lr: float,
    seed: int,
    pad: int,
) -> list[float]:
    """Cross-entropy on the completion tokens of ``(prompt, completion)`` rows; losses."""
    rng = random.Random(seed)
    optimizer = torch.optim.Adam(policy.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        chosen = rng.sample(list(rows), min(batch, len(rows)))
        logps, mask, _ = token_logps(policy, [p for p, _ in chosen], [c for _, c in chosen], pad)
        loss = -(logps * mask).sum() / mask.sum()
        optimizer.zero_grad()
        torch.autograd.backward(loss)
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses


@dataclass(frozen=True, slots=True)
class ArmConfig:
    """One arm of the benchmark: group size and counterfactual credit."""

    name: str
    group_size: int
    counterfactual: CounterfactualConfig


@dataclass(slots=True)
class StepStats:
    reward: float
    valid: float
    entropy: float
    zero_spread: float
    """Share of groups whose rewards are all equal (no gradient from the global term)."""
    span_share: float
    worker_calls: int
    mutants: int
    delta_by_kind: dict[str, float] = field(default_factory=dict)


def grpo_step(
    policy: GruPolicy,
    optimizer: torch.optim.Optimizer,
    reward: SimulatorV2Reward,
    encoder: Encoder,
    tasks: Sequence[simulator_v2.Task],
    *,
    arm: ArmConfig,
    temperature: float,
    max_new: int,
    generator: torch.Generator,
) -> StepStats:
    """Sample ``group_size`` specs per task, score them, add span credit, one Adam step."""
    g = arm.group_size
    prompts = [encoder.prompt(task.text) for task in tasks for _ in range(g)]
    completions = sample(
        policy,
        prompts,
        eos=encoder.eos,
        max_new=max_new,
        temperature=temperature,
        generator=generator,
    )
    rows = [simulator_v2.task_row(task) for task in tasks for _ in range(g)]
    columns = {key: [row[key] for row in rows] for key in rows[0]}
    stripped = [[t for t in c if t != encoder.eos] for c in completions]
    rewards = asyncio.run(
        reward(
            prompts=prompts, completions=[None] * len(prompts), completion_ids=stripped, **columns
        )
    )
    credits = reward.take_pending(len(prompts))
    stats = reward.last
    values = torch.tensor(rewards, dtype=torch.float32)
    advantages = group_advantages(values, g)
    logps, mask, entropy = token_logps(policy, prompts, completions, encoder.pad)
    lam = arm.counterfactual.lambda_cf if arm.counterfactual.enabled else 0.0
    share = 0.0
    total = advantages.unsqueeze(1).expand_as(mask)
    if lam and any(credits):
        credit = credit_matrix(credits, mask.shape[1])
        total = span_advantages(advantages, credit, lam, mask)
        share = span_share(advantages, total - advantages.unsqueeze(1), mask, logps)
    loss = -(total * logps * mask).sum() / mask.sum()
    optimizer.zero_grad()
    torch.autograd.backward(loss)
    nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
    optimizer.step()
    grouped = values.view(-1, g)
    spread = (grouped.max(1).values - grouped.min(1).values) == 0
    return StepStats(
        reward=float(values.mean()),
        valid=statistics.fmean(map(float, stats.valid)),
        entropy=float((entropy * mask).sum() / mask.sum()),
        zero_spread=float(spread.float().mean()),
        span_share=share,
        worker_calls=stats.worker_calls,
        mutants=stats.mutant_runs,
        delta_by_kind={k: statistics.fmean(v) for k, v in stats.deltas_by_kind.items()},
    )


def evaluate_greedy(
    policy: GruPolicy,
    encoder: Encoder,
    tasks: Sequence[simulator_v2.Task],
    *,
    max_new: int,
    rewards: RewardConfig,
) -> float:
    """Σ R / Σ R* of the greedy specs on ``tasks`` (expected success; invalid counts
    ``invalid_reward``)."""
    outs = sample(
        policy,
        [encoder.prompt(t.text) for t in tasks],
        eos=encoder.eos,
        max_new=max_new,
        temperature=1.0,
        greedy=True,
    )
    total = 0.0
    for task, ids in zip(tasks, outs, strict=True):
        try:
            parsed = parse_spec(encoder.decode([t for t in ids if t != encoder.eos]))
        except SpecError:
            total += rewards.invalid_reward
            continue
        total += simulator_v2.evaluate(
            parsed.spec, parsed.output, task, sampled=False, config=rewards
        ).reward
    optimum = sum(simulator_v2.optimal(t, config=rewards)[1] for t in tasks)
    return total / optimum


def group_std(rewards: Sequence[float], group_size: int) -> float:
    """Mean within-group standard deviation (Bessel) of ``rewards`` grouped as GRPO groups."""
    groups = [rewards[i : i + group_size] for i in range(0, len(rewards), group_size)]
    return statistics.fmean(statistics.stdev(g) for g in groups)
