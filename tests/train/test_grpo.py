"""Counterfactual GRPO: span credit on real token ids, gradients through TRL's real loss, and
``lemon train grpo`` end to end on a tiny policy (real subprocess, real trainer)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from lemon.learning.simulator import (
    canonical_specs,
    evaluate,
    make_tasks,
    synthetic_messages,
)
from lemon.learning.training_config import CounterfactualConfig, TrainingConfig
from lemon.policy.version import read_policy
from lemon.reward import RewardConfig
from lemon.spec.formatting import format_spec
from lemon.spec.models import Capacity
from lemon.spec.mutations import mutations
from lemon.spec.validation import parse_spec
from lemon_train.credit import SpanCredit, credit_matrix, span_advantages
from lemon_train.rewards import SyntheticReward
from tests.train.conftest import run_train, train_env

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from lemon_testing.tiny_models import tiny_policy_model

    return tiny_policy_model(tmp_path_factory.mktemp("models") / "tiny-policy", hidden_size=32)


def _row(task: Any) -> dict[str, Any]:
    return {
        "id": task.id,
        "task": task.text,
        "domain": task.domain.value,
        "difficulty": task.difficulty.value,
        "tricky": task.tricky,
        "strict": task.strict,
    }


def test_reward_credits_land_on_the_edited_field(tiny_policy: Path) -> None:
    from lemon_train.loading import load_tokenizer

    tokenizer = load_tokenizer(str(tiny_policy))
    task = make_tasks(1, seed=5)[0]
    spec = canonical_specs(task)[-1]  # solver + checker, both with duties, both large
    text = format_spec(spec)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    reward = SyntheticReward(
        lambda i: tokenizer.decode(list(i), skip_special_tokens=True),
        rewards=RewardConfig(),
        counterfactual=CounterfactualConfig(max_mutants=64),
    )
    logged: dict[str, float] = {}
    row = _row(task)
    garbage = tokenizer("agents: [", add_special_tokens=False)["input_ids"]
    rewards = asyncio.run(
        reward(
            prompts=[None, None],
            completions=[None, None],
            completion_ids=[ids, garbage],
            log_metric=logged.__setitem__,
            **{key: [value, value] for key, value in row.items()},
        )
    )
    parsed = parse_spec(text)
    assert rewards[0] == pytest.approx(evaluate(parsed.spec, parsed.output, task).reward)
    assert rewards[1] == RewardConfig().invalid_reward
    credits = reward.take_pending(2)
    assert credits[1] == []
    expected = mutations(parsed)
    assert [c.kind for c in credits[0]] == [m.kind.value for m in expected]
    for credit, mutation in zip(credits[0], expected, strict=True):
        spelled = tokenizer.decode([ids[t] for t in credit.tokens])
        field_text = text[mutation.span[0] : mutation.span[1]]
        assert field_text in spelled  # the tokens spell the field ...
        assert spelled.count("\n") <= 1  # ... within the field's own line
        mutant = evaluate(mutation.spec, mutation.spec.output or parsed.output, task).reward
        assert credit.delta == pytest.approx(rewards[0] - mutant)
    assert logged["validity"] == 0.5
    assert "cf/delta_mean" in logged


def test_paid_mutants_on_the_simulator_are_those_whose_calls_the_batch_ran(
    tiny_policy: Path,
) -> None:
    """``mutants: paid``: credit only from mutants whose every agent call some rollout of the
    batch already made (the simulator's per-batch call count), and the same Δc as scoring it."""
    from lemon_train.loading import load_tokenizer
    from lemon_train.rewards import call_keys

    tokenizer = load_tokenizer(str(tiny_policy))
    task = make_tasks(1, seed=5)[0]
    text = format_spec(canonical_specs(task)[-1])  # solver + checker, both large
    parsed = parse_spec(text)
    every = mutations(parsed)
    sibling = format_spec(every[0].spec)  # a rollout that is the first mutant
    batch = [
        tokenizer(t, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        for t in (text, sibling)
    ]
    reward = SyntheticReward(
        lambda i: tokenizer.decode(list(i), skip_special_tokens=True),
        rewards=RewardConfig(),
        counterfactual=CounterfactualConfig(max_mutants=64, mutants="paid"),
    )
    row = _row(task)
    rewards = asyncio.run(
        reward(
            prompts=[None, None],
            completions=[None, None],
            completion_ids=batch,
            **{key: [value, value] for key, value in row.items()},
        )
    )
    ran = set(call_keys(parsed.spec, task.id)) | set(call_keys(every[0].spec, task.id))
    paid = [m for m in every if set(call_keys(m.spec, task.id)) <= ran]
    assert paid
    assert paid[0] is every[0]
    assert len(paid) < len(every)
    credits = reward.take_pending(2)[0]
    assert [c.kind for c in credits] == [m.kind.value for m in paid]
    for credit, mutation in zip(credits, paid, strict=True):
        mutant = evaluate(mutation.spec, mutation.spec.output or parsed.output, task).reward
        assert credit.delta == pytest.approx(rewards[0] - mutant)
    assert reward.last.unpaid_mutants >= len(every) - len(paid)


def _trainer(tiny_policy: Path, tmp_path: Path, lambda_cf: float) -> Any:
    from datasets import Dataset
    from trl import GRPOConfig

    from lemon_train.grpo import CounterfactualGRPOTrainer
    from lemon_train.loading import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(str(tiny_policy))
    reward = SyntheticReward(
        tokenizer.decode, rewards=RewardConfig(), counterfactual=CounterfactualConfig()
    )

    class Probe(CounterfactualGRPOTrainer):
        """Keeps the per-token log-probs the loss is computed from, to read their gradient."""

        def _get_per_token_logps_and_entropies(self, *args: Any, **kwargs: Any) -> Any:
            logps, entropies, aux = super()._get_per_token_logps_and_entropies(*args, **kwargs)
            if logps.requires_grad:
                logps.retain_grad()
                self.probe = logps
            return logps, entropies, aux

    rows = [{"prompt": synthetic_messages(t), **_row(t)} for t in make_tasks(4)]
    return Probe(
        model=model,
        reward_funcs=[reward],
        args=GRPOConfig(
            output_dir=str(tmp_path / "out"),
            per_device_train_batch_size=4,
            num_generations=2,
            max_completion_length=8,
            use_cpu=True,
            report_to=[],
            loss_type="dapo",
        ),
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        spec_reward=reward,
        lambda_cf=lambda_cf,
    ), tokenizer


def test_span_advantage_moves_gradient_only_on_its_tokens(
    tiny_policy: Path, tmp_path: Path
) -> None:
    """Through the trainer's real ``_compute_loss``: global advantage 0, one span credited."""
    trainer, tokenizer = _trainer(tiny_policy, tmp_path, 1.0)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train() otherwise
    prompt = tokenizer("<|im_start|>user\nhi<|im_end|>\n", return_tensors="pt")["input_ids"]
    completion = torch.randint(5, 100, (2, 6), generator=torch.Generator().manual_seed(0))
    credit = credit_matrix([[SpanCredit("downgrade_capacity", (2, 3), 0.7)], []], 6)
    inputs = {
        "prompt_ids": prompt.repeat(2, 1),
        "prompt_mask": torch.ones(2, prompt.shape[1], dtype=torch.long),
        "completion_ids": completion,
        "completion_mask": torch.ones(2, 6, dtype=torch.long),
        "advantages": span_advantages(torch.zeros(2), credit, 1.0),
        "num_items_in_batch": torch.tensor(12),
    }
    loss = trainer.compute_loss(trainer.model, inputs)
    loss.backward()
    grad = trainer.probe.grad
    nonzero = {tuple(index) for index in grad.nonzero().tolist()}
    assert nonzero == {(0, 2), (0, 3)}
    # dapo: −A / (tokens in batch) at ratio 1
    assert grad[0, 2].item() == pytest.approx(-0.7 / 12, rel=1e-5)


def _sft_warm_start(tiny_policy: Path, tmp_path: Path) -> Path:
    """A short SFT that teaches one valid spec (a checker reading a solver), so that sampled
    completions are mostly valid and have mutants: fast, and enough for Δc to exist."""
    from lemon_train import sft

    tasks = make_tasks(64, seed=11)
    spec = format_spec(canonical_specs(tasks[0])[-1])
    rows = [
        {
            "prompt": synthetic_messages(t),
            "completion": [{"role": "assistant", "content": spec}],
        }
        for t in tasks
    ]
    data = tmp_path / "sft.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "sft"
    config = TrainingConfig.model_validate(
        {
            "stage": "sft",
            "base_model": str(tiny_policy),
            "data": str(data),
            "output_dir": str(out),
            "termination_log": str(tmp_path / "sft-termination"),
            "hyperparameters": {
                "max_steps": 80,  # keys and values are separate tokens: 32 tokens to learn
                "per_device_batch_size": 8,
                "learning_rate": 1e-2,
                "save_steps": 1000,
                "max_length": 256,
            },
        }
    )
    return sft.run(config)


def test_lemon_train_grpo_publishes_a_version_with_delta_metrics(
    tiny_policy: Path, tmp_path: Path
) -> None:
    base = _sft_warm_start(tiny_policy, tmp_path)
    output = tmp_path / "policy" / "grpo-v1"
    log = tmp_path / "termination-log"
    log.write_text("")
    config = {
        "stage": "grpo",
        "base_model": str(base),
        "data": "synthetic:16",
        "output_dir": str(output),
        "termination_log": str(log),
        "hyperparameters": {
            "max_steps": 2,
            "per_device_batch_size": 2,
            "group_size": 4,
            "max_completion_length": 48,
            "temperature": 0.3,  # the short warm start is right in argmax, not yet sharp
            "learning_rate": 1e-3,
            "save_steps": 1,
        },
        "counterfactual": {"max_mutants": 4, "lambda_cf": 1.0},
    }
    path = tmp_path / "grpo.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    done = run_train("grpo", "--config", str(path), env=train_env(OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == str(output.resolve())
    meta = read_policy(output)
    assert meta.stage == "grpo"
    assert meta.parent == str(base.resolve())
    assert meta.metrics["steps"] == 2
    assert meta.metrics["counterfactual"] is True
    rows = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    steps = [row for row in rows if "reward" in row]
    assert len(steps) == 2
    assert all("validity" in row and "cf/span_share" in row for row in steps)
    assert any(row["validity"] > 0 for row in steps), steps
    # each step sampled its 2 tasks' groups of 4 from one prefill per task (the overridden
    # sampling ran; absent if TRL stopped calling it)
    assert all(row.get("gen/prompts_prefilled") == 2 for row in steps), steps
    assert any("cf/delta_mean" in row and row["cf/mutants"] > 0 for row in steps), steps
    credit = [json.loads(line) for line in (output / "credit.jsonl").read_text().splitlines()]
    assert {row["step"] for row in credit} == {1, 2}
    landed = [(s["completion"], c) for row in credit for s in row["samples"] for c in s["credit"]]
    assert landed, credit
    for text, entry in landed:  # each credit drawn over characters of the completion it scored
        assert entry["agent"], entry
        assert entry["spans"], entry
        assert all(0 <= start < end <= len(text) for start, end in entry["spans"]), entry
    # the credit reaches the loss: on every step whose executed mutants put credit on a span,
    # the span terms carry part of the gradient (0 if TRL stopped calling the overridden
    # methods, or called them and dropped the 2-D advantages)
    credited = {row["step"] for row in credit if any(s["credit"] for s in row["samples"])}
    assert credited, credit
    by_step = {row["step"]: row for row in steps}
    assert all(by_step[step]["cf/span_share"] > 0 for step in credited), (credited, steps)
    assert all(by_step[step]["cf/span_tokens"] > 0 for step in credited), (credited, steps)
    result = json.loads(log.read_text())
    assert result["stage"] == "grpo"
    assert result["policy"] == str(output.resolve())
    assert (output.parent / "grpo-v1.checkpoints" / "checkpoint-2").is_dir()


def test_grpo_rejects_bad_data_with_a_located_error(tmp_path: Path, tiny_policy: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"task": "What is 2 + 2?", "answer": "4"}\n{"answer": 3}\n')
    path = tmp_path / "grpo.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "stage": "grpo",
                "base_model": str(tiny_policy),
                "data": str(tasks),
                "output_dir": str(tmp_path / "out"),
            }
        )
    )
    done = run_train("grpo", "--config", str(path))
    assert done.returncode != 0
    assert f"{tasks}:2: a task row is an object with a string 'task'" in done.stderr


