"""Model quality checks for in-process models: the per-token perplexity that tells whether a
dtype (weight-only layers, int8) keeps the model's quality (``lemon bench quantization``,
``tests/model/test_cpu_linear.py``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from lemon.backends.local import LocalModel

__all__ = ["perplexity"]


def perplexity(model: LocalModel, texts: Sequence[str]) -> float:
    """Per-token perplexity of ``texts`` under ``model``, each text scored on its own (no
    padding); texts of fewer than two tokens are skipped."""
    import torch

    total, count = 0.0, 0
    with model.lock, torch.inference_mode():
        for text in texts:
            ids = model.tokenizer(text, return_tensors="pt")["input_ids"].to(model.model.device)
            if ids.shape[1] < 2:
                continue
            loss = model.model(input_ids=ids, labels=ids).loss
            total += float(loss.float().item()) * (ids.shape[1] - 1)
            count += ids.shape[1] - 1
    if count == 0:
        raise ValueError("perplexity needs at least one text of two or more tokens")
    return math.exp(total / count)
