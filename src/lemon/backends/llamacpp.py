"""The ``llamacpp`` backend: GGUF models in-process through llama-cpp-python, batched.

This is the one module that talks to llama.cpp. A model is loaded once per process (a registry
keyed by its settings) with one context whose key/value cache holds ``slots`` sequences of up to
``context`` tokens each. One scheduler thread per model owns the context and decodes
continuously: every step it builds one ``llama_batch`` holding the next token of every sequence
that is generating plus prompt tokens of newly arrived requests (several ``seq_id`` s in one
batch, one call to ``llama_decode``), samples each sequence with its own sampler chain (greedy,
or top-p / temperature / seeded draw), and removes a sequence from the cache as soon as it is
done, so a waiting request takes its slot at once. Requests arrive through a queue; the event
loop awaits a future and never blocks.

Prompts: the chat template stored in the GGUF (``tokenizer.chat_template``) rendered with
jinja2 in a sandbox, as Hugging Face's ``apply_chat_template`` does, with the generation prompt;
a prefill is appended to that text and the model completes it raw (the prefill is returned as
the start of the answer). Stop strings cut the text and end the sequence; usage counts the
prompt's tokens and every token generated.

Grammar constraints: a request with a ``constraint`` (the spec grammar, or a fixed Lark
grammar) decodes under an llguidance matcher (:mod:`lemon.backends.guided`, the one the
transformers backend uses) built over this model's own vocabulary: before each of its tokens is
sampled, the logits llama.cpp computed for it are set to minus infinity outside the matcher's
token mask (in place, so greedy and sampled chains alike pick from the allowed tokens), and the
matcher consumes the token drawn.

Streaming: ``generate(request, on_text=callback)`` calls ``callback`` on the event loop with
the completion so far (without the prefill, stop strings already cut) each time a token adds
to it; the calls come in order and all before the generation is returned.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import ctypes
import functools
import os
import queue
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lemon.backends.base import BackendError, Generation, GenerationRequest

__all__ = [
    "DECODE_GROUPS",
    "LlamaBackend",
    "LlamaModel",
    "LlamaSettings",
    "TextCallback",
    "default_decode_group",
    "load_llama",
    "quantize",
]

TextCallback = Callable[[str], None]
"""Called with the completion so far (without the prefill) as tokens arrive."""

_LOG_LEVEL_WARN = 3
_CORES = threading.Lock()
"""Held around a decode step by models that use every CPU, so models in one process take
turns instead of oversubscribing the cores (ggml's threads spin at barriers)."""
_log_lines: collections.deque[str] = collections.deque(maxlen=20)
"""llama.cpp's latest warnings and errors: quoted when a load fails."""


@functools.cache
def _lib() -> Any:
    """llama_cpp, initialised once, its log routed into :data:`_log_lines` (not stderr)."""
    import llama_cpp

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
    def _log(level: int, text: bytes, _user: Any) -> None:
        if level >= _LOG_LEVEL_WARN and text:
            line = text.decode("utf-8", "replace").strip()
            if line:
                _log_lines.append(line)

    llama_cpp.llama_log_set(_log, ctypes.c_void_p(0))
    _lib.callback = _log  # type: ignore[attr-defined]  # keep the C callback alive
    llama_cpp.llama_backend_init()
    return llama_cpp


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


DECODE_GROUPS: dict[str, int] = {"qwen2.5-coder-1.5b-instruct": 4}
"""Pinned models decoded in groups by default (:attr:`LlamaSettings.decode_group`), as measured
on this project's 2-core AVX2 machine (the llama-batch-decode experiment): one
``llama_decode`` over 8 sequences of Qwen2.5-Coder-1.5B Q4_K_M takes 7.4x one over 1, over 4
2.3x, so two calls of 4 decode 8 agents faster than one call of 8 (``lemon bench tiers``'
large-tier gain at 8 agents: 1.31 in one call, 1.54-1.58 in groups of 4). The small and medium
tiers gained nothing from groups of 4 there (1.20-1.21 against 1.35-1.42 for the small one), so
they decode every active sequence in one call."""


def default_decode_group(model: str) -> int:
    """The measured :attr:`LlamaSettings.decode_group` for ``model`` (0: one call)."""
    return DECODE_GROUPS.get(model, 0)


@dataclass(frozen=True, slots=True)
class LlamaSettings:
    """How a GGUF model is run."""

    path: str
    slots: int = 8
    """Sequences decoded together (the key/value cache holds this many)."""
    context: int = 4096
    """Tokens one sequence may hold: prompt, prefill and completion."""
    threads: int = 0
    """CPU threads; 0: every CPU this process may use."""
    batch_tokens: int = 512
    """Most tokens in one ``llama_decode`` (long prompts are prefilled in chunks)."""
    decode_group: int = 0
    """Most sequences in one ``llama_decode``: a step over more active sequences decodes them
    in groups of this many (0: all in one call). See :data:`DECODE_GROUPS`."""
    repack: bool = True
    """Repack weights for the CPU's matrix kernels (faster). Their one-row and many-row
    kernels round differently, so a greedy near-tie may break differently alone than in a
    batch; without repacking, a sequence decodes to the same tokens alone or batched on
    models whose weights have no many-row kernel of their own (Q4_K_M Qwen here)."""


@dataclass(eq=False)
class _Job:
    request: GenerationRequest
    future: concurrent.futures.Future[Generation]
    seq: int = -1
    sampler: Any = None
    pending: list[int] = field(default_factory=list)
    """Tokens still to feed: the prompt's (in chunks), then each sampled token."""
    n_past: int = 0
    prompt_tokens: int = 0
    generated: int = 0
    data: bytearray = field(default_factory=bytearray)
    text: str = ""
    finish: str | None = None
    on_text: TextCallback | None = None
    """Called (on the scheduler thread) with ``text`` each time a token changes it."""
    matcher: Any = None
    """The grammar matcher of a constrained request (:mod:`lemon.backends.guided`)."""
    mask: Any = None
    """Its token bitmask (int32 numpy words), filled before each sampled token."""


class LlamaModel:
    """One loaded GGUF model, its context and its scheduler thread."""

    def __init__(self, settings: LlamaSettings) -> None:
        lib = _lib()
        self.settings = settings
        path = Path(settings.path)
        if not path.is_file():
            raise FileNotFoundError(f"no GGUF file at {path}")
        _log_lines.clear()
        params = lib.llama_model_default_params()
        params.use_extra_bufts = settings.repack
        self._model = lib.llama_model_load_from_file(str(path).encode(), params)
        if not self._model:
            detail = "; ".join(list(_log_lines)[-3:]) or "llama.cpp gave no reason"
            raise ValueError(f"llama.cpp cannot load {path} as a GGUF model: {detail}")
        try:
            self._vocab = lib.llama_model_get_vocab(self._model)
            trained = int(lib.llama_model_n_ctx_train(self._model))
            self.context = min(settings.context, trained) if trained > 0 else settings.context
            threads = settings.threads or _cpus()
            self._shared_cores = threads >= _cpus()
            cparams = lib.llama_context_default_params()
            cparams.n_ctx = self.context * settings.slots
            cparams.n_seq_max = settings.slots
            cparams.kv_unified = False  # one stream per sequence: attention reads its own only
            cparams.n_batch = settings.batch_tokens
            cparams.n_ubatch = settings.batch_tokens
            cparams.n_threads = threads
            cparams.n_threads_batch = threads
            cparams.no_perf = True
            self._ctx = lib.llama_init_from_model(self._model, cparams)
            if not self._ctx:
                detail = "; ".join(list(_log_lines)[-3:]) or "no reason given"
                raise ValueError(f"llama.cpp cannot create a context for {path}: {detail}")
        except BaseException:
            lib.llama_model_free(self._model)
            raise
        self._memory = lib.llama_get_memory(self._ctx)
        self._batch = lib.llama_batch_init(settings.batch_tokens, 0, 1)
        template = lib.llama_model_chat_template(self._model, None)
        self.chat_template: str | None = template.decode("utf-8") if template else None
        self.parameters = int(lib.llama_model_n_params(self._model))
        self.bos_text = self._special_text(lib.llama_vocab_bos(self._vocab))
        self.eos_text = self._special_text(lib.llama_vocab_eos(self._vocab))
        self.add_bos = bool(lib.llama_vocab_get_add_bos(self._vocab))
        self.steps = 0
        """Decode steps made (each advances every active sequence by a token or a prompt
        chunk, in one ``llama_decode`` per group of :attr:`LlamaSettings.decode_group`)."""
        self.decode_calls = 0
        """``llama_decode`` calls made."""
        self.max_batch_sequences = 0
        """The most sequences one decode step has carried."""
        self.n_vocab = int(lib.llama_vocab_n_tokens(self._vocab))
        self.mask_s = 0.0
        """Seconds spent applying grammar masks (filling them and writing the logits)."""
        self._guide: Any = None
        self._guide_lock = threading.Lock()
        self._inbox: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name=f"llama:{path.name}", daemon=True)
        self._thread.start()

    # -- tokens and text --------------------------------------------------------------------

    def _special_text(self, token: int) -> str:
        return self.piece(token, special=True).decode("utf-8", "replace") if token >= 0 else ""

    def piece(self, token: int, *, special: bool = False) -> bytes:
        lib = _lib()
        size = 64
        while True:
            buffer = ctypes.create_string_buffer(size)
            n = int(lib.llama_token_to_piece(self._vocab, token, buffer, size, 0, special))
            if n >= 0:
                return buffer.raw[:n]
            size = -n

    def tokenize(self, text: str, *, add_special: bool, parse_special: bool = True) -> list[int]:
        lib = _lib()
        data = text.encode("utf-8")
        size = len(data) + 8
        while True:
            tokens = (lib.llama_token * size)()
            n = int(
                lib.llama_tokenize(
                    self._vocab, data, len(data), tokens, size, add_special, parse_special
                )
            )
            if n >= 0:
                return list(tokens[:n])
            size = -n

    def prompt_text(self, request: GenerationRequest) -> str:
        """The text the model continues: the chat template's rendering with the generation
        prompt (or ``raw_prompt``), then the prefill."""
        if request.raw_prompt is not None:
            return request.raw_prompt + request.prefill
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        if self.chat_template is None:
            return "\n\n".join(m["content"] for m in messages) + "\n\n" + request.prefill
        rendered: str = _template(self.chat_template).render(
            messages=messages,
            add_generation_prompt=True,
            bos_token=self.bos_text,
            eos_token=self.eos_text,
        )
        return rendered + request.prefill

    def prompt_tokens(self, request: GenerationRequest) -> list[int]:
        text = self.prompt_text(request)
        templated = request.raw_prompt is None and self.chat_template is not None
        return self.tokenize(text, add_special=self.add_bos and not templated)

    def guide_tokenizer(self) -> Any:
        """llguidance's view of this model's vocabulary (built once, about a second), as a
        :class:`lemon.backends.guided.GuideTokenizer`."""
        with self._guide_lock:
            if self._guide is None:
                from lemon.backends.guided import require_llguidance, wrap_tokenizer

                require_llguidance()
                from llguidance.llamacpp import lltokenizer_from_vocab

                with warnings.catch_warnings():  # it calls a deprecated name per token
                    warnings.simplefilter("ignore", DeprecationWarning)
                    lltok = lltokenizer_from_vocab(self._vocab, n_vocab=self.n_vocab)
                eos = int(_lib().llama_vocab_eos(self._vocab))
                self._guide = wrap_tokenizer(
                    lltok, vocab=self.n_vocab, eos=eos, size=self.n_vocab, source="llama.cpp"
                )
            return self._guide

    # -- requests -----------------------------------------------------------------------------

    def submit(
        self, request: GenerationRequest, *, on_text: TextCallback | None = None
    ) -> concurrent.futures.Future[Generation]:
        """Queue ``request``; the future completes with its generation (or a BackendError).
        ``on_text`` is called on the scheduler thread with the completion so far."""
        future: concurrent.futures.Future[Generation] = concurrent.futures.Future()
        if self._closed:
            future.set_exception(
                BackendError("the model is closed", transient=False, unavailable=True)
            )
            return future
        self._inbox.put(_Job(request, future, on_text=on_text))
        return future

    def close(self) -> None:
        """Stop the scheduler (failing what is queued) and free the context and model."""
        if self._closed:
            return
        self._closed = True
        self._inbox.put(None)
        self._thread.join()
        lib = _lib()
        lib.llama_batch_free(self._batch)
        lib.llama_free(self._ctx)
        lib.llama_model_free(self._model)

    # -- the scheduler ------------------------------------------------------------------------

    def _serve(self) -> None:
        free = list(range(self.settings.slots - 1, -1, -1))
        active: list[_Job] = []
        waiting: collections.deque[_Job] = collections.deque()
        stopping = False
        while True:
            try:
                while True:  # everything that arrived; block only when there is no work
                    job = self._inbox.get(block=not (active or waiting or stopping))
                    if job is None:
                        stopping = True
                    else:
                        waiting.append(job)
                    if stopping:
                        break
            except queue.Empty:
                pass
            if stopping:
                closed = BackendError("the model was closed", transient=False, unavailable=True)
                for job in [*active, *waiting]:
                    self._release(job, free)
                    _settle(job, error=closed)
                return
            while waiting and free:
                job = waiting.popleft()
                if job.future.cancelled():
                    continue
                if self._admit(job, free):
                    active.append(job)
            active = [job for job in active if not self._dropped(job, free)]
            if not active:
                continue
            try:
                self._step(active, free)
            except Exception as exc:  # a bug must fail the calls, never strand them
                error = BackendError(f"decoding failed: {exc!r}", transient=False)
                for job in active:
                    job.finish = "error"
                    self._release(job, free)
                    _settle(job, error=error)
            active = [job for job in active if job.finish is None]

    def _admit(self, job: _Job, free: list[int]) -> bool:
        """Give ``job`` a sequence (prompt tokens, sampler); False when it failed instead."""
        try:
            tokens = self.prompt_tokens(job.request)
        except Exception as exc:  # a template that raises, text that cannot be tokenized
            _settle(job, error=BackendError(f"cannot build the prompt: {exc}", transient=False))
            return False
        if not tokens:
            _settle(job, error=BackendError("the prompt is empty", transient=False))
            return False
        if len(tokens) >= self.context:
            _settle(
                job,
                error=BackendError(
                    f"context overflow: the prompt has {len(tokens)} tokens and a sequence "
                    f"holds {self.context} on this model (its context setting)",
                    transient=False,
                ),
            )
            return False
        if job.request.constraint is not None:
            try:
                import numpy as np

                from lemon.backends.guided import make_matcher

                guide = self.guide_tokenizer()
                job.matcher = make_matcher(job.request.constraint, guide)
                job.mask = np.zeros(guide.words, dtype=np.int32)
            except Exception as exc:  # llguidance missing, a grammar it rejects
                _settle(
                    job, error=BackendError(f"cannot apply the grammar: {exc}", transient=False)
                )
                return False
        job.seq = free.pop()
        job.pending = tokens
        job.prompt_tokens = len(tokens)
        job.sampler = self._sampler(job.request)
        return True

    def _sampler(self, request: GenerationRequest) -> Any:
        lib = _lib()
        chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        decoding = request.decoding
        if decoding.temperature <= 0:
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_greedy())
            return chain
        if decoding.top_p < 1.0:
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_top_p(decoding.top_p, 1))
        lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_temp(decoding.temperature))
        seed = decoding.seed if decoding.seed is not None else lib.LLAMA_DEFAULT_SEED
        lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_dist(seed & 0xFFFFFFFF))
        return chain

    def _dropped(self, job: _Job, free: list[int]) -> bool:
        """Release a job whose caller gave up (its future was cancelled)."""
        if job.future.cancelled():
            job.finish = "cancelled"
            self._release(job, free)
            return True
        return False

    def _release(self, job: _Job, free: list[int]) -> None:
        lib = _lib()
        if job.seq >= 0:
            lib.llama_memory_seq_rm(self._memory, job.seq, -1, -1)
            free.append(job.seq)
            free.sort(reverse=True)  # the lowest free sequence id is taken next
            job.seq = -1
        if job.sampler is not None:
            lib.llama_sampler_free(job.sampler)
            job.sampler = None
        job.matcher = None

    def _step(self, active: list[_Job], free: list[int]) -> None:
        """One decode step over every active sequence: generating sequences first (one token
        each), then prompt chunks, each group in ascending sequence id (a batch whose
        sequences come out of order is split into several smaller passes: measured, half the
        throughput at 8 sequences), in ``llama_decode`` calls of at most ``decode_group``
        sequences."""
        ordered = sorted(active, key=lambda j: (len(j.pending) > 1, j.seq))
        group = self.settings.decode_group or len(ordered)
        self.steps += 1
        self.max_batch_sequences = max(self.max_batch_sequences, len(ordered))
        for start in range(0, len(ordered), group):
            if not self._decode(ordered[start : start + group], active, free):
                return

    def _decode(self, jobs: list[_Job], active: list[_Job], free: list[int]) -> bool:
        """One ``llama_decode`` over ``jobs``, then one sampled token each for those whose
        prompt is now fully read; False when the call failed (every active call fails)."""
        lib = _lib()
        batch = self._batch
        budget = self.settings.batch_tokens
        n = 0
        outputs: list[tuple[_Job, int]] = []
        for job in jobs:
            take = min(len(job.pending), budget - n)
            if take <= 0:
                continue
            for k in range(take):
                batch.token[n] = job.pending[k]
                batch.pos[n] = job.n_past + k
                batch.n_seq_id[n] = 1
                batch.seq_id[n][0] = job.seq
                batch.logits[n] = k == take - 1 and take == len(job.pending)
                n += 1
            if take == len(job.pending):
                outputs.append((job, n - 1))
            job.pending = job.pending[take:]
            job.n_past += take
        if n == 0:
            return True
        batch.n_tokens = n
        self.decode_calls += 1
        if self._shared_cores:  # models using every core take turns, never oversubscribe
            with _CORES:
                code = int(lib.llama_decode(self._ctx, batch))
        else:
            code = int(lib.llama_decode(self._ctx, batch))
        if code != 0:
            error = BackendError(f"llama_decode failed with code {code}", transient=False)
            for job in active:
                if job.finish is None:
                    job.finish = "error"
                    self._release(job, free)
                    _settle(job, error=error)
            return False
        for job, index in outputs:
            if job.matcher is not None:
                self._apply_mask(job, index)
            token = int(lib.llama_sampler_sample(job.sampler, self._ctx, index))
            if job.matcher is not None:
                job.matcher.consume(token)
            self._advance(job, token)
            if job.finish is not None:
                self._release(job, free)
                _settle(job, result=self._generation(job))
        return True

    def _apply_mask(self, job: _Job, index: int) -> None:
        """Set the logits of output ``index`` to minus infinity outside ``job``'s grammar mask
        (llama.cpp's own buffer, which the sampler reads next)."""
        import numpy as np

        started = time.perf_counter()
        pointer = _lib().llama_get_logits_ith(self._ctx, index)
        logits = np.ctypeslib.as_array(pointer, shape=(self.n_vocab,))
        job.matcher.fill_mask(job.mask)
        allowed = np.unpackbits(job.mask.view(np.uint8), bitorder="little")[: self.n_vocab]
        logits[allowed == 0] = -np.inf
        self.mask_s += time.perf_counter() - started

    def _advance(self, job: _Job, token: int) -> None:
        lib = _lib()
        decoding = job.request.decoding
        if lib.llama_vocab_is_eog(self._vocab, token):
            job.finish = "stop"
            return
        job.generated += 1
        job.data += self.piece(token)
        before, job.text = job.text, job.data.decode("utf-8", "ignore")
        for stop in decoding.stop:
            if stop and stop in job.text:
                job.text = job.text[: job.text.index(stop)]
                job.finish = "stop"
                break
        if job.on_text is not None and job.text != before:
            job.on_text(job.text)
        if job.finish is not None:
            return
        if job.generated >= decoding.max_tokens or job.n_past + 1 >= self.context:
            job.finish = "length"
            return
        job.pending = [token]

    def _generation(self, job: _Job) -> Generation:
        return Generation(
            job.request.prefill + job.text, job.prompt_tokens, job.generated, job.finish or "stop"
        )


