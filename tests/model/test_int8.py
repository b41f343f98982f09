"""int8 weights (the CPU default): layers, quality against bfloat16, batching, refusals."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from lemon.backends.base import Decoding, GenerationRequest, Message
from lemon.backends.local import PACKAGED, LocalBackend, ModelSource, load_model

pytestmark = pytest.mark.model

# Ordinary prose and arithmetic the model can predict; not benchmark items.
TEXTS = [
    "The train left the station at nine in the morning and arrived in the city two hours later.",
    "To add fractions with the same denominator, add the numerators and keep the denominator.",
    "Tom has 3 apples and buys 4 more, so he has 3 + 4 = 7 apples in total.",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))",
]


def test_int8_replaces_every_linear_layer(tiny_model_dir: Path) -> None:
    import torch

    from lemon.backends.int8 import int8_linear_class

    model = load_model(ModelSource(str(tiny_model_dir), "int8", "cpu")).model
    assert not [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    layers = [m for m in model.modules() if isinstance(m, int8_linear_class())]
    assert len(layers) == 2 * 7 + 1  # q, k, v, o, gate, up, down per layer, and the LM head
    assert all(layer.qweight.dtype == torch.int8 for layer in layers)
    # the embedding keeps a float table for lookups although the LM head was tied to it
    assert model.get_input_embeddings().weight.dtype == torch.bfloat16


def test_int8_logits_track_bfloat16(tiny_model_dir: Path) -> None:
    import torch

    int8 = load_model(ModelSource(str(tiny_model_dir), "int8", "cpu"))
    bf16 = load_model(ModelSource(str(tiny_model_dir), "bfloat16", "cpu"))
    ids = int8.tokenizer(TEXTS[0], return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        a = int8.model(input_ids=ids).logits.float()
        b = bf16.model(input_ids=ids).logits.float()
    assert torch.isfinite(a).all()
    assert (a - b).abs().max() / b.abs().max() < 0.05


def test_packaged_int8_keeps_bfloat16_perplexity() -> None:
    int8 = load_model(ModelSource(PACKAGED, "int8", "cpu")).perplexity(TEXTS)
    bf16 = load_model(ModelSource(PACKAGED, "bfloat16", "cpu")).perplexity(TEXTS)
    assert int8 < 100  # a broken quantization gives perplexities in the thousands
    assert abs(int8 - bf16) / bf16 < 0.05, (int8, bf16)


def test_int8_batches_match_one_at_a_time(tiny_model_dir: Path) -> None:
    source = ModelSource(str(tiny_model_dir), "int8", "cpu")
    prompts = [f"Count to {i}." for i in range(4)]

    def request(text: str) -> GenerationRequest:
        return GenerationRequest((Message("user", text),), Decoding(max_tokens=6))

    async def batched() -> list[object]:
        backend = LocalBackend(source, window_s=0.05)
        return list(await asyncio.gather(*(backend.generate(request(p)) for p in prompts)))

    async def one_by_one() -> list[object]:
        backend = LocalBackend(source, window_s=0.0)
        return [await backend.generate(request(p)) for p in prompts]

    model = load_model(source)
    before = model.batches
    together = asyncio.run(batched())
    assert model.batches == before + 1
    alone = asyncio.run(one_by_one())
    assert [g.text for g in together] == [g.text for g in alone]  # type: ignore[attr-defined]


def test_auto_is_int8_on_the_cpu_and_bfloat16_on_cuda() -> None:
    source = ModelSource(PACKAGED)
    expected = "int8" if source.resolved_device() == "cpu" else "bfloat16"
    assert source.resolved_dtype() == expected
    assert ModelSource(PACKAGED, device="cpu").resolved_dtype() == "int8"
    assert ModelSource(PACKAGED, device="cuda").resolved_dtype() == "bfloat16"
    assert f"({expected}, " in LocalBackend(source).label


def test_int8_off_the_cpu_is_refused_before_loading(tiny_model_dir: Path) -> None:
    with pytest.raises(ValueError, match="int8 runs on the CPU only, not on cuda"):
        load_model(ModelSource(str(tiny_model_dir), "int8", "cuda"))
