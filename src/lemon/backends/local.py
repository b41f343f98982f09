"""The in-process backend: Hugging Face ``transformers`` models, batched across agents.

It runs ``transformers`` models (``embedded`` and ``transformers`` tiers, and the learned
policy); the ``llamacpp`` tiers run GGUF models in-process too, through
:mod:`lemon.backends.llamacpp`. Each model is loaded once per process
(a registry keyed by source and dtype). Concurrent calls on the same model are collected for a
few milliseconds and decoded together in one ``generate`` call (left-padded), so a wide DAG
level costs little more than one agent. Decoding runs in a worker thread; the event loop stays
free.

Prompts share a prefix cache: the chat template's text before the last message's content (for
engine agents, the template's default system turn; for the policy, its instructions) is
prefilled once per model and its key/value cache is copied into every later call whose prompt
starts with the same tokens (a small LRU). A batch whose rows share that prefix is laid out as
``[prefix][padding][rest]``; positions come from the attention mask, so each row decodes as it
would alone.

The packaged SmolLM2 ships as GGUF; the first load converts it once to a bf16 safetensors copy
under the cache directory (``$LEMON_CACHE_DIR``, default ``~/.cache/lemon``), written to a
temporary folder and renamed into place, so later loads take about a second. On the CPU the
default dtype (``auto``) then packs the linear layers' weights for fbgemm's float16 GEMM, or
stores them as int8 where fbgemm cannot run (:mod:`lemon.backends.cpu_linear`).

torch is never imported at module level: transformers takes dtypes by name, tensors are read
back with ``tolist()``, and the weight-only layers are imported when a model is loaded.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lemon.backends.base import BackendError, Generation, GenerationRequest, Message
from lemon.backends.converting import (
    GGUF_BASE_PREFIX,
    converted_gguf_model,
    converted_packaged_model,
)
from lemon.backends.packaged import PACKAGED, packaged_model, quiet_transformers

if TYPE_CHECKING:
    from lemon.backends.guided import GuidedLogits

__all__ = [
    "DTYPES",
    "PACKAGED",
    "LocalBackend",
    "LocalModel",
    "ModelSource",
    "load_model",
    "model_weights",
]

DTYPES = ("auto", "bfloat16", "float32", "float16", "float16-weights", "int8")
"""The dtypes an in-process model can run in (see :attr:`ModelSource.dtype`)."""


@dataclass(frozen=True, slots=True)
class ModelSource:
    """Where a model comes from: ``packaged:smollm2-135m-instruct``, a local directory, or a
    Hugging Face id (which needs the hub; offline this fails with the hub's own error)."""

    name: str
    dtype: str = "auto"
    """``auto``, ``bfloat16``, ``float32``, ``float16``, ``float16-weights`` (fbgemm-packed
    float16 weights, float32 activations) or ``int8`` (int8 weights per output channel,
    bfloat16 activations); the last two are CPU only (:mod:`lemon.backends.cpu_linear`).
    ``auto`` is bfloat16 on CUDA and, on the CPU, float16-weights where fbgemm runs (x86 with
    AVX2), else int8. ``lemon bench quantization`` compares them side by side."""
    device: str = "auto"
    """``auto`` (CUDA when transformers sees a GPU, else the CPU), ``cpu`` or ``cuda``."""

    def resolved_dtype(self) -> str:
        if self.dtype != "auto":
            return self.dtype
        if self.resolved_device() != "cpu":
            return "bfloat16"
        from lemon.backends.cpu_linear import fbgemm_runs_here

        return "float16-weights" if fbgemm_runs_here() else "int8"

    def resolved_device(self) -> str:
        if self.device != "auto":
            return self.device
        return "cuda" if _cuda_available() else "cpu"

    @property
    def is_packaged(self) -> bool:
        return self.name == PACKAGED


@functools.cache
def _cuda_available() -> bool:
    """Asked once per process: backends resolve ``auto`` on every call's cache key."""
    from transformers.utils.import_utils import is_torch_cuda_available

    return bool(is_torch_cuda_available())


@dataclass
class LocalModel:
    """A loaded causal LM and its tokenizer; ``generate_batch`` is synchronous."""

    source: ModelSource
    model: Any
    tokenizer: Any
    lock: threading.Lock = field(default_factory=threading.Lock)
    batches: int = 0
    """How many ``generate`` calls ran (each serves one batch)."""
    prefix_cache_size: int = 8
    """Prefixes whose key/value caches are kept (least recently used dropped); 0 turns the
    prefix cache off."""
    prefix_tokens_reused: int = 0
    """Prompt tokens served from the prefix cache instead of being prefilled again."""
    _prefixes: OrderedDict[tuple[int, ...], Any] = field(default_factory=OrderedDict)
    last_guide: Any = None
    """The logits processor of the last constrained batch (its matchers, mask time, steps)."""

    @property
    def name(self) -> str:
        return self.source.name

    def _prompt_text(self, request: GenerationRequest) -> str:
        if request.raw_prompt is not None:
            return request.raw_prompt + request.prefill
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        if getattr(self.tokenizer, "chat_template", None):
            text: str = self.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=False
            )
        else:
            text = "\n\n".join(m["content"] for m in messages) + "\n\n"
        return text + request.prefill

    def _prefix_text(self, request: GenerationRequest) -> str | None:
        """The templated prompt's text before the last message's content, or None."""
        if request.raw_prompt is not None or not getattr(self.tokenizer, "chat_template", None):
            return None
        marker = "\x00lemon-prefix\x00"
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        messages[-1]["content"] = marker
        text: str = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False
        )
        return text.split(marker, 1)[0] if marker in text else None

    def _shared_prefix(
        self, requests: Sequence[GenerationRequest], ids: list[list[int]]
    ) -> tuple[int, ...] | None:
        """The token prefix every row starts with (at least 8 tokens, each row keeping at least
        one token of its own), or None when the rows do not share their template prefix."""
        if self.prefix_cache_size <= 0:
            return None
        shared: tuple[int, ...] | None = None
        tokenized: dict[str, list[int]] = {}  # rows of one batch mostly share their prefix text
        for request, row in zip(requests, ids, strict=True):
            text = self._prefix_text(request)
            if text is None:
                return None
            if text not in tokenized:
                tokenized[text] = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            prefix = tokenized[text]
            n = 0  # a merge across the boundary may change the last prefix token
            while n < min(len(prefix), len(row) - 1) and prefix[n] == row[n]:
                n += 1
            candidate = tuple(row[:n])
            if shared is None:
                shared = candidate
            elif candidate != shared:
                return None
        return shared if shared is not None and len(shared) >= 8 else None

    def _prefix_cache(self, prefix: tuple[int, ...], rows: int) -> Any:
        """A fresh copy of ``prefix``'s key/value cache for ``rows`` rows (prefilled once)."""
        import torch
        from transformers import DynamicCache

        cache = self._prefixes.get(prefix)
        reused = len(prefix) * rows
        if cache is None:
            try:
                cache = DynamicCache(config=self.model.config)
            except TypeError:  # transformers before 4.56 builds its layers lazily
                cache = DynamicCache()
            ids = torch.tensor([prefix], device=self.model.device)
            with torch.inference_mode():
                self.model(input_ids=ids, use_cache=True, **{self._cache_argument: cache})
            self._prefixes[prefix] = cache
            while len(self._prefixes) > self.prefix_cache_size:
                self._prefixes.popitem(last=False)
            reused -= len(prefix)
        else:
            self._prefixes.move_to_end(prefix)
        self.prefix_tokens_reused += reused
        fresh = copy.deepcopy(cache)
        if rows > 1:
            fresh.batch_repeat_interleave(rows)
        return fresh

    def _encode(self, requests: Sequence[GenerationRequest]) -> dict[str, Any]:
        """Token ids and attention mask, laid out ``[shared prefix][left padding][rest]``, and a
        copy of the prefix's key/value cache where the rows share one (else no prefix)."""
        import torch

        tok = self.tokenizer
        ids = [tok(self._prompt_text(r), add_special_tokens=False)["input_ids"] for r in requests]
        prefix = self._shared_prefix(requests, ids)
        head = list(prefix or ())
        rest = [row[len(head) :] for row in ids]
        width = max(len(r) for r in rest)
        rows = [head + [tok.pad_token_id] * (width - len(r)) + r for r in rest]
        mask = [[1] * len(head) + [0] * (width - len(r)) + [1] * len(r) for r in rest]
        device = self.model.device
        inputs = {
            "input_ids": torch.tensor(rows, device=device),
            "attention_mask": torch.tensor(mask, device=device),
        }
        if prefix is not None:
            inputs[self._cache_argument] = self._prefix_cache(prefix, len(rows))
        return inputs

    def _guide(self, requests: Sequence[GenerationRequest], *, width: int) -> GuidedLogits | None:
        """A logits processor for the batch's constrained rows (None when there are none)."""
        if not self._guided(requests):
            return None
        from lemon.backends.guided import GuidedLogits, guide_tokenizer, make_matcher

        vocab = int(self.model.config.get_text_config().vocab_size)  # the logits width
        matchers: list[Any] = [None] * len(requests)
        if any(r.constraint is not None for r in requests):
            tokenizer = guide_tokenizer(self.tokenizer, vocab=vocab)
            matchers = [
                None if r.constraint is None else make_matcher(r.constraint, tokenizer)
                for r in requests
            ]
        guide = GuidedLogits(matchers, start=width, vocab=vocab)
        self.last_guide = guide
        return guide

    def _guided(self, requests: Sequence[GenerationRequest]) -> bool:
        """Whether the batch decodes through a logits processor (it does when a row is
        constrained; a benchmark may attach the then mask-free processor to every batch, to
        stamp decode steps the same way on both sides)."""
        return any(r.constraint is not None for r in requests)

    @functools.cached_property
    def _cache_argument(self) -> str:
        """``cache`` (transformers 5.24 renamed it) or ``past_key_values`` (older releases)."""
        import inspect

        parameters = inspect.signature(type(self.model).forward).parameters
        return "cache" if "cache" in parameters else "past_key_values"

    def score(
        self, messages: Sequence[Message], completions: Sequence[str]
    ) -> tuple[int, list[tuple[float, int]]]:
        """The prompt's token count and, for each completion, the log-probability the model
        gives it as the assistant's answer to ``messages`` (its end-of-turn token included, so a
        completion that is a prefix of another is not favoured) with its token count."""
        import torch

        tok = self.tokenizer
        chat = [{"role": m.role, "content": m.content} for m in messages]
        if not getattr(tok, "chat_template", None):
            raise ValueError("scoring completions needs a chat template")
        prompt = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
        prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        scored: list[tuple[float, int]] = []
        with self.lock, torch.inference_mode():
            for completion in completions:
                full = tok.apply_chat_template(
                    [*chat, {"role": "assistant", "content": completion}], tokenize=False
                )
                if not full.startswith(prompt):
                    raise ValueError("the chat template does not extend the prompt")
                ids = tok(full, add_special_tokens=False)["input_ids"]
                start = len(prompt_ids)
                if ids[:start] != prompt_ids:  # a token spans the prompt's end: re-split there
                    ids = (
                        prompt_ids + tok(full[len(prompt) :], add_special_tokens=False)["input_ids"]
                    )
                end = _turn_end(tok, ids, start)
                tensor = torch.tensor([ids[:end]], device=self.model.device)
                logits = self.model(input_ids=tensor).logits[0, start - 1 : end - 1].float()
                targets = tensor[0, start:end]
                logprobs = torch.log_softmax(logits, dim=-1).gather(1, targets[:, None])
                scored.append((float(logprobs.sum()), end - start))
        return len(prompt_ids), scored

    def generate_batch(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """Decode ``requests`` together (they share decoding settings except ``max_tokens``);
        a request with a ``constraint`` decodes under its own grammar matcher."""
        from transformers import set_seed

        first = requests[0].decoding
        tok = self.tokenizer
        max_new = max(r.decoding.max_tokens for r in requests)
        kwargs: dict[str, Any] = {"max_new_tokens": max_new, "pad_token_id": tok.pad_token_id}
        if first.stop:  # stop each sequence early; the text is also cut below
            kwargs.update(stop_strings=list(first.stop), tokenizer=tok)
        if first.temperature > 0:
            kwargs.update(do_sample=True, temperature=first.temperature, top_p=first.top_p)
            if first.seed is not None:
                set_seed(first.seed)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        with self.lock:
            inputs = self._encode(requests)
            guided = self._guide(requests, width=inputs["input_ids"].shape[1])
            if guided is not None:
                kwargs["logits_processor"] = [guided]
            output = self.model.generate(**inputs, **kwargs)
            self.batches += 1
        width = inputs["input_ids"].shape[1]
        prompt_lengths = inputs["attention_mask"].sum(dim=1).tolist()
        eos = set(_as_list(self.model.generation_config.eos_token_id))
        results = []
        for row, request, prompt_tokens in zip(
            output.tolist(), requests, prompt_lengths, strict=True
        ):
            new = row[width:][: request.decoding.max_tokens]
            finish = "length"
            for i, token in enumerate(new):
                if token in eos:
                    new, finish = new[:i], "stop"
                    break
            text = tok.decode(new, skip_special_tokens=True)
            for stop in request.decoding.stop:
                if stop in text:
                    text, finish = text[: text.index(stop)], "stop"
                    new = tok(text, add_special_tokens=False)["input_ids"]
            results.append(Generation(request.prefill + text, int(prompt_tokens), len(new), finish))
        return results


def _as_list(value: int | list[int] | None) -> list[int]:
    if value is None:
        return []
    return [value] if isinstance(value, int) else list(value)


_MODELS: dict[ModelSource, LocalModel] = {}
_LOAD_LOCK = threading.Lock()


_NOT_MODEL = {"README.md", "metrics.jsonl", "result.json", "credit.jsonl", ".gitattributes"}


def _model_files(root: Path, *, tokenizer_only: bool) -> list[Path]:
    """The files of a model directory that decide its outputs (``tokenizer_only``: the
    tokenizer and chat template files, for weights hashed elsewhere)."""
    files = sorted(p for p in root.glob("*") if p.is_file() and p.name not in _NOT_MODEL)
    if tokenizer_only:
        files = [p for p in files if p.suffix == ".jinja" or p.name.startswith(("tokenizer",
                 "special_tokens", "chat_template", "vocab", "merges"))]  # fmt: skip
    return files


def _local_snapshot(name: str) -> Path:
    """A local directory as it is; a hub id as its snapshot in the local Hugging Face cache."""
    path = Path(name)
    if path.is_dir():
        return path
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, local_files_only=True))
    except Exception:  # not cached (or no hub library): nothing to hash
        return path


