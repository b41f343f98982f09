"""Policy inference control flow: parse, retry with located errors, fall back, trace.

The policy's model here is the ``scripted`` test double (the control flow is what is tested),
so the valid-spec path is covered only here. tests/model/test_policy_models.py runs the same
flow on a real model (a tiny random Llama with SmolLM2's tokenizer, in-process and behind an
OpenAI-compatible server); a random model writes no valid spec, so there it covers the invalid
attempts, the retry and the template fallback."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from lemon.backends.base import BackendError, Generation, GenerationRequest
from lemon.backends.scripted import ScriptedBackend, ScriptedConfig, ScriptedRule
from lemon.events import PolicyAttempted, PolicyFellBack, TraceWriter
from lemon.policy.inference import LearnedPolicy, TemplatePolicy, extract_spec_text
from lemon.policy.prompt import policy_messages, repair_messages, spec_completion
from lemon.policy.template import template_spec
from lemon.policy.version import (
    PolicyMetadata,
    PolicyVersionError,
    publish_directory,
    read_policy,
    write_metadata,
)
from lemon.spec.validation import parse_spec

VALID = """agents:
  - name: solver
    role: math_solver
    capacity: medium
output: solver
"""
INVALID = """agents:
  - name: solver
    role: math_wizard
    capacity: huge