def test_engine_reward_executes_specs_and_reuses_calls_for_mutants(tiny_policy: Path) -> None:
    """EngineReward on the scripted profile (the engine's labelled test double): each valid spec
    runs through the real executor; mutants share the call cache, so unchanged agents are reused."""
    from lemon_train.loading import load_tokenizer
    from lemon_train.rewards import EngineReward

    tokenizer = load_tokenizer(str(tiny_policy))
    text = (
        "agents:\n  - name: solver\n    role: math_solver\n    capacity: medium\n"
        "  - name: checker\n    role: verifier\n    capacity: small\n"
        "    depends_on: [solver]\noutput: checker\n"
    )
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    reward = EngineReward(
        lambda i: tokenizer.decode(list(i), skip_special_tokens=True),
        rewards=RewardConfig(),
        counterfactual=CounterfactualConfig(max_mutants=8),
        profile="scripted",
    )
    rows = {"task": ["What is 6 times 7?"] * 2, "answer": ["42", "41"]}
    try:
        rewards = asyncio.run(
            reward(prompts=[None] * 2, completions=[None] * 2, completion_ids=[ids, ids], **rows)
        )
    finally:
        asyncio.run(reward.aclose())
    # the scripted double answers "The answer is 42.": right for row 0, wrong for row 1
    assert rewards[0] - rewards[1] == pytest.approx(1.0)
    credits = reward.take_pending(2)
    kinds = sorted(c.kind for c in credits[0])
    assert kinds == ["downgrade_capacity", "drop_dependency"]
    assert reward.cache.hits >= 2  # each mutant reuses the agent it did not change
    tokens = {c.kind: tokenizer.decode([ids[t] for t in c.tokens]) for c in credits[0]}
    assert "medium" in tokens["downgrade_capacity"]
    assert "solver" in tokens["drop_dependency"]


