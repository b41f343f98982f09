"""``lemon serve-model`` as an OpenAI-compatible server, with the official ``openai`` SDK as the
client: a real server process on a loopback port serving the packaged SmolLM2-135M GGUF on
llama.cpp (the ``tiny`` profile's model), and one serving a transformers model directory.

Greedy decoding of one request alone is deterministic on llama.cpp, so a streamed answer must
be, chunk by chunk, the non-streamed answer to the same request.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require_extra

require_extra("dev", "openai")

import openai  # noqa: E402

from tests.model.conftest import ModelServer  # noqa: E402

pytestmark = pytest.mark.model

QUESTION = [{"role": "user", "content": "Tom has 3 apples and buys 4 more. How many now?"}]


COUNTING = "1, 2, 3, 4, 5, 6,"  # SmolLM2 goes on counting until max_tokens


@pytest.fixture(scope="module")
def gguf_server() -> Iterator[ModelServer]:
    """One sequence at a time (``--slots 1``): a request that kept its slot after its client
    left would hold up the next one for as long as it runs."""
    server = ModelServer(
        served=("small", "smollm2"),
        model_args=("--profile", "tiny", "--tier", "small", "--slots", "1"),
    )
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture(scope="module")
def client(gguf_server: ModelServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=gguf_server.url, api_key="unused", max_retries=0, timeout=300)


def _chunks(stream: Any) -> list[Any]:
    return list(stream)


def test_models_are_listed_and_retrieved(client: openai.OpenAI) -> None:
    assert [model.id for model in client.models.list()] == ["small", "smollm2"]
    assert client.models.retrieve("smollm2").id == "smollm2"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("nope")


def test_chat_streams_token_by_token_the_same_answer(client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(model="small", messages=QUESTION, max_tokens=24)
    chunks = _chunks(
        client.chat.completions.create(
            model="small",
            messages=QUESTION,
            max_tokens=24,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert {chunk.object for chunk in chunks} == {"chat.completion.chunk"}
    assert len({chunk.id for chunk in chunks}) == 1
    assert all(chunk.model == "small" for chunk in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    texts = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(texts) > 3  # token by token, not one piece at the end
    assert "".join(texts) == whole.choices[0].message.content
    finish = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finish == [whole.choices[0].finish_reason]
    # usage: only in the last chunk, which has no choices, and equal to the whole answer's
    assert [chunk.usage is not None for chunk in chunks] == [False] * (len(chunks) - 1) + [True]
    assert chunks[-1].choices == []
    assert chunks[-1].usage == whole.usage
    assert whole.usage is not None
    assert whole.usage.completion_tokens > 0


def test_completions_stream_and_stop_strings_are_held_back(client: openai.OpenAI) -> None:
    prompt = "Here is a list of fruits:\n1. Apple\n2."
    free = client.completions.create(model="small", prompt=prompt, max_tokens=40)
    text = free.choices[0].text
    assert "\n" in text.strip(), text  # the list goes on: a line break to stop at
    stop = "\n" + text.strip().split("\n")[1][:2]  # the next line's start, two characters
    cut = client.completions.create(model="small", prompt=prompt, max_tokens=40, stop=[stop])
    chunks = _chunks(
        client.completions.create(
            model="smollm2", prompt=prompt, max_tokens=40, stop=[stop], stream=True
        )
    )
    assert {chunk.object for chunk in chunks} == {"text_completion"}
    assert all(chunk.usage is None for chunk in chunks)  # not asked for
    streamed = "".join(chunk.choices[0].text for chunk in chunks)
    assert streamed == cut.choices[0].text == text[: text.index(stop)]
    assert stop not in streamed
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert chunks[-1].model == "small"  # the first served name, as vLLM answers


def test_unknown_models_get_a_404_in_openai_shape(client: openai.OpenAI) -> None:
    calls = {
        "chat": lambda **kw: client.chat.completions.create(messages=QUESTION, **kw),
        "completions": lambda **kw: client.completions.create(prompt="Hello", **kw),
    }
    for name, call in calls.items():
        for stream in (False, True):
            with pytest.raises(openai.NotFoundError) as caught:
                call(model="nope", max_tokens=4, stream=stream)
            error = caught.value
            assert error.status_code == 404, name
            body = error.body
            assert isinstance(body, dict)
            assert body["code"] == "model_not_found"
            assert body["param"] == "model"
            assert body["type"] == "invalid_request_error"
            assert "`nope` does not exist" in body["message"]


def test_a_grammar_on_llama_cpp_constrains_the_answer(client: openai.OpenAI) -> None:
    grammar = {"structured_outputs": {"grammar": 'start: "maybe" | "perhaps"'}}
    whole = client.chat.completions.create(
        model="small", messages=QUESTION, max_tokens=8, extra_body=grammar
    )
    assert whole.choices[0].message.content in ("maybe", "perhaps")
    chunks = client.chat.completions.create(
        model="small", messages=QUESTION, max_tokens=8, extra_body=grammar, stream=True
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed in ("maybe", "perhaps")


def test_a_client_that_leaves_frees_its_slot(client: openai.OpenAI) -> None:
    """Thousands of tokens asked, the client gone after a few (mid-stream, or timed out before
    a whole answer): the next request on the server's one slot is answered at once."""
    stream = client.completions.create(model="small", prompt=COUNTING, max_tokens=3000, stream=True)
    for index, _chunk in enumerate(stream):
        if index == 3:
            break
    stream.close()
    quick = client.with_options(timeout=60)
    again = quick.completions.create(model="small", prompt="Hello", max_tokens=4)
    assert again.usage is not None
    assert again.usage.completion_tokens == 4
    with pytest.raises(openai.APITimeoutError):
        client.with_options(timeout=3).completions.create(
            model="small", prompt=COUNTING, max_tokens=3000
        )
    after = quick.completions.create(model="small", prompt="Hello", max_tokens=4)
    assert after.usage is not None
    assert after.usage.completion_tokens == 4


def test_transformers_models_stream_in_one_piece(tiny_model_dir: Path) -> None:
    server = ModelServer(tiny_model_dir, served=("tiny",))
    try:
        local = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=300)
        whole = local.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=6)
        chunks = _chunks(
            local.chat.completions.create(
                model="tiny",
                messages=QUESTION,
                max_tokens=6,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        with pytest.raises(openai.NotFoundError):
            local.completions.create(model="small", prompt="x", max_tokens=2)
    finally:
        server.kill()
    texts = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert "".join(texts) == whole.choices[0].message.content
    assert chunks[-1].usage == whole.usage
