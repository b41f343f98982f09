"""A policy version exported to GGUF, for llama.cpp: its weights merged, its base's metadata.

The learned policy is a LoRA adapter over a GGUF base (the packaged SmolLM2-135M-Instruct, or
a pinned ``gguf:NAME`` model), which the transformers backend loads by dequantizing the base
(:mod:`lemon.backends.converting`) and merging the adapter. The export writes what that merge
computes with as a GGUF file llama.cpp runs (:mod:`lemon.backends.llamacpp`): the tensors are
the merged model's (:func:`lemon.backends.local.model_weights`, float32) written as F16 (F32
for the one-dimensional norms) or F32, optionally quantized to Q8_0 by llama.cpp's own
quantizer; everything else is copied from the base GGUF's header (hyperparameters, the
tokenizer), with the version's own chat template. Two layout facts:

- llama.cpp stores a llama model's query and key projections with each head's rows
  interleaved for its rotary embedding (``convert_hf_to_gguf.py``'s ``permute``); transformers
  undoes that when it loads a GGUF, so the export applies it again;
- a tied LM head is not written (the base has no ``output.weight``; llama.cpp reuses the token
  embedding).

The file goes to the cache (``$LEMON_CACHE_DIR/policies``, default ``~/.cache/lemon``), named by
a hash of every file of the version (and of the versions below it, for a stacked adapter), the
base GGUF, the output type and this module's source, so a changed version or export code never
reuses an old file, and the version directory itself (pinned, for the shipped policy) is left
as it is. :func:`policy_gguf` exports on first use; ``lemon policy export-gguf`` does it ahead.
Only the ``llama`` architecture is exported (the packaged SmolLM2; a ``gguf:`` Qwen2 base is
not yet): another raises :class:`ExportError`, and the policy then runs on transformers.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import re
import secrets
import sys
import threading
import time
from pathlib import Path
from typing import Any, Literal

from lemon.backends.converting import GGUF_BASE_PREFIX
from lemon.backends.ggufs import gguf_model, locate
from lemon.backends.packaged import cache_dir, packaged_model

__all__ = [
    "OUTTYPES",
    "ExportError",
    "OutType",
    "base_gguf",
    "export_gguf",
    "exported_path",
    "policy_gguf",
    "version_stack",
]

OutType = Literal["f16", "f32", "q8_0"]
OUTTYPES: tuple[OutType, ...] = ("f16", "f32", "q8_0")
"""``f16`` (the default: the weights the transformers backend packs for the CPU by default),
``f32``, or ``q8_0`` (quantized by llama.cpp after an F16 export)."""

_PERMUTED = {"llama"}
"""Architectures whose query/key rows llama.cpp interleaves (and that the export supports)."""
_NOT_MODEL = {"README.md", "metrics.jsonl", "result.json", "credit.jsonl", ".gitattributes"}


class ExportError(ValueError):
    """A policy version that cannot be exported to GGUF (the message says why)."""


@functools.cache
def _code() -> str:
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def _base_named(version: Path) -> str | None:
    """What ``version`` is trained over: ``policy.json``'s ``base_model``, else the adapter's
    own ``base_model_name_or_path`` (as the transformers backend resolves it)."""
    meta = version / "policy.json"
    if meta.is_file():
        named = json.loads(meta.read_text(encoding="utf-8")).get("base_model")
        if named:
            return str(named)
    adapter = version / "adapter_config.json"
    if adapter.is_file():
        found = json.loads(adapter.read_text(encoding="utf-8")).get("base_model_name_or_path")
        return str(found) if found else None
    return None


def version_stack(version: Path) -> tuple[list[Path], str | None]:
    """The version directories from ``version`` down to the one over a plain model (an
    adapter whose base is another adapter version is stacked on it), and what the bottom one
    names as its base."""
    chain = [version.resolve()]
    while True:
        named = _base_named(chain[-1])
        below = Path(named) if named else None
        if (
            (chain[-1] / "adapter_config.json").is_file()
            and below is not None
            and (below / "adapter_config.json").is_file()
        ):
            if below.resolve() in chain:
                raise ExportError(f"{version}: its adapter stack loops through {below}")
            chain.append(below.resolve())
            continue
        return chain, named


def base_gguf(version: Path) -> Path:
    """The GGUF file the bottom of ``version``'s stack was trained over (``packaged``: the
    packaged SmolLM2; ``gguf:NAME``: that fetched pinned model); raises :class:`ExportError`
    for a base that is no GGUF (a Hugging Face id or directory)."""
    _, named = version_stack(version)
    if named == "packaged":
        return packaged_model().path
    if named and named.startswith(GGUF_BASE_PREFIX):
        return locate(gguf_model(named.removeprefix(GGUF_BASE_PREFIX)))
    raise ExportError(f"{version}: its base {named!r} is not a GGUF model (packaged or gguf:NAME)")


def _digest(version: Path, base: Path, outtype: OutType) -> str:
    digest = hashlib.sha256(f"lemon-policy-gguf/v1:{outtype}:{_code()}\n".encode())
    stack, _ = version_stack(version)
    for directory in stack:
        for path in sorted(directory.iterdir()):
            if path.is_file() and path.name not in _NOT_MODEL:
                content = hashlib.sha256(path.read_bytes()).hexdigest()
                digest.update(f"{path.name}:{content}\n".encode())
    digest.update(f"base:{base.name}:{base.stat().st_size}\n".encode())
    return digest.hexdigest()


def exported_path(version: Path, *, outtype: OutType = "f16") -> Path:
    """Where the export of ``version`` lies (or will) in the cache."""
    base = base_gguf(version)
    meta = json.loads((version / "policy.json").read_text(encoding="utf-8"))
    label = re.sub(r"[^A-Za-z0-9._@-]", "_", f"{meta.get('policy')}@{meta.get('version')}")
    key = _digest(version, base, outtype)[:16]
    return cache_dir() / "policies" / f"{label}-{key}-{outtype}.gguf"


def policy_gguf(version: Path, *, outtype: OutType = "f16", quiet: bool = False) -> Path:
    """The GGUF of ``version`` in the cache, exported on first use (a line on stderr says so
    unless ``quiet``); raises :class:`ExportError` when it cannot be exported."""
    target = exported_path(version, outtype=outtype)
    if target.is_file():
        return target
    # one export at a time, per process and across processes: a caller that waited finds the
    # file made (concurrent loads of the same version, e.g. lemon eval's items, each asked for
    # it and merged the model in threads at once, which transformers' loading does not survive)
    with _EXPORT_LOCK, _file_lock(target.with_name(f".{target.name}.lock")):
        if target.is_file():
            return target
        started = time.monotonic()
        if not quiet:
            print(f"lemon: exporting {version} once to {target} ...", file=sys.stderr, flush=True)
        export_gguf(version, target, outtype=outtype)
        if not quiet:
            took = time.monotonic() - started
            print(
                f"lemon: exported in {took:.1f} s (later runs load it)", file=sys.stderr, flush=True
            )
    return target


_EXPORT_LOCK = threading.Lock()


@contextlib.contextmanager
def _file_lock(path: Path) -> Any:
    """An exclusive lock on ``path`` (created) held for the block, across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def export_gguf(version: Path, target: Path, *, outtype: OutType = "f16") -> Path:
    """Write ``version`` (merged) as a GGUF file at ``target``, whole or not at all."""
    from lemon.backends.local import model_weights

    base = base_gguf(version)
    template = version / "chat_template.jinja"
    chat_template = template.read_text(encoding="utf-8") if template.is_file() else None
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    quantized = temp.with_suffix(".q.tmp")
    try:
        weights = model_weights(version)
        _check_vocabulary(version, base)
        _write(
            weights,
            base=base,
            target=temp,
            outtype="f32" if outtype == "f32" else "f16",
            chat_template=chat_template,
        )
        del weights
        if outtype == "q8_0":
            from lemon.backends.llamacpp import quantize

            quantize(temp, quantized, ftype="q8_0")
            os.replace(quantized, temp)
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)
        quantized.unlink(missing_ok=True)
    return target