def test_engine_reward_scores_humaneval_in_the_sandbox(tiny_policy: Path, tmp_path: Path) -> None:
    """GRPO on HumanEval rows scores the team's program by running the item's tests in the
    sandbox (as ``lemon eval`` does), with the programmer's prefill and the configured worker
    budget: the canonical solution earns success 1, a wrong body 0."""
    from lemon.data import split_items
    from lemon.learning.training_data import parse_data
    from lemon.tasks import item_prefills
    from lemon_train.loading import load_tokenizer
    from lemon_train.rewards import EngineReward
    from lemon_train.task_rows import benchmark_rows

    right, wrong = split_items("humaneval", split="train")[:2]
    profiles = tmp_path / "profiles.yaml"
    rules = [
        {
            "match": right.entry_point,
            "output": f"```python\n{right.prompt}{right.canonical_solution}```",
        },
        {"match": wrong.entry_point, "output": "```python\n    return None\n```"},
    ]
    tier = {"type": "scripted", "scripted": {"name": "code", "rules": rules}}
    tiers = dict.fromkeys(("small", "medium", "large"), tier)
    profiles.write_text(json.dumps({"profiles": [{"name": "code", "tiers": tiers}]}))  # no aliases
    tokenizer = load_tokenizer(str(tiny_policy))
    text = "agents:\n  - name: coder\n    role: programmer\n    capacity: medium\noutput: coder\n"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    data = parse_data("benchmark:humaneval:train:2")
    rows = benchmark_rows(data, prompt_format="lemon-policy-prompt/v1")  # type: ignore[arg-type]
    assert [row["id"] for row in rows] == [right.id, wrong.id]
    assert rows[0]["answer"] is None
    assert rows[0]["benchmark"] == "humaneval"
    reward = EngineReward(
        lambda i: tokenizer.decode(list(i), skip_special_tokens=True),
        rewards=RewardConfig(),
        counterfactual=CounterfactualConfig(enabled=False),
        profile="code",
        profiles_file=str(profiles),
        call_cache=False,
        worker_max_tokens=123,
    )
    columns = {key: [row[key] for row in rows] for key in ("task", "answer", "benchmark", "id")}
    try:
        rewards = asyncio.run(
            reward(prompts=[None] * 2, completions=[None] * 2, completion_ids=[ids, ids], **columns)
        )
        requests = reward._get_backends()[Capacity.MEDIUM].requests
    finally:
        asyncio.run(reward.aclose())
    assert rewards[0] - rewards[1] == pytest.approx(1.0, abs=0.01)  # success 1 vs 0, tokens ~
    assert len(requests) == 2
    assert {r.decoding.max_tokens for r in requests} == {123}
    assert {r.prefill for r in requests} == {item_prefills(right).get("programmer", "")}


