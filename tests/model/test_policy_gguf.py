"""The shipped learned policy exported to GGUF and decoded on llama.cpp (lemon.backends.exporting):
the same prompt, the same greedy tokens as the merged model on transformers, and the spec
grammar applied to llama.cpp's logits. Real models: the shipped adapter over the packaged
SmolLM2-135M-Instruct, its export in the cache (made here on first use, about 15 s)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from lemon.backends.base import GenerationRequest, Message
from lemon.backends.exporting import ExportError, export_gguf, policy_gguf
from lemon.backends.gguf_header import read_header
from lemon.backends.llamacpp import LlamaBackend
from lemon.backends.local import LocalModel, ModelSource, load_model
from lemon.data import Benchmark, split_items
from lemon.policy.inference import DEFAULT_DECODING, load_policy
from lemon.policy.prompt import policy_messages
from lemon.policy.shipped import shipped_policy
from lemon.policy.version import read_policy
from lemon.spec.grammar import GrammarLimits

pytestmark = pytest.mark.model


def _tasks(n: int) -> list[str]:
    return [item.question for item in split_items(Benchmark.GSM8K, split="train")[:n]]


def _request(task: str) -> GenerationRequest:
    fmt = read_policy(shipped_policy()).prompt_format
    messages = tuple(Message(m["role"], m["content"]) for m in policy_messages(task, format=fmt))  # type: ignore[arg-type]
    return GenerationRequest(messages, DEFAULT_DECODING)


@pytest.fixture(scope="module")
def gguf() -> Path:
    return policy_gguf(shipped_policy(), quiet=True)


@pytest.fixture(scope="module")
def merged() -> LocalModel:
    """The same version on transformers: the adapter merged over the base, float32."""
    return load_model(ModelSource(str(shipped_policy()), dtype="float32"))


def test_the_export_keeps_the_base_header_and_the_shipped_directory(gguf: Path) -> None:
    header = read_header(gguf)
    assert header.architecture == "llama"
    assert header.quantization == "F16"
    assert header.metadata["llama.block_count"] == 30
    template = (shipped_policy() / "chat_template.jinja").read_text(encoding="utf-8")
    assert header.metadata["tokenizer.chat_template"] == template
    assert gguf.parent.name == "policies"
    assert gguf.name.endswith("-f16.gguf")
    shipped_policy()  # the version directory still holds its pinned files and nothing else


def test_llamacpp_writes_the_greedy_tokens_of_the_merged_model(
    gguf: Path, merged: LocalModel
) -> None:
    """Every token llama.cpp picks greedily (the end token included) is the merged model's
    top-1 at that position, so both write the same spec; the prompt is the same tokens."""
    import torch

    backend = LlamaBackend(str(gguf), slots=1, context=2048, threads=1)
    llama = asyncio.run(backend.model())
    tok = merged.tokenizer
    for task in _tasks(2):
        request = _request(task)
        prompt = merged._prompt_text(request)
        assert llama.prompt_text(request) == prompt
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        assert llama.prompt_tokens(request) == ids
        generation = asyncio.run(backend.generate(request))
        assert generation.finish_reason == "stop"
        assert generation.text.startswith("agents:")
        full = tok(prompt + generation.text, add_special_tokens=False)["input_ids"]
        assert full[: len(ids)] == ids
        wanted = [*full[len(ids) :], tok.eos_token_id]
        with torch.inference_mode():
            logits = merged.model(input_ids=torch.tensor([full])).logits[0, len(ids) - 1 :]
        assert logits.argmax(-1).tolist() == wanted, generation.text


def test_constrained_decoding_on_llamacpp_writes_valid_specs() -> None:
    policy = load_policy("learned", constrained=True)
    assert "on llama.cpp in-process, constrained to the spec grammar" in policy.label
    for task in _tasks(2):
        decision = asyncio.run(policy.write_spec(task))
        assert not decision.fallback
        assert decision.attempts[0].valid
    # names of at most 3 characters: its favourite team ("coder", "run") must change to fit
    policy.limits = GrammarLimits(max_name_chars=3)
    decision = asyncio.run(policy.write_spec(_tasks(1)[0]))
    assert not decision.fallback, decision.attempts
    assert decision.attempts[0].valid
    assert all(len(agent.name) <= 3 for agent in decision.spec.agents)
    model: Any = asyncio.run(policy.backend.model())  # type: ignore[attr-defined]
    assert model.mask_s > 0


def test_transformers_can_be_forced_and_other_bases_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEMON_POLICY_ENGINE", "transformers")
    assert "llama.cpp" not in load_policy("learned").label
    assert "llama.cpp" not in load_policy("learned", engine="transformers").label
    monkeypatch.delenv("LEMON_POLICY_ENGINE")
    assert "llama.cpp" in load_policy("learned").label
    version = tmp_path / "hub-based"
    version.mkdir()
    (version / "policy.json").write_text(
        '{"version": "x", "stage": "sft", "base_model": "HuggingFaceTB/SmolLM2-135M-Instruct",'
        ' "adapter": true}'
    )
    (version / "adapter_config.json").write_text('{"base_model_name_or_path": "x"}')
    with pytest.raises(ExportError, match="not a GGUF model"):
        export_gguf(version, tmp_path / "out.gguf")
    assert not (tmp_path / "out.gguf").exists()


def test_concurrent_first_loads_export_once(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Items decoded at once (``lemon eval --concurrency 8``) each ask for a new version's GGUF
    on first use: one export runs, the others wait for its file. (Before, each merged the model
    in its own thread and the process died in transformers' loading.)"""
    import json
    import secrets
    import shutil
    from concurrent.futures import ThreadPoolExecutor

    from lemon.backends.exporting import exported_path

    version = tmp_path / "version"
    shutil.copytree(shipped_policy(), version)
    meta = json.loads((version / "policy.json").read_text(encoding="utf-8"))
    meta["version"] = f"concurrent-{secrets.token_hex(4)}"  # a file never exported before
    (version / "policy.json").write_text(json.dumps(meta), encoding="utf-8")
    target = exported_path(version)
    assert not target.exists()
    try:
        with ThreadPoolExecutor(4) as pool:
            paths = list(pool.map(lambda _: policy_gguf(version), range(4)))
        assert set(paths) == {target}
        assert capfd.readouterr().err.count("lemon: exporting") == 1
        assert read_header(target).quantization == "F16"
    finally:
        target.unlink(missing_ok=True)
        target.with_name(f".{target.name}.lock").unlink(missing_ok=True)