def _settle(
    job: _Job, *, result: Generation | None = None, error: BaseException | None = None
) -> None:
    if job.future.done():
        return
    try:
        if error is not None:
            job.future.set_exception(error)
        else:
            job.future.set_result(result)  # type: ignore[arg-type]
    except concurrent.futures.InvalidStateError:  # cancelled meanwhile
        pass


@functools.lru_cache(maxsize=16)
def _template(source: str) -> Any:
    """A chat template compiled in jinja2's sandbox, with the helpers HF templates call."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise ValueError(f"chat template: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(source)


_FTYPES = {"q8_0": 7, "f16": 1}
"""llama.cpp's ``llama_ftype`` values :func:`quantize` writes."""


def quantize(source: Path, target: Path, *, ftype: str = "q8_0", threads: int = 0) -> Path:
    """Quantize the GGUF ``source`` (F16/F32 weights) to ``target`` with llama.cpp's own
    quantizer (``llama_model_quantize``; one-dimensional tensors stay F32)."""
    lib = _lib()
    params = lib.llama_model_quantize_default_params()
    params.ftype = _FTYPES[ftype]
    params.nthread = threads or _cpus()
    _log_lines.clear()
    code = int(
        lib.llama_model_quantize(str(source).encode(), str(target).encode(), ctypes.byref(params))
    )
    if code != 0:
        detail = "; ".join(list(_log_lines)[-3:]) or "llama.cpp gave no reason"
        raise ValueError(f"llama.cpp cannot quantize {source} to {ftype}: {detail}")
    return target


