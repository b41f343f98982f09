"""Weight-only CPU layers (fbgemm float16 weights, the CPU default, and int8): layers, quality
against bfloat16 and float32, batch invariance, ``auto`` and refusals."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from lemon.backends.base import Decoding, GenerationRequest, Message
from lemon.backends.local import PACKAGED, LocalBackend, ModelSource, load_model
from lemon.backends.quality import perplexity

pytestmark = pytest.mark.model

# Ordinary prose and arithmetic the model can predict; not benchmark items.
TEXTS = [
    "The train left the station at nine in the morning and arrived in the city two hours later.",
    "To add fractions with the same denominator, add the numerators and keep the denominator.",
    "Tom has 3 apples and buys 4 more, so he has 3 + 4 = 7 apples in total.",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))",
]


def require_fbgemm(dtype: str = "float16-weights") -> None:
    from lemon.backends.cpu_linear import fbgemm_runs_here

    if dtype == "float16-weights" and not fbgemm_runs_here():
        pytest.skip("fbgemm needs an x86 CPU with AVX2")


def test_int8_replaces_every_linear_layer(tiny_model_dir: Path) -> None:
    import torch

    from lemon.backends.cpu_linear import int8_linear_class

    model = load_model(ModelSource(str(tiny_model_dir), "int8", "cpu")).model
    assert not [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    layers = [m for m in model.modules() if isinstance(m, int8_linear_class())]
    assert len(layers) == 2 * 7 + 1  # q, k, v, o, gate, up, down per layer, and the LM head
    assert all(layer.qweight.dtype == torch.int8 for layer in layers)
    # the embedding keeps a float table for lookups although the LM head was tied to it
    assert model.get_input_embeddings().weight.dtype == torch.bfloat16


def test_float16_weights_replace_every_linear_layer(tiny_model_dir: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from lemon.backends.cpu_linear import float16_linear_class

    require_fbgemm()
    model = load_model(ModelSource(str(tiny_model_dir), "float16-weights", "cpu")).model
    assert not [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    layers = {name: m for name, m in model.named_modules() if isinstance(m, float16_linear_class())}
    assert len(layers) == 2 * 7 + 1
    assert model.get_input_embeddings().weight.dtype == torch.float32
    reference = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32)
    for name, original in reference.named_modules():
        if isinstance(original, torch.nn.Linear):
            expected = original.weight.detach().half().float()
            assert torch.equal(layers[name].weight_float(), expected), name


def test_float16_weights_hold_the_packaged_bfloat16_weights_exactly() -> None:
    import torch

    from lemon.backends.cpu_linear import float16_linear_class

    require_fbgemm()
    converted = load_model(ModelSource(PACKAGED, "float16-weights", "cpu")).model
    plain = dict(load_model(ModelSource(PACKAGED, "bfloat16", "cpu")).model.named_modules())
    checked = 0
    for name, layer in converted.named_modules():
        if isinstance(layer, float16_linear_class()):
            assert torch.equal(layer.weight_float(), plain[name].weight.float()), name
            checked += 1
    assert checked == 30 * 7 + 1


@pytest.mark.parametrize(
    ("dtype", "reference", "tolerance"),
    [("int8", "bfloat16", 0.05), ("float16-weights", "float32", 2e-3)],
)
def test_weight_only_logits_track_the_float_model(
    tiny_model_dir: Path, dtype: str, reference: str, tolerance: float
) -> None:
    import torch

    require_fbgemm(dtype)
    converted = load_model(ModelSource(str(tiny_model_dir), dtype, "cpu"))
    plain = load_model(ModelSource(str(tiny_model_dir), reference, "cpu"))
    ids = converted.tokenizer(TEXTS[0], return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        a = converted.model(input_ids=ids).logits.float()
        b = plain.model(input_ids=ids).logits.float()
    assert torch.isfinite(a).all()
    assert (a - b).abs().max() / b.abs().max() < tolerance


@pytest.mark.parametrize("dtype", ["int8", "float16-weights"])
def test_packaged_weight_only_keeps_bfloat16_perplexity(dtype: str) -> None:
    require_fbgemm(dtype)
    converted = perplexity(load_model(ModelSource(PACKAGED, dtype, "cpu")), TEXTS)
    bf16 = perplexity(load_model(ModelSource(PACKAGED, "bfloat16", "cpu")), TEXTS)
    assert converted < 100  # a broken conversion gives perplexities in the thousands
    assert abs(converted - bf16) / bf16 < 0.05, (converted, bf16)


@pytest.mark.parametrize("dtype", ["int8", "float16-weights"])
def test_weight_only_batches_match_one_at_a_time(tiny_model_dir: Path, dtype: str) -> None:
    require_fbgemm(dtype)
    source = ModelSource(str(tiny_model_dir), dtype, "cpu")
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


def test_auto_is_a_weight_only_dtype_on_the_cpu_and_bfloat16_on_cuda() -> None:
    from lemon.backends.cpu_linear import fbgemm_runs_here

    cpu = "float16-weights" if fbgemm_runs_here() else "int8"
    source = ModelSource(PACKAGED)
    expected = cpu if source.resolved_device() == "cpu" else "bfloat16"
    assert source.resolved_dtype() == expected
    assert ModelSource(PACKAGED, device="cpu").resolved_dtype() == cpu
    assert ModelSource(PACKAGED, device="cuda").resolved_dtype() == "bfloat16"
    assert f"({expected}, " in LocalBackend(source).label


@pytest.mark.parametrize("dtype", ["int8", "float16-weights"])
def test_weight_only_off_the_cpu_is_refused_before_loading(
    tiny_model_dir: Path, dtype: str
) -> None:
    with pytest.raises(ValueError, match=f"{dtype} runs on the CPU only, not on cuda"):
        load_model(ModelSource(str(tiny_model_dir), dtype, "cuda"))


def test_unknown_weight_only_dtype_is_refused() -> None:
    from lemon.backends.cpu_linear import convert_linears

    with pytest.raises(ValueError, match="'float8' has no weight-only layers"):
        convert_linears(object(), "float8")