def test_grpo_benchmark_data_rows_and_located_errors() -> None:
    """``benchmark:<name>[:<split>[:<limit>[:<offset>]]]`` selects shipped items as GRPO rows
    (the policy prompt of the task the agents see, the gold answer); the data string is parsed
    once, when the config is read, and bad forms say what is wrong."""
    from lemon.data import split_items
    from lemon.learning.training_config import TrainingConfig
    from lemon.learning.training_data import BenchmarkData
    from lemon.policy.prompt import policy_messages
    from lemon.tasks import task_text
    from lemon_train.errors import TrainingError
    from lemon_train.task_rows import load_tasks

    def rows_of(data: str) -> list[dict[str, object]]:
        config = TrainingConfig(stage="grpo", data=data, output_dir="/tmp/unused")
        assert isinstance(config.data, BenchmarkData)
        return load_tasks(config)[0]

    items = split_items("gsm8k", split="train")[3:5]
    rows = rows_of("benchmark:gsm8k:train:2:3")
    assert [row["id"] for row in rows] == [item.id for item in items]
    assert [row["answer"] for row in rows] == [item.answer_text for item in items]
    assert rows[0]["prompt"] == policy_messages(task_text(items[0]))
    assert len(rows_of("benchmark:multiarith")) == len(split_items("multiarith", split="train"))
    for data, message in [
        ("benchmark:", "expected benchmark:<name>"),
        ("benchmark:gsm8k:train:ten", "limit must be a whole number, not 'ten'"),
        ("benchmark:nope", "'nope'"),
        ("benchmark:gsm8k:validation", "'validation'"),
    ]:
        with pytest.raises(ValueError, match=message):
            rows_of(data)
    with pytest.raises(TrainingError, match="no items selected"):
        rows_of("benchmark:gsm8k:train:5:100000")