_MODELS: dict[LlamaSettings, LlamaModel] = {}
_LOAD_LOCK = threading.Lock()


def load_llama(settings: LlamaSettings) -> LlamaModel:
    """The model for ``settings``, loaded once per process."""
    with _LOAD_LOCK:
        model = _MODELS.get(settings)
        if model is None:
            model = _MODELS[settings] = LlamaModel(settings)
        return model


class LlamaBackend:
    """Chat requests on a GGUF model in this process (see the module's docstring).

    ``model`` is a model of :mod:`lemon.backends.ggufs` (by name; its file must be fetched) or
    the path of a ``.gguf`` file, or, with ``locate``, any name for a file that ``locate``
    finds (or makes: a policy version's export, :mod:`lemon.backends.exporting`) when the model
    is first needed; ``title`` names it in labels and errors. The file is found and loaded on
    the first call; a missing or unreadable file fails that call (and every later one) with a
    BackendError that says why.
    """

    def __init__(
        self,
        model: str,
        *,
        slots: int = 8,
        context: int = 4096,
        threads: int = 0,
        tier: str = "any",
        repack: bool = True,
        decode_group: int | None = None,
        locate: Callable[[], Path] | None = None,
        title: str | None = None,
    ) -> None:
        from lemon.backends.ggufs import GGUF_MODELS

        self.name = model
        self.locate = locate
        self.pinned = None if locate is not None else GGUF_MODELS.get(model)
        self.title = title or (self.pinned.title if self.pinned else Path(model).name)
        self.slots = slots
        self.context = context
        self.threads = threads or int(os.environ.get("LEMON_LLAMA_THREADS", "0") or 0)
        self.tier = tier
        self.repack = repack
        self.decode_group = default_decode_group(model) if decode_group is None else decode_group
        self._model: LlamaModel | None = None

    @property
    def model_id(self) -> str:
        return f"llamacpp:{self.name}"

    @property
    def label(self) -> str:
        return f"{self.title} on llama.cpp in-process"

    def settings(self) -> LlamaSettings:
        """Where the file is and how it runs; raises when the file cannot be found."""
        from lemon.backends.ggufs import locate

        if self.locate is not None:
            path = self.locate()
        else:
            path = locate(self.pinned) if self.pinned else Path(self.name)
        return LlamaSettings(
            str(path),
            slots=self.slots,
            context=self.context,
            threads=self.threads,
            repack=self.repack,
            decode_group=self.decode_group,
        )

    async def model(self) -> LlamaModel:
        if self._model is None:
            try:
                self._model = await asyncio.to_thread(lambda: load_llama(self.settings()))
            except (LookupError, OSError, ValueError, ImportError, RuntimeError) as exc:
                raise BackendError(
                    f"cannot load {self.title}: {exc}", transient=False, unavailable=True
                ) from exc
        return self._model

    def content_id(self, cache: Any) -> str:
        """The model's identity for the persistent call cache (:mod:`lemon.backends.callcache`):
        the GGUF's SHA-256 (a pinned model's pin, checked when it was fetched; another file
        hashed once and remembered by ``cache.fingerprint``; the chat template is inside the
        GGUF), llama-cpp-python's version, whose kernels decide greedy near-ties, and the
        settings that change outputs: ``repack`` (the repacked kernels round near-ties
        differently) and ``context`` (where a long answer is cut for ``length``)."""
        from importlib.metadata import version

        try:
            path = Path(self.settings().path)
        except (LookupError, OSError) as exc:
            raise BackendError(f"cannot load {self.title}: {exc}", transient=False) from exc
        if self.pinned is not None and self.pinned.wheels is not None:
            digest = self.pinned.wheels.sha256
        else:
            digest = cache.fingerprint(path)
        settings = f"ctx{self.context}" + ("" if self.repack else ":no-repack")
        return f"llamacpp:{digest[:24]}@llama-cpp-python-{version('llama-cpp-python')}:{settings}"

    async def generate(
        self, request: GenerationRequest, *, on_text: TextCallback | None = None
    ) -> Generation:
        """The generation of ``request``; ``on_text`` (optional) is called on this event loop
        with the completion so far as tokens arrive (streaming)."""
        model = await self.model()
        relay: TextCallback | None = None
        if on_text is not None:
            loop = asyncio.get_running_loop()

            def relay(text: str) -> None:
                # a closed loop: nobody is listening any more
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(on_text, text)

        return await asyncio.wrap_future(model.submit(request, on_text=relay))

    async def count_prompt_tokens(self, request: GenerationRequest) -> int | None:
        """The prompt tokens :meth:`generate` will report for ``request``: its chat template
        rendered and tokenized as the model's scheduler does (the prefill included); None when
        they cannot be built (:meth:`generate` then fails with the reason)."""
        model = await self.model()
        try:
            return len(model.prompt_tokens(request))
        except Exception:  # a template that raises, text that cannot be tokenized
            return None

    async def aclose(self) -> None:
        """Models stay loaded for the process (later backends on the same file reuse them)."""
        return