def _check_vocabulary(version: Path, base: Path) -> None:
    """The version's tokenizer must be the base GGUF's (the export reuses the GGUF's)."""
    import gguf

    path = version / "tokenizer.json"
    if not path.is_file():
        return
    raw = json.loads(path.read_text(encoding="utf-8"))
    ids: dict[int, str] = {int(i): t for t, i in raw.get("model", {}).get("vocab", {}).items()}
    ids.update({int(a["id"]): a["content"] for a in raw.get("added_tokens", [])})
    tokens = gguf.GGUFReader(str(base)).fields["tokenizer.ggml.tokens"].contents()
    differ = [i for i, token in ids.items() if i >= len(tokens) or tokens[i] != token]
    if differ or len(ids) != len(tokens):
        raise ExportError(
            f"{version}: its tokenizer is not its base GGUF's ({len(ids)} tokens against "
            f"{len(tokens)}, {len(differ)} differ, first id {differ[:1]})"
        )


def _permute(weights: Any, heads: int) -> Any:
    """HF's query/key rows to llama.cpp's (``convert_hf_to_gguf.py``'s ``permute``)."""
    rows = weights.shape[0]
    return (
        weights.reshape(heads, 2, rows // heads // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def _write(
    weights: dict[str, Any],
    *,
    base: Path,
    target: Path,
    outtype: Literal["f16", "f32"],
    chat_template: str | None,
) -> None:
    """``weights`` (HF names) as a GGUF with ``base``'s header and tensor names and order."""
    import gguf
    import numpy as np

    reader = gguf.GGUFReader(str(base))
    arch = str(reader.fields["general.architecture"].contents())
    if arch not in _PERMUTED:
        raise ExportError(f"{base.name}: exporting a {arch!r} model is not supported (llama only)")
    arch_enum = next(a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == arch)
    blocks = int(reader.fields[f"{arch}.block_count"].contents())
    heads = int(reader.fields[f"{arch}.attention.head_count"].contents())
    kv_heads = int(reader.fields[f"{arch}.attention.head_count_kv"].contents())
    names = gguf.get_tensor_name_map(arch_enum, blocks)
    by_name: dict[str, Any] = {}
    for hf_name, array in weights.items():
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if name is None:
            raise ExportError(f"{hf_name}: no GGUF tensor of a {arch} model corresponds")
        by_name[name] = array
    embedding = by_name.get("token_embd.weight")
    writer = gguf.GGUFWriter(str(target), arch)
    skip = {"general.architecture", "general.file_type", "general.quantization_version"}
    if chat_template is not None:
        skip.add("tokenizer.chat_template")
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key in skip:
            continue
        array_type = field.types[0] == gguf.GGUFValueType.ARRAY
        sub_type = field.types[-1] if array_type else None
        writer.add_key_value(key, field.contents(), field.types[0], sub_type=sub_type)
    ftype = gguf.LlamaFileType.ALL_F32 if outtype == "f32" else gguf.LlamaFileType.MOSTLY_F16
    writer.add_file_type(int(ftype))
    if chat_template is not None:
        writer.add_chat_template(chat_template)
    for tensor in reader.tensors:
        array = by_name.pop(tensor.name, None)
        if array is None:
            raise ExportError(f"{tensor.name}: in {base.name} but not in the policy's weights")
        want = [int(n) for n in reversed(list(tensor.shape))]
        if list(array.shape) != want:
            raise ExportError(f"{tensor.name}: shape {list(array.shape)}, {base.name} has {want}")
        if tensor.name.endswith("attn_q.weight"):
            array = _permute(array, heads)
        elif tensor.name.endswith("attn_k.weight"):
            array = _permute(array, kv_heads)
        wide = array.ndim == 1 or outtype == "f32"
        writer.add_tensor(
            tensor.name, np.ascontiguousarray(array, np.float32 if wide else np.float16)
        )
    head = by_name.pop("output.weight", None)  # tied: llama.cpp reuses token_embd, as the base
    if head is not None and (embedding is None or not np.array_equal(head, embedding)):
        raise ExportError(f"an untied output.weight, which {base.name} does not have")
    if by_name:
        raise ExportError(f"tensors {sorted(by_name)[:3]} are not in {base.name}")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
