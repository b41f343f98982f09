"""Learned policies on real models: a policy version (tiny random Llama + SmolLM2's real
tokenizer) loaded in-process by ``lemon run --policy DIR``, and the same version served over
HTTP by ``lemon serve-model`` and reached with ``--policy URL``. A random model writes no valid
spec, so these runs show the whole path: attempts, located errors, the bounded retry and the
template fallback, recorded in the JSON result and the trace."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lemon.policy.version import PolicyMetadata, read_policy, write_metadata
from tests.conftest import run_lemon
from tests.model.conftest import ModelServer

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def tiny_policy(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    version = tmp_path_factory.mktemp("policies") / "tiny-v1"
    shutil.copytree(tiny_model_dir, version)
    write_metadata(version, PolicyMetadata(version="v1", stage="base", base_model="tiny-random"))
    assert read_policy(version).version == "v1"
    return version


def _check_fallback(out: dict[str, object], attempts: int) -> None:
    policy = out["policy"]
    assert isinstance(policy, dict)
    assert policy["fallback"] is True
    assert len(policy["attempts"]) == attempts
    assert all(not a["valid"] and a["errors"] for a in policy["attempts"])
    assert "fallback" in str(out["spec_origin"])
    assert out["status"] == "succeeded"  # the template's team ran on the workers


def test_run_with_an_in_process_policy_version(tiny_policy: Path, tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    done = run_lemon(
        "run", "--task", "What is 2 + 3?", "--policy", str(tiny_policy),
        "--policy-attempts", "2", "--policy-max-tokens", "48", "--profile", "scripted",
        "--json", "--trace", str(trace),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    _check_fallback(json.loads(done.stdout), attempts=2)
    events = [json.loads(line)["event"] for line in trace.read_text().splitlines()]
    assert events.count("policy_attempt") == 2
    assert events.index("policy_fallback") < events.index("spec_ready")


def test_run_with_a_policy_behind_an_openai_endpoint(tiny_policy: Path) -> None:
    server = ModelServer(tiny_policy)
    try:
        done = run_lemon(
            "run", "--task", "What is 2 + 3?", "--policy", server.url, "--policy-model", "tiny",
            "--policy-attempts", "1", "--policy-max-tokens", "48", "--profile", "scripted",
            "--json",
        )  # fmt: skip
    finally:
        server.kill()
    assert done.returncode == 0, done.stderr
    _check_fallback(json.loads(done.stdout), attempts=1)


def test_run_with_the_shipped_learned_policy() -> None:
    """``--policy learned``: the adapter shipped in the package, checked against its pins and
    merged into the packaged SmolLM2, is the policy that writes the run's spec (its one
    attempt is recorded, valid or not; an invalid one falls back to the template team)."""
    done = run_lemon(
        "run", "--task", "Tom had 12 apples and gave 5 to Ann. How many does he have now?",
        "--policy", "learned", "--policy-attempts", "1", "--policy-max-tokens", "96",
        "--profile", "scripted", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    policy = out["policy"]
    assert isinstance(policy, dict)
    assert len(policy["attempts"]) == 1
    assert "learned policy svamp-tables@" in str(out["spec_origin"])


def test_policy_that_is_not_a_version_is_a_usage_error(tmp_path: Path) -> None:
    done = run_lemon("run", "--policy", str(tmp_path), "--profile", "scripted")
    assert done.returncode == 2
    assert "policy.json: missing" in done.stderr


def test_eval_specs_only_reports_policy_validity(tiny_policy: Path, tmp_path: Path) -> None:
    done = run_lemon(
        "eval", "--benchmark", "gsm8k", "--split", "train", "--limit", "3",
        "--policy", str(tiny_policy), "--policy-attempts", "1", "--policy-max-tokens", "48",
        "--specs-only",
        "--out", str(tmp_path), "--json", "-q",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["n"] == 3
    assert summary["policy_valid_rate"] == 0.0
    assert summary["policy_fallback_rate"] == 1.0
    assert summary["failed_runs"] == 0


def test_llm_teacher_against_a_real_model_server(tiny_policy: Path, tmp_path: Path) -> None:
    """A real OpenAI-compatible server (a random model) is asked few-shot; nothing it writes
    validates, so nothing is kept and every item is counted as rejected."""
    server = ModelServer(tiny_policy)
    out = tmp_path / "llm.jsonl"
    try:
        done = run_lemon(
            "teacher", "llm", "--endpoint", server.url, "--model", "tiny", "--benchmark",
            "gsm8k", "--limit", "2", "--max-tokens", "32", "--out", str(out), "--json", "-q",
        )  # fmt: skip
    finally:
        server.kill()
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["written"], summary["rejected"]) == (0, 2)
    assert not out.exists() or out.read_text() == ""