def _merged_adapter(path: Path, dtype: Any, _stack: tuple[Path, ...] = ()) -> Any:
    """A LoRA adapter directory's base model with the adapter merged into its weights (so the
    weight-only CPU layers apply to the result as to any model). The base is the one the
    directory's ``policy.json`` names (``packaged``: SmolLM2-135M-Instruct converted from the
    shipped GGUF; ``gguf:NAME``: a fetched pinned GGUF, converted likewise), else the adapter's
    own ``base_model_name_or_path``. A base that is itself an adapter version (GRPO trained on
    an SFT warm start) is merged first, down to the plain model at the bottom of the stack."""
    import json

    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = json.loads((path / "adapter_config.json").read_text())["base_model_name_or_path"]
    meta = path / "policy.json"
    if meta.is_file():
        named = json.loads(meta.read_text()).get("base_model")
        if named == "packaged":
            base = str(converted_packaged_model("bfloat16"))
        elif named and named.startswith(GGUF_BASE_PREFIX):
            base = str(converted_gguf_model(named.removeprefix(GGUF_BASE_PREFIX)))
        elif named:
            base = named
    below = Path(base)
    if (below / "adapter_config.json").is_file():  # a stacked version: its base merged first
        if below.resolve() in (path.resolve(), *_stack):
            raise ValueError(f"{path}: its adapter stack loops through {below}")
        model = _merged_adapter(below, dtype, _stack=(*_stack, path.resolve()))
    else:
        model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype)
    return PeftModel.from_pretrained(model, str(path)).merge_and_unload()