"""


def policy(rules: list[ScriptedRule], attempts: int = 2) -> LearnedPolicy:
    backend = ScriptedBackend(ScriptedConfig(name="policy-double", rules=tuple(rules)))
    return LearnedPolicy(backend, name="double", max_attempts=attempts)


def test_valid_first_attempt() -> None:
    decision = asyncio.run(policy([ScriptedRule(output=VALID)]).write_spec("What is 2+3?"))
    assert not decision.fallback
    assert [a.valid for a in decision.attempts] == [True]
    assert [a.name for a in decision.spec.agents] == ["solver"]
    assert decision.origin.endswith("attempt 1")


def test_invalid_then_repaired_with_located_errors_in_the_prompt() -> None:
    trace = TraceWriter(None)
    rules = [ScriptedRule(match="That spec is invalid", output=VALID), ScriptedRule(output=INVALID)]
    decision = asyncio.run(policy(rules).write_spec("What is 2+3?", trace=trace))
    assert [a.valid for a in decision.attempts] == [False, True]
    first = decision.attempts[0].errors
    assert any(e.startswith("3:11: ") and "math_wizard" in e for e in first), first
    assert any(e.startswith("4:15: ") for e in first), first
    events = [e for e in trace.events if isinstance(e, PolicyAttempted)]
    assert [e.valid for e in events] == [False, True]
    assert not decision.fallback


def test_always_invalid_falls_back_to_the_template_policy() -> None:
    trace = TraceWriter(None)
    decision = asyncio.run(
        policy([ScriptedRule(output="no yaml here: [")]).write_spec("What is 2+3?", trace=trace)
    )
    assert decision.fallback
    assert len(decision.attempts) == 2
    assert decision.spec == template_spec("What is 2+3?")[1]
    assert "fallback after 2 invalid attempt(s)" in decision.origin
    assert isinstance(trace.events[-1], PolicyFellBack)


def test_backend_failure_falls_back_without_retrying() -> None:
    rules = [ScriptedRule(fail="permanent")]
    decision = asyncio.run(policy(rules, attempts=3).write_spec("What is 2+3?"))
    assert decision.fallback
    assert len(decision.attempts) == 1
    assert "policy backend failed" in decision.attempts[0].errors[0]


def test_fenced_and_chatty_completions() -> None:
    assert extract_spec_text(f"Here you go:\n```yaml\n{VALID}```\nDone.") == VALID
    assert extract_spec_text(f"Sure! The team:\n{VALID}") == VALID
    decision = asyncio.run(policy([ScriptedRule(output=f"```yaml\n{VALID}```")]).write_spec("2+3?"))
    assert not decision.fallback


def test_template_policy_interface() -> None:
    decision = asyncio.run(TemplatePolicy().write_spec("Which? (A) x (B) y (C) z"))
    assert decision.origin == "template policy (multiple_choice)"
    assert not decision.attempts


def test_prompt_format_round_trip() -> None:
    messages = policy_messages("Add 2 and 3.")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "python_executor" in messages[0]["content"]  # the whole role library is offered
    assert "Add 2 and 3." in messages[1]["content"]
    _, spec, text = template_spec("Add 2 and 3.")
    completion = spec_completion(spec, spec.output)
    assert completion == text
    assert parse_spec(completion).spec == spec
    repaired = repair_messages(messages, "bad", ["1:1: boom"])
    assert repaired[-2] == {"role": "assistant", "content": "bad"}
    assert "1:1: boom" in repaired[-1]["content"]


class _Recorder:
    """Keeps what the policy was asked (to check the repair turn reaches the model)."""

    def __init__(self) -> None:
        self.requests: list[GenerationRequest] = []

    @property
    def model_id(self) -> str:
        return "recorder"

    @property
    def label(self) -> str:
        return "recording test double"

    async def generate(self, request: GenerationRequest) -> Generation:
        self.requests.append(request)
        if len(self.requests) > 5:
            raise BackendError("too many", transient=False)
        return Generation(INVALID, 10, 5)

    async def aclose(self) -> None:
        return None


def test_repair_turn_carries_the_errors_and_attempts_are_bounded() -> None:
    recorder = _Recorder()
    decision = asyncio.run(LearnedPolicy(recorder, name="r", max_attempts=3).write_spec("2+3?"))
    assert len(recorder.requests) == 3
    last = recorder.requests[-1].messages
    assert [m.role for m in last] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert "math_wizard" in last[-1].content
    assert decision.policy_tokens == 45


def test_policy_version_metadata(tmp_path):  # type: ignore[no-untyped-def]
    staging = tmp_path / "v1.partial"
    staging.mkdir()
    with pytest.raises(PolicyVersionError, match=r"policy\.json: missing"):
        read_policy(staging)
    write_metadata(staging, PolicyMetadata(version="v1", stage="sft", base_model="packaged"))
    with pytest.raises(PolicyVersionError, match="incomplete policy version"):
        read_policy(staging)
    (staging / "model.safetensors").write_bytes(b"x")
    (staging / "tokenizer_config.json").write_text("{}")
    final = publish_directory(staging, tmp_path / "v1")
    assert read_policy(final).stage == "sft"
    assert not staging.exists()
    (final / "policy.json").write_text('{"version": 3')
    with pytest.raises(PolicyVersionError, match=r"policy.json:1:\d+"):
        read_policy(final)
    (final / "policy.json").write_text(json.dumps({"version": "v1", "stage": "rl"}))
    with pytest.raises(PolicyVersionError, match="stage"):
        read_policy(final)


def test_the_cost_weight_asked_for_is_the_one_the_prompt_states() -> None:
    """A policy trained on the cost prompt reads its weight from the prompt; `--policy-cost-weight`
    sets it, so one policy traces accuracy against cost (the double answers a valid spec only
    when the prompt states 0.5)."""
    from lemon.policy.prompt import COST_PROMPT_FORMAT, PROMPT_FORMAT

    backend = ScriptedBackend(
        ScriptedConfig(
            name="policy-double",
            rules=(
                ScriptedRule(match=r"Cost weight: 0\.5 per 1,000 tier-priced tokens", output=VALID),
                ScriptedRule(output=INVALID),
            ),
        )
    )
    weighted = LearnedPolicy(
        backend, name="d", max_attempts=1, prompt_format=COST_PROMPT_FORMAT, cost_weight=0.5
    )
    decision = asyncio.run(weighted.write_spec("What is 2+3?"))
    assert not decision.fallback
    assert "cost weight 0.5" in weighted.label
    default = LearnedPolicy(backend, name="d", max_attempts=1, prompt_format=COST_PROMPT_FORMAT)
    assert asyncio.run(default.write_spec("What is 2+3?")).fallback  # it states 0.02
    with pytest.raises(ValueError, match=r"needs a policy trained on lemon-policy-prompt/v3"):
        LearnedPolicy(backend, name="d", prompt_format=PROMPT_FORMAT, cost_weight=0.5)
    with pytest.raises(ValueError, match="must be >= 0"):
        LearnedPolicy(backend, name="d", prompt_format=COST_PROMPT_FORMAT, cost_weight=-1)


def test_lemon_eval_refuses_a_cost_weight_the_policys_prompt_cannot_state(
    tmp_path: Path,
) -> None:
    from tests.conftest import run_lemon

    result = run_lemon(
        *("eval", "--benchmark", "svamp", "--limit", "1", "--policy", "packaged"),
        *("--policy-cost-weight", "0.1", "--profile", "scripted", "--out", str(tmp_path)),
    )
    assert result.returncode == 2, result.stderr
    assert "--policy-cost-weight: a cost weight needs a policy trained on" in result.stderr
