"""Weight-only linear layers for decoding on the CPU: float16 weights (fbgemm) and int8.

Decoding a small model on a CPU is bound by reading weights and by how well one weight read is
shared across the rows of a batch. Two layer kinds replace ``nn.Linear`` after loading:

- ``float16-weights`` (the CPU default where fbgemm runs, i.e. x86 with AVX2): weights are packed
  once into fbgemm's float16 GEMM layout (``quantized::linear_prepack_fp16``) and every product
  runs in ``quantized::linear_dynamic_fp16``: float32 activations times float16 weights, with
  float32 accumulation. A bfloat16 checkpoint loses nothing (float16 holds every bfloat16 value
  of a weight's magnitude exactly) and the rest of the model computes in float32. The kernel
  streams each packed weight block once for all rows, so a batch of 4 costs about 1.2 single
  steps of matrix products here.
- ``int8``: one int8 weight per entry and one scale per output channel (symmetric,
  ``w ≈ q · s`` with ``s = max|w_row| / 127``), bfloat16 activations, products in torch's
  ``_weight_int8pack_mm`` (dequantizes on the fly). Half the bytes of float16, but its AVX2
  kernel scales worse with batch size. The packaged model is itself a 4-bit GGUF, so per-channel
  int8 loses nothing that matters either.

Both are CPU-only. ``lemon bench quantization`` compares them with bfloat16 side by side
(perplexity, speed alone and batched, batch invariance). torch is imported when a model is
converted, never at import time (the core's rule); the layer classes are built then too and
are reachable as ``Float16WeightLinear`` and ``Int8WeightLinear``.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = [
    "CPU_WEIGHT_DTYPES",
    "convert_linears",
    "fbgemm_runs_here",
    "float16_linear_class",
    "int8_linear_class",
    "load_dtype",
]

CPU_WEIGHT_DTYPES = ("float16-weights", "int8")
"""The in-process dtypes that replace linear layers (CPU only)."""


@functools.cache
def fbgemm_runs_here() -> bool:
    """Whether fbgemm's kernels run on this CPU (x86 with AVX2 or better)."""
    import torch

    engines = torch.backends.quantized.supported_engines
    capability = torch.backends.cpu.get_cpu_capability()
    return "fbgemm" in engines and capability.startswith(("AVX2", "AVX512"))


@functools.cache
def float16_linear_class() -> Any:
    """The ``nn.Module`` class of fbgemm float16-weight layers (built on first use)."""
    import torch
    from torch import nn

    class Float16WeightLinear(nn.Module):
        """A frozen ``nn.Linear`` with fbgemm-packed float16 weights, float32 activations."""

        def __init__(self, linear: nn.Linear) -> None:
            super().__init__()
            bias = None if linear.bias is None else linear.bias.detach().float()
            self.packed = torch.ops.quantized.linear_prepack_fp16(
                linear.weight.detach().float(), bias
            )
            self.in_features = linear.in_features
            self.out_features = linear.out_features

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            shape = x.shape
            flat = x.reshape(-1, shape[-1]).float()
            y: torch.Tensor = torch.ops.quantized.linear_dynamic_fp16(flat, self.packed)
            return y.view(*shape[:-1], self.out_features)

        def weight_float(self) -> torch.Tensor:
            """The stored weights, unpacked (float32): what every product multiplies by."""
            weight: torch.Tensor = torch.ops.quantized.linear_unpack_fp16(self.packed)[0]
            return weight.float()

        def extra_repr(self) -> str:
            return (
                f"in_features={self.in_features}, out_features={self.out_features}, "
                "float16 weights (fbgemm)"
            )

    return Float16WeightLinear


@functools.cache
def int8_linear_class() -> Any:
    """The ``nn.Module`` class of int8 linear layers (built on first use; imports torch)."""
    import torch
    from torch import nn

    class Int8WeightLinear(nn.Module):
        """A frozen ``nn.Linear`` with int8 weights (per output channel), bf16 activations."""

        qweight: torch.Tensor
        scale: torch.Tensor
        bias: torch.Tensor | None

        def __init__(
            self, linear: nn.Linear, activation_dtype: torch.dtype = torch.bfloat16
        ) -> None:
            super().__init__()
            weight = linear.weight.detach().float()
            scale = (weight.abs().amax(dim=1) / 127.0).clamp(min=torch.finfo(torch.float32).tiny)
            qweight = torch.round(weight / scale[:, None]).clamp(-127, 127).to(torch.int8)
            self.register_buffer("qweight", qweight.contiguous())
            self.register_buffer("scale", scale.to(activation_dtype))
            bias = None if linear.bias is None else linear.bias.detach().to(activation_dtype)
            self.register_buffer("bias", bias)
            self.in_features = linear.in_features
            self.out_features = linear.out_features
            self.activation_dtype = activation_dtype

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            shape = x.shape
            flat = x.reshape(-1, shape[-1]).to(self.activation_dtype)
            y = torch._weight_int8pack_mm(flat, self.qweight, self.scale)
            if self.bias is not None:
                y = y + self.bias
            return y.view(*shape[:-1], self.out_features)

        def extra_repr(self) -> str:
            return f"in_features={self.in_features}, out_features={self.out_features}, int8"

    return Int8WeightLinear


def __getattr__(name: str) -> Any:
    if name == "Int8WeightLinear":
        return int8_linear_class()
    if name == "Float16WeightLinear":
        return float16_linear_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_dtype(dtype: str) -> str:
    """The dtype a model is loaded in before ``convert_linears`` replaces its linear layers."""
    return {"float16-weights": "float32", "int8": "bfloat16"}.get(dtype, dtype)


def convert_linears(model: Any, dtype: str) -> int:
    """Replace every ``nn.Linear`` in ``model`` (in place) by a ``dtype`` layer.

    ``dtype`` is one of :data:`CPU_WEIGHT_DTYPES`; returns how many layers were replaced. Tied
    weights (the LM head and the token embedding) are untied: the embedding keeps its float
    table for lookups. ``float16-weights`` raises ``RuntimeError`` where fbgemm cannot run.
    """
    from torch import nn

    if dtype == "float16-weights":
        if not fbgemm_runs_here():
            raise RuntimeError(
                "dtype float16-weights needs fbgemm (an x86 CPU with AVX2); use int8 or bfloat16"
            )
        layer = float16_linear_class()
    elif dtype == "int8":
        layer = int8_linear_class()
    else:
        raise ValueError(f"dtype {dtype!r} has no weight-only layers ({CPU_WEIGHT_DTYPES})")
    replaced = 0
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, nn.Linear):
                setattr(module, name, layer(child))
                replaced += 1
    return replaced