def test_mutation_kinds_and_the_counterfactual_switch(tiny_policy: Path) -> None:
    """``counterfactual.kinds`` limits the mutants; ``enabled: false`` leaves no span credit."""
    from lemon.spec.mutations import MutationKind
    from lemon_train.loading import load_tokenizer

    tokenizer = load_tokenizer(str(tiny_policy))
    task = make_tasks(1, seed=5)[0]
    ids = tokenizer(format_spec(canonical_specs(task)[-1]), add_special_tokens=False)["input_ids"]
    row = {key: [value] for key, value in _row(task).items()}

    def credits(config: CounterfactualConfig) -> list[SpanCredit]:
        reward = SyntheticReward(tokenizer.decode, rewards=RewardConfig(), counterfactual=config)
        asyncio.run(reward(prompts=[None], completions=[None], completion_ids=[ids], **row))
        return reward.take_pending(1)[0]

    only = credits(CounterfactualConfig(kinds=[MutationKind.DOWNGRADE_CAPACITY], max_mutants=64))
    assert {c.kind for c in only} == {"downgrade_capacity"}
    assert len(only) == 2  # solver and checker are both large
    assert credits(CounterfactualConfig(enabled=False)) == []
    assert len(credits(CounterfactualConfig(max_mutants=2))) == 2  # K caps the mutants


