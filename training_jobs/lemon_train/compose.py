"""One LoRA adapter from two stacked ones: ``python -m lemon_train.compose LOWER UPPER --out DIR``.

A GRPO version trained from an SFT warm start that is itself an adapter version is a second
adapter over the first (``UPPER``'s ``base_model`` is ``LOWER``). Both are low-rank updates of
the same weights, so their sum is exactly one adapter of rank ``r1 + r2`` over ``LOWER``'s base:

    W + s1 B1 A1 + s2 B2 A2 = W + [s1 B1 | s2 B2] [A1 ; A2]      (scale alpha / r = 1)

A module only one of them adapts gets zeros in the other's rows. The result is a complete policy
version (``UPPER``'s metadata and tokenizer, ``LOWER``'s base) that loads without ``LOWER``: what
a package can ship. Refused, with the reason: DoRA or rsLoRA adapters, ``modules_to_save``,
different task types, or an ``UPPER`` whose base is not ``LOWER``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from lemon.policy.version import PolicyMetadata, publish_directory, read_policy, write_metadata

__all__ = ["compose", "main"]

_WEIGHTS = "adapter_model.safetensors"
_CONFIG = "adapter_config.json"
_COPIED = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "metrics.jsonl")


class ComposeError(ValueError):
    """Two adapters that cannot be summed into one (the message says why)."""


def _adapter(path: Path) -> tuple[dict[str, Any], float]:
    config = json.loads((path / _CONFIG).read_text(encoding="utf-8"))
    for key in ("use_dora", "use_rslora"):
        if config.get(key):
            raise ComposeError(f"{path}: {key} adapters cannot be summed as plain LoRA")
    if config.get("modules_to_save"):
        raise ComposeError(f"{path}: modules_to_save (fully trained modules) cannot be summed")
    if config.get("rank_pattern") or config.get("alpha_pattern"):
        raise ComposeError(f"{path}: per-module ranks or alphas are not supported")
    return config, float(config["lora_alpha"]) / float(config["r"])


def _pairs(tensors: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Module prefix -> (A, B)."""
    found: dict[str, dict[str, Any]] = {}
    for key, value in tensors.items():
        for part in ("lora_A", "lora_B"):
            marker = f".{part}.weight"
            if key.endswith(marker):
                found.setdefault(key.removesuffix(marker), {})[part] = value
    broken = sorted(m for m, p in found.items() if len(p) != 2)
    if broken:
        raise ComposeError(f"modules with only one of lora_A/lora_B: {', '.join(broken[:3])}")
    unknown = sorted(k for k in tensors if not k.endswith((".lora_A.weight", ".lora_B.weight")))
    if unknown:
        raise ComposeError(f"tensors that are not LoRA factors: {', '.join(unknown[:3])}")
    return {m: (p["lora_A"], p["lora_B"]) for m, p in found.items()}


def compose(lower: Path, upper: Path, out: Path) -> Path:
    """Write the single adapter version equal to ``upper`` stacked on ``lower`` into ``out``."""
    import torch
    from safetensors.torch import load_file, save_file

    low_meta, up_meta = read_policy(lower), read_policy(upper)
    if not (low_meta.adapter and up_meta.adapter):
        raise ComposeError("both versions must be LoRA adapters (policy.json: adapter true)")
    if Path(up_meta.base_model).resolve() != lower.resolve():
        raise ComposeError(
            f"{upper}: its base_model is {up_meta.base_model!r}, not {lower}: not stacked on it"
        )
    (low_cfg, s1), (up_cfg, s2) = _adapter(lower), _adapter(upper)
    if low_cfg.get("task_type") != up_cfg.get("task_type"):
        raise ComposeError("the two adapters have different task types")
    r1, r2 = int(low_cfg["r"]), int(up_cfg["r"])
    low, up = _pairs(load_file(str(lower / _WEIGHTS))), _pairs(load_file(str(upper / _WEIGHTS)))
    tensors: dict[str, Any] = {}
    for module in sorted(set(low) | set(up)):
        a1, b1 = low.get(module, (None, None))
        a2, b2 = up.get(module, (None, None))
        like_a, like_b = (a1, b1) if a1 is not None else (a2, b2)
        if a1 is None:
            a1, b1 = torch.zeros(r1, like_a.shape[1]), torch.zeros(like_b.shape[0], r1)
        if a2 is None:
            a2, b2 = torch.zeros(r2, like_a.shape[1]), torch.zeros(like_b.shape[0], r2)
        dtype = like_a.dtype
        tensors[f"{module}.lora_A.weight"] = torch.cat([a1.float(), a2.float()], 0).to(dtype)
        tensors[f"{module}.lora_B.weight"] = torch.cat([b1.float() * s1, b2.float() * s2], 1).to(
            dtype
        )
    layers = sorted(
        set(low_cfg.get("layers_to_transform") or []) | set(up_cfg.get("layers_to_transform") or [])
    )
    targets = sorted(set(low_cfg["target_modules"]) | set(up_cfg["target_modules"]))
    config = {
        **low_cfg,
        "r": r1 + r2,
        "lora_alpha": r1 + r2,  # scale 1: the tiers' scales are folded into B
        "target_modules": targets,
        "layers_to_transform": layers or None,
    }
    meta = PolicyMetadata.model_validate(
        {
            **up_meta.model_dump(),
            "base_model": low_meta.base_model,
            "parent": f"{low_meta.policy}@{low_meta.version}",
        }
    )
    staging = out.with_name(f".{out.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        save_file(tensors, str(staging / _WEIGHTS), metadata={"format": "pt"})
        (staging / _CONFIG).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        for name in _COPIED:
            if (upper / name).is_file():
                shutil.copy2(upper / name, staging / name)
        write_metadata(staging, meta)
    except BaseException:  # nothing half-written is left behind
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return publish_directory(staging, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lemon_train.compose", description=__doc__)
    parser.add_argument("lower", type=Path, help="the adapter version trained first (e.g. SFT)")
    parser.add_argument("upper", type=Path, help="the adapter version trained on top of it")
    parser.add_argument("--out", type=Path, required=True, help="where the one adapter goes")
    args = parser.parse_args(argv)
    try:
        print(compose(args.lower, args.upper, args.out))
    except (ValueError, OSError) as exc:  # ComposeError and PolicyVersionError are ValueErrors
        print(f"compose: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