def model_weights(path: Path) -> dict[str, Any]:
    """A policy version's (or model directory's) weights as the model computes with them,
    float32 numpy arrays by their Hugging Face names: a LoRA adapter merged over its base as
    :func:`load_model` merges it (the GGUF export, :mod:`lemon.backends.exporting`, writes
    them). Tied weights appear under each name."""
    import torch
    from transformers import AutoModelForCausalLM

    with quiet_transformers():
        if (path / "adapter_config.json").is_file():
            model: Any = _merged_adapter(path, torch.float32)
        else:
            model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    with torch.inference_mode():
        return {name: t.detach().float().numpy().copy() for name, t in model.state_dict().items()}


def load_model(source: ModelSource) -> LocalModel:
    """Load (once per process) the model for ``source``."""
    with _LOAD_LOCK:
        if source in _MODELS:
            return _MODELS[source]
        dtype, device = source.resolved_dtype(), source.resolved_device()
        from lemon.backends.cpu_linear import CPU_WEIGHT_DTYPES, convert_linears, load_dtype

        if dtype in CPU_WEIGHT_DTYPES and device != "cpu":
            raise ValueError(f"dtype {dtype} runs on the CPU only, not on {device}; use bfloat16")
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = str(converted_packaged_model("bfloat16")) if source.is_packaged else source.name
        with quiet_transformers():
            tokenizer = AutoTokenizer.from_pretrained(path)
            if (Path(path) / "adapter_config.json").is_file():
                model: Any = _merged_adapter(Path(path), load_dtype(dtype))
            else:
                model = AutoModelForCausalLM.from_pretrained(path, dtype=load_dtype(dtype))
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        if dtype in CPU_WEIGHT_DTYPES:
            convert_linears(model, dtype)
        model.to(device)
        model.eval()
        loaded = LocalModel(source, model, tokenizer)
        _MODELS[source] = loaded
        return loaded