def test_grpo_resumes_from_its_last_checkpoint(tiny_policy: Path, tmp_path: Path) -> None:
    """A rerun with a higher max_steps continues from the newest checkpoint (in-process)."""
    from lemon_train import grpo

    def config(steps: int) -> TrainingConfig:
        return TrainingConfig.model_validate(
            {
                "stage": "grpo",
                "base_model": str(tiny_policy),
                "data": "synthetic:8",
                "output_dir": str(tmp_path / "v1"),
                "termination_log": str(tmp_path / "termination-log"),
                "hyperparameters": {
                    "max_steps": steps,
                    "per_device_batch_size": 1,
                    "group_size": 2,
                    "max_completion_length": 8,
                    "save_steps": 1,
                },
            }
        )

    first = grpo.run(config(1))
    assert read_policy(first).metrics["resumed_from_step"] is None
    shutil.rmtree(first)  # the version is published; the checkpoints stay beside it
    second = grpo.run(config(2))
    meta = read_policy(second)
    assert meta.metrics["resumed_from_step"] == 1
    assert meta.metrics["steps"] == 2
    steps = [
        json.loads(line)["step"] for line in (second / "metrics.jsonl").read_text().splitlines()
    ]
    assert set(steps) == {2}  # only the step trained after resuming


def test_two_way_credit_sweeps_tiers_and_lands_on_creating_tokens(tiny_policy: Path) -> None:
    """Simulator v2 with every kind: a capacity field is scored at all three tiers and credited
    R − their mean on the value token; presence edits credit the tokens that create the thing."""
    from lemon.learning import simulator_v2 as v2
    from lemon.spec.models import Capacity
    from lemon.spec.mutations import PAPER_KINDS, TWO_WAY_KINDS
    from lemon_train.loading import load_tokenizer
    from lemon_train.rewards import SimulatorV2Reward

    tokenizer = load_tokenizer(str(tiny_policy))
    task = v2.Task(
        "t",
        (
            v2.Need("math_solver", Capacity.LARGE, True),
            v2.Need("programmer", Capacity.SMALL, False),
        ),
        (0.2,) * 7,
        "Task: algebra hard exact; coding easy loose.",
    )
    choices: list[v2.Choice] = [None, (Capacity.MEDIUM, True), (Capacity.SMALL, False)]
    spec = v2.spec_for([*choices, (Capacity.LARGE, False), None, None], Capacity.SMALL)
    text = format_spec(spec)  # math (medium, duties), code, test (not needed), final
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    config = CounterfactualConfig(kinds=[*PAPER_KINDS, *TWO_WAY_KINDS], max_mutants=64)
    reward = SimulatorV2Reward(tokenizer.decode, rewards=RewardConfig(), counterfactual=config)
    row = {key: [value] for key, value in v2.task_row(task).items()}
    (r,) = asyncio.run(reward(prompts=[None], completions=[None], completion_ids=[ids], **row))
    credits = reward.take_pending(1)[0]

    def score(s: Any) -> float:
        return v2.evaluate(s, "final", task).reward

    def with_math(tier: Capacity) -> Any:
        return v2.spec_for(
            [None, (tier, True), (Capacity.SMALL, False), (Capacity.LARGE, False), None, None],
            Capacity.SMALL,
        )

    def spelled(credit: SpanCredit) -> str:
        return "".join(tokenizer.decode([ids[t]]) for t in credit.tokens)

    by_text = {spelled(c): c for c in credits}
    tiers = [score(with_math(t)) for t in Capacity]
    math_tier = by_text["medium\n"]  # math's tier: the value token only
    assert math_tier.kind == "capacity"
    assert math_tier.delta == pytest.approx(r - sum(tiers) / 3)
    removal = by_text["  - name: test\n"]  # the agent's name line
    assert removal.kind == "remove_agent"
    without = v2.spec_for([*choices, None, None, None], Capacity.SMALL)
    assert removal.delta == pytest.approx(r - score(without))
    assert removal.delta < 0  # an unneeded agent: removing it pays
    duties = by_text['    duties: "Be exact."\n']  # key and value: the key decides
    assert duties.kind == "rollback_role"
    assert by_text[", test"].kind == "drop_dependency"  # the separator opens the entry
    # calls with the batch's reuse cache: the spec's 4; each other tier of math, code and test
    # re-runs that agent and final (2 × 2 × 3), final's other tiers 1 each (2); math without
    # duties 2; each dropped edge re-runs final (3); removing an agent re-runs final exactly as
    # dropping its edge did (0 new)
    assert reward.last.worker_calls == 4 + 12 + 2 + 2 + 3


