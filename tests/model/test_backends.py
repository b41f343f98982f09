"""The openai backend against a real `lemon serve-model` process, and in-process batching."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from lemon.backends.base import Decoding, GenerationRequest, Message
from lemon.backends.local import LocalBackend, ModelSource, load_model
from lemon.backends.openai import OpenAIBackend
from lemon.engine import AgentStatus, ExecutionOptions, RunStatus, execute
from lemon.events import AgentFinished, Event, TraceWriter
from lemon.spec import Capacity, parse_spec
from tests.model.conftest import ModelServer

pytestmark = pytest.mark.model

CHAIN = """\
agents:
  - {name: a, role: planner, capacity: small}
  - {name: b, role: math_solver, capacity: medium, depends_on: [a]}
  - {name: c, role: verifier, capacity: large, depends_on: [b]}
"""


def request(text: str, max_tokens: int = 12) -> GenerationRequest:
    return GenerationRequest((Message("user", text),), Decoding(max_tokens=max_tokens))


def test_http_answers_match_in_process_answers(
    model_server: ModelServer, tiny_model_dir: Path
) -> None:
    async def both() -> tuple[object, object]:
        remote = OpenAIBackend(model_server.url, model="tiny")
        local = LocalBackend(ModelSource(str(tiny_model_dir), "float32"))
        try:
            return await remote.generate(request("What is 2+2?")), await local.generate(
                request("What is 2+2?")
            )
        finally:
            await remote.aclose()

    over_http, in_process = asyncio.run(both())
    assert over_http == in_process  # same text and the same token accounting
    assert over_http.prompt_tokens > 10  # type: ignore[attr-defined]
    assert over_http.completion_tokens == 12  # type: ignore[attr-defined]  # random weights: no EOS


def test_completions_and_prefill(model_server: ModelServer) -> None:
    async def calls() -> tuple[object, object]:
        chat = OpenAIBackend(model_server.url, model="tiny")
        text = OpenAIBackend(model_server.url, model="tiny", mode="completions")
        try:
            prefilled = await chat.generate(
                GenerationRequest((Message("user", "Hi"),), Decoding(max_tokens=4), "```python\n")
            )
            raw = await text.generate(request("Once upon a time", 5))
            return prefilled, raw
        finally:
            await chat.aclose()
            await text.aclose()

    prefilled, raw = asyncio.run(calls())
    assert prefilled.text.startswith("```python\n")  # type: ignore[attr-defined]
    assert raw.completion_tokens == 5  # type: ignore[attr-defined]


def test_bad_requests_get_openai_style_400s(model_server: ModelServer) -> None:
    url = model_server.url
    bad = httpx.post(f"{url}/chat/completions", json={"messages": "nope"}, timeout=30)
    assert bad.status_code == 400
    assert bad.json()["error"]["type"] == "invalid_request_error"
    unknown = httpx.post(
        f"{url}/chat/completions",
        json={"model": "nope", "messages": [{"role": "user", "content": "x"}], "stream": True},
        timeout=30,
    )
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "model_not_found"
    broken = httpx.post(
        f"{url}/completions",
        content=b"{not json",
        timeout=30,
        headers={"content-type": "application/json"},
    )
    assert broken.status_code == 400
    assert httpx.get(f"{url}/models", timeout=30).json()["data"][0]["id"] == "tiny"


def test_a_spec_runs_over_http(model_server: ModelServer) -> None:
    parsed = parse_spec(CHAIN)

    async def go():  # type: ignore[no-untyped-def]
        backend = OpenAIBackend(model_server.url, model="tiny")
        try:
            return await execute(
                parsed.spec,
                task="What is 2+2?",
                backends=dict.fromkeys(Capacity, backend),
                options=ExecutionOptions(decoding=Decoding(max_tokens=8)),
            )
        finally:
            await backend.aclose()

    result = asyncio.run(go())
    assert result.status is RunStatus.SUCCEEDED
    assert all(a.completion_tokens == 8 for a in result.agents)


def test_server_killed_mid_run(model_server: ModelServer, tmp_path: Path) -> None:
    parsed = parse_spec(CHAIN)
    path = tmp_path / "trace.jsonl"

    def kill_after_a(event: Event) -> None:
        if isinstance(event, AgentFinished) and event.agent == "a":
            model_server.kill()

    trace = TraceWriter(path, on_event=kill_after_a)

    async def go():  # type: ignore[no-untyped-def]
        backend = OpenAIBackend(model_server.url, model="tiny", timeout_s=10)
        try:
            return await execute(
                parsed.spec,
                task="What is 2+2?",
                backends=dict.fromkeys(Capacity, backend),
                trace=trace,
                options=ExecutionOptions(
                    decoding=Decoding(max_tokens=4), backoff_s=0.05, max_attempts=3
                ),
            )
        finally:
            await backend.aclose()

    result = asyncio.run(go())
    trace.close()
    a, b, c = result.agents
    assert a.status is AgentStatus.SUCCEEDED
    assert b.status is AgentStatus.FAILED
    assert b.attempts == 3  # connection refused is transient: retried, then given up
    assert "cannot reach" in (b.error or "")
    assert c.status is AgentStatus.SKIPPED
    assert result.status is RunStatus.FAILED
    lines = path.read_text().splitlines()
    assert '"event": "run_finish"' in lines[-1]


def test_concurrent_calls_share_one_forward_batch(tiny_model_dir: Path) -> None:
    source = ModelSource(str(tiny_model_dir), "float32")
    prompts = [f"Count to {i}." for i in range(4)]

    async def batched() -> list[object]:
        backend = LocalBackend(source, window_s=0.05)
        return list(await asyncio.gather(*(backend.generate(request(p, 6)) for p in prompts)))

    async def one_by_one() -> list[object]:
        backend = LocalBackend(source, window_s=0.0)
        return [await backend.generate(request(p, 6)) for p in prompts]

    model = load_model(source)
    before = model.batches
    together = asyncio.run(batched())
    assert model.batches == before + 1
    alone = asyncio.run(one_by_one())
    assert model.batches == before + 5
    assert [g.text for g in together] == [g.text for g in alone]  # type: ignore[attr-defined]
    assert [g.completion_tokens for g in together] == [6] * 4  # type: ignore[attr-defined]