@dataclass
class _Pending:
    request: GenerationRequest
    future: asyncio.Future[Generation]


class LocalBackend:
    """Batches concurrent requests on one in-process model.

    Requests arriving within ``window_s`` of each other (up to ``max_batch``) share one
    ``generate`` call; requests with different sampling settings go in separate batches.
    """

    def __init__(
        self,
        source: ModelSource,
        *,
        tier: str = "any",
        window_s: float = 0.02,
        max_batch: int = 8,
    ) -> None:
        self.source = source
        self.tier = tier
        self.window_s = window_s
        self.max_batch = max_batch
        self._queue: list[_Pending] = []
        self._worker: asyncio.Task[None] | None = None
        self._model: LocalModel | None = None

    @property
    def model_id(self) -> str:
        return f"local:{self.source.name}@{self.source.resolved_dtype()}"

    def content_id(self, cache: Any) -> str:
        """The model's identity for the persistent call cache: SHA-256 of every file the model
        computes with: weights, config, tokenizer and chat template (``chat_template.jinja``),
        an adapter (the packaged GGUF, and the tokenizer files converted from it, for the
        packaged model; ``cache.fingerprint`` remembers each file's hash by size and mtime),
        with dtype and device. A hub id is hashed from its local snapshot; one that is not in the
        local Hugging Face cache cannot load either."""
        import hashlib

        if self.source.is_packaged:
            converted = converted_packaged_model("bfloat16")
            files = [packaged_model().path, *_model_files(converted, tokenizer_only=True)]
        else:
            files = _model_files(_local_snapshot(self.source.name), tokenizer_only=False)
        digest = hashlib.sha256()
        for path in files:
            digest.update(f"{path.name}:{cache.fingerprint(path)}\n".encode())
        content = digest.hexdigest()[:24] if files else f"name:{self.source.name}"
        device = self.source.resolved_device()
        return f"local:{content}@{self.source.resolved_dtype()}:{device}"

    @property
    def label(self) -> str:
        how = f"{self.source.resolved_dtype()}, {self.source.resolved_device()}"
        if self.source.is_packaged:
            return f"in-process SmolLM2-135M-Instruct ({how}, packaged)"
        return f"in-process {self.source.name} ({how})"

    async def model(self) -> LocalModel:
        if self._model is None:
            try:
                self._model = await asyncio.to_thread(load_model, self.source)
            except Exception as exc:  # a missing package, file or hub: not retryable
                raise BackendError(
                    f"cannot load model {self.source.name}: {exc}", transient=False
                ) from exc
        return self._model

    async def score(
        self, messages: Sequence[Message], completions: Sequence[str]
    ) -> tuple[int, list[tuple[float, int]]]:
        """:meth:`LocalModel.score` in a worker thread (the model loaded first)."""
        model = await self.model()
        return await asyncio.to_thread(model.score, messages, completions)

    async def generate(self, request: GenerationRequest) -> Generation:
        await self.model()
        loop = asyncio.get_running_loop()
        pending = _Pending(request, loop.create_future())
        self._queue.append(pending)
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._run())
        return await pending.future

    async def _run(self) -> None:
        while self._queue:
            await asyncio.sleep(self.window_s)  # let the rest of the level arrive
            batch = self._take_batch()
            if not batch:
                continue
            model = await self.model()
            try:
                results = await asyncio.to_thread(model.generate_batch, [p.request for p in batch])
            except Exception as exc:
                error = BackendError(f"generation failed: {exc!r}", transient=False)
                for pending in batch:
                    if not pending.future.done():
                        pending.future.set_exception(error)
                continue
            for pending, result in zip(batch, results, strict=True):
                if not pending.future.done():
                    pending.future.set_result(result)

    def _take_batch(self) -> list[_Pending]:
        live = [p for p in self._queue if not p.future.done()]
        if not live:
            self._queue.clear()
            return []

        def group(pending: _Pending) -> tuple[object, ...]:
            d = pending.request.decoding
            return (d.temperature, d.top_p, d.seed, d.stop)

        key = group(live[0])
        batch = [p for p in live if group(p) == key][: self.max_batch]
        chosen = {id(p) for p in batch}
        self._queue = [p for p in live if id(p) not in chosen]
        return batch

    async def aclose(self) -> None:
        if self._worker is not None:
            self._worker.cancel()


def _turn_end(tokenizer: Any, ids: Sequence[int], start: int) -> int:
    """Where the assistant's turn ends in ``ids`` (after its end-of-turn token, if any): the
    chat template may add a newline or more after it, which the model is not scored on."""
    end_token = tokenizer.eos_token_id
    for index in range(start, len(ids)):
        if ids[index] == end_token:
            return index + 1
    return len(ids)