def test_lemon_train_grpo_on_simulator_v2_with_two_way_edits(
    tiny_policy: Path, tmp_path: Path
) -> None:
    base = _sft_warm_start(tiny_policy, tmp_path)
    output = tmp_path / "policy" / "grpo-v2"
    config = {
        "stage": "grpo",
        "base_model": str(base),
        "data": "synthetic-v2:8",
        "output_dir": str(output),
        "termination_log": str(tmp_path / "termination-log"),
        "hyperparameters": {
            "max_steps": 2,
            "per_device_batch_size": 2,
            "group_size": 4,
            "max_completion_length": 48,
            "temperature": 0.3,
            "learning_rate": 1e-3,
            "save_steps": 10,
        },
        "counterfactual": {
            "max_mutants": 16,
            "kinds": [
                "drop_dependency",
                "rollback_role",
                "downgrade_capacity",
                "upgrade_capacity",
                "remove_agent",
            ],
        },
    }
    path = tmp_path / "grpo.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    done = run_train("grpo", "--config", str(path), env=train_env(OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    steps = [row for row in rows if "reward" in row]
    assert len(steps) == 2
    assert any(row.get("cf/mutants", 0) > 0 for row in steps), steps
    assert all(0.0 <= row["cf/span_share"] <= 1.0 for row in steps)
    assert any(row.get("worker_calls", 0) > 0 for row in steps), steps
    assert read_policy(output).metrics["kinds"][-1] == "remove_agent"


def test_generation_through_vllm_sets_trls_vllm_arguments(tmp_path: Path) -> None:
    from lemon_train.grpo import grpo_arguments

    def config(**generation: Any) -> TrainingConfig:
        return TrainingConfig.model_validate(
            {"stage": "grpo", "data": "synthetic:4", "output_dir": str(tmp_path / "o"),
             "generation": generation}
        )  # fmt: skip

    plain = grpo_arguments(config())
    assert plain.use_vllm is False
    server = grpo_arguments(
        config(backend="vllm", vllm_mode="server", vllm_server_base_url="http://vllm:8000")
    )
    assert (server.use_vllm, server.vllm_mode, server.vllm_server_base_url) == (
        True,
        "server",
        "http://vllm:8000",
    )
    colocate = grpo_arguments(config(backend="vllm", vllm_gpu_memory_utilization=0.45))
    assert (colocate.use_vllm, colocate.vllm_mode) == (True, "colocate")
    assert colocate.vllm_gpu_memory_utilization == 0.45


def test_vllm_generation_on_a_machine_without_cuda_fails_before_loading(tmp_path: Path) -> None:
    output = tmp_path / "policy" / "v"
    path = tmp_path / "grpo.yaml"
    path.write_text(
        yaml.safe_dump(
            {"stage": "grpo", "data": "synthetic:4", "output_dir": str(output),
             "generation": {"backend": "vllm", "vllm_mode": "colocate"}}
        ),
        encoding="utf-8",
    )  # fmt: skip
    # no visible GPU, on any machine (this one has none anyway)
    done = run_train("grpo", "--config", str(path), env=train_env(CUDA_VISIBLE_DEVICES=""))
    assert done.returncode != 0
    assert "generation.backend: vllm needs a CUDA device; this machine has none" in done.stderr
    assert not list(tmp_path.glob("policy/*")), "nothing is written for a run that cannot start"
