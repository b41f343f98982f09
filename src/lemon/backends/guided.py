"""Grammar-constrained decoding with llguidance: one matcher per sequence, rebuilt per line.

:class:`SpecMatcher` follows one sequence that must spell a spec under
:class:`lemon.spec.grammar.SpecGrammar`. It holds an llguidance ``LLMatcher`` for the current
line's grammar; after every token that ends a line it advances the line state (new names,
the budget) and compiles the next line's grammar (about a millisecond: each is a few rules).
Built line matchers are kept (an LRU of pristine copies) and cloned when the same line
grammar comes up again, which is common across sequences. Before each token it writes the
allowed-token bitmask (llguidance's, AND a fixed mask that
forbids tokens holding a newline followed by anything but spaces, so a single token never
reaches past the indentation of the next line, where the old grammar is no longer exact; the
SmolLM2 and Qwen2.5 vocabularies have no such token, so this removes nothing they use).

Why llguidance: it is maintained (the engine behind vLLM's, SGLang's and llama.cpp's
``guidance`` backends), ships an abi3 wheel with no dependencies, takes Lark grammars with
``&``/``~`` on terminals (used here to exclude names already taken) and computes a mask in tens
of microseconds with no per-grammar warm-up beyond the tokenizer (about 2 s, once per model).
Outlines needs a regex/CFG compiled against the vocabulary per grammar (seconds) and pulls in
many dependencies; xgrammar compiles per grammar too (fast, but it has no negation, so taken
names would need a hand-built complement automaton) and its wheels are per-platform;
transformers-cfg is an unmaintained pure-Python EBNF matcher, far slower per token.

llguidance is an optional dependency (extra ``constrained``); it is imported when a matcher is
first built, with a clear error when it is missing.
"""

from __future__ import annotations

import functools
import hashlib
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lemon.backends.base import LarkGrammar
from lemon.spec.grammar import LineState, SpecGrammar, SpecGrammarError

__all__ = [
    "GuideTokenizer",
    "GuidedLogits",
    "LarkMatcher",
    "SpecMatcher",
    "guide_tokenizer",
    "guided_code",
    "make_matcher",
    "require_llguidance",
    "wrap_tokenizer",
]


@functools.cache
def guided_code() -> str:
    """A hash of this module's source: the version of the code that applies a constraint to a
    token stream in process (masks, line advances, lookahead), part of a constrained call's
    cache key beside the grammar's own :meth:`~lemon.spec.grammar.SpecGrammar.key`, so a change
    here never serves an answer decoded under the old masks."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def require_llguidance() -> Any:
    try:
        import llguidance
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RuntimeError(
            "constrained decoding needs llguidance: pip install 'lemon-orchestration[constrained]'"
        ) from exc
    return llguidance


@dataclass(frozen=True)
class GuideTokenizer:
    """What llguidance needs to know about one model's vocabulary (built once per model)."""

    lltok: Any
    vocab: int
    """Width of the model's logits (may exceed the tokenizer's size)."""
    eos: int
    token_bytes: tuple[bytes, ...]
    line_safe: Any
    """int32 bitmask (numpy) of the tokens the newline rule allows."""
    digest: str = ""
    """SHA-256 of the vocabulary (every token's bytes, width, end token): what keys the
    matchers built for it."""

    @property
    def words(self) -> int:
        return (self.vocab + 31) // 32


_TOKENIZERS: weakref.WeakKeyDictionary[Any, dict[int, GuideTokenizer]] = weakref.WeakKeyDictionary()
"""Per tokenizer object (held weakly: never by its ``id``, which a later object may reuse once
this one is collected) and logits width."""
_TOKENIZERS_LOCK = threading.Lock()


def guide_tokenizer(hf_tokenizer: Any, *, vocab: int) -> GuideTokenizer:
    """The llguidance view of ``hf_tokenizer`` for logits of width ``vocab`` (cached)."""
    with _TOKENIZERS_LOCK:
        known = _TOKENIZERS.get(hf_tokenizer)
        if known is not None and vocab in known:
            return known[vocab]
        require_llguidance()
        from llguidance.hf import from_tokenizer

        lltok = from_tokenizer(hf_tokenizer, n_vocab=vocab)
        size = min(len(hf_tokenizer), vocab)
        made = wrap_tokenizer(lltok, vocab=vocab, eos=int(hf_tokenizer.eos_token_id), size=size)
        _TOKENIZERS.setdefault(hf_tokenizer, {})[vocab] = made
        return made


def wrap_tokenizer(
    lltok: Any, *, vocab: int, eos: int, size: int, source: str = ""
) -> GuideTokenizer:
    """A :class:`GuideTokenizer` around an llguidance tokenizer built elsewhere (from a Hugging
    Face tokenizer above, or from a llama.cpp vocabulary by :mod:`lemon.backends.llamacpp`):
    ``size`` tokens of logits ``vocab`` wide; ``source`` keeps the matchers built for
    tokenizers of different origins apart even where their bytes agree."""
    import numpy as np

    pieces = tuple(lltok.decode_bytes([i]) for i in range(size))
    bits = np.zeros(((vocab + 31) // 32) * 32, dtype=bool)
    for i, piece in enumerate(pieces):
        newline = piece.find(b"\n")
        bits[i] = newline < 0 or not piece[newline + 1 :].strip(b" ")
    line_safe = np.packbits(bits, bitorder="little").view(np.int32).copy()
    tag = f":{vocab}:{eos}" + (f":{source}" if source else "")
    digest = hashlib.sha256(b"\x00".join(pieces) + tag.encode()).hexdigest()
    return GuideTokenizer(lltok, vocab, eos, pieces, line_safe, digest)


@functools.lru_cache(maxsize=4096)
def _compiled(lark: str) -> str:
    """The grammar in llguidance's internal form (lines repeat across sequences)."""
    llguidance = require_llguidance()
    text: str = llguidance.LLMatcher.grammar_from_lark(lark)
    return text


_PRISTINE: OrderedDict[tuple[str, str], Any] = OrderedDict()
"""Built matchers by (the tokenizer's vocabulary digest, the grammar)."""
_PRISTINE_LOCK = threading.Lock()


def _fresh_matcher(tokenizer: GuideTokenizer, lark: str) -> Any:
    """A matcher at the start of ``lark``: a copy of a kept one when this grammar was built
    before (building takes milliseconds, copying microseconds), else built and kept."""
    key = (tokenizer.digest, lark)
    with _PRISTINE_LOCK:
        kept = _PRISTINE.get(key)
        if kept is not None:
            _PRISTINE.move_to_end(key)
            return kept.deep_copy()
    llguidance = require_llguidance()
    matcher = llguidance.LLMatcher(tokenizer.lltok, _compiled(lark))
    if matcher.is_error():
        raise SpecGrammarError(f"llguidance rejected the grammar: {matcher.get_error()}")
    with _PRISTINE_LOCK:
        _PRISTINE[key] = matcher
        while len(_PRISTINE) > 1024:
            _PRISTINE.popitem(last=False)
    return matcher.deep_copy()


class LarkMatcher:
    """One sequence under a fixed Lark grammar: mask before each token, consume after it."""

    line_rule = False
    """Also apply the newline rule (:attr:`GuideTokenizer.line_safe`) to the mask."""

    def __init__(self, grammar: LarkGrammar, tokenizer: GuideTokenizer) -> None:
        self.tokenizer = tokenizer
        self.finished = False
        self.error: str | None = None
        self.used = 0
        self._matcher = _fresh_matcher(tokenizer, grammar.text)

    def fill_mask(self, row: Any) -> None:
        """Write the allowed tokens into ``row`` (a C-contiguous int32 numpy vector); only the
        end token once the sequence is finished or broken."""
        if self.finished or self.error is not None:
            row[:] = 0
            row[self.tokenizer.eos // 32] = 1 << (self.tokenizer.eos % 32)
            return
        self._matcher.unsafe_compute_mask_ptr(row.ctypes.data, row.nbytes)
        if self.line_rule:
            row &= self.tokenizer.line_safe

    def consume(self, token: int) -> None:
        """Advance past ``token`` (a token the mask allowed)."""
        if self.finished or self.error is not None:
            return
        if not self._matcher.consume_token(token):
            self.error = f"token {token} was not allowed: {self._matcher.get_error()}"
            return
        self.used += 1
        if token == self.tokenizer.eos or self._matcher.is_stopped():
            self.finished = True
            return
        self._after(token)

    def _after(self, token: int) -> None:
        """What a subclass does after an accepted token that did not end the sequence."""


class SpecMatcher(LarkMatcher):
    """One sequence under the spec grammar, its line grammar rebuilt at each newline."""

    line_rule = True

    def __init__(self, grammar: SpecGrammar, tokenizer: GuideTokenizer) -> None:
        self.state: LineState = grammar.start()
        self.line = bytearray()
        self.rebuilds = 1
        super().__init__(LarkGrammar(self.state.lark()), tokenizer)

    def _after(self, token: int) -> None:
        pieces = self.tokenizer.token_bytes
        piece = pieces[token] if token < len(pieces) else b""
        if b"\n" not in piece:
            self.line += piece
            return
        head, _, tail = piece.rpartition(b"\n")
        line = (self.line + head).decode("utf-8", errors="replace")
        try:
            self.state = self.state.advance(line, used=self.used, spaces=len(tail))
        except SpecGrammarError as exc:
            self.error = str(exc)
            return
        self.line = bytearray(tail)
        if not self.state.done:
            self.rebuilds += 1
            self._matcher = _fresh_matcher(self.tokenizer, self.state.lark())


def make_matcher(
    constraint: SpecGrammar | LarkGrammar, tokenizer: GuideTokenizer
) -> SpecMatcher | LarkMatcher:
    if isinstance(constraint, LarkGrammar):
        return LarkMatcher(constraint, tokenizer)
    return SpecMatcher(constraint, tokenizer)


class GuidedLogits:
    """A transformers logits processor (the in-process backend's batches): each constrained row
    keeps only the tokens its matcher allows
    (unconstrained rows of the same batch are left as they are). It also stamps the time of
    every decode step (``stamps``), which ``lemon bench constrained`` reads."""

    def __init__(self, matchers: list[Any], *, start: int, vocab: int) -> None:
        import numpy as np

        self.matchers = matchers
        self.start = start
        self.seen = 0
        self.rows = [i for i, m in enumerate(matchers) if m is not None]
        self.bitmask = np.full((len(matchers), (vocab + 31) // 32), -1, dtype=np.int32)
        self.mask_s = 0.0
        self.stamps: list[float] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import numpy as np
        import torch

        started = time.perf_counter()
        self.stamps.append(started)
        if not self.rows:
            return scores
        generated = input_ids.shape[1] - self.start
        if generated > self.seen:
            last = input_ids[:, -1].tolist()
            for i in self.rows:
                self.matchers[i].consume(int(last[i]))
            self.seen = generated
        for i in self.rows:
            self.matchers[i].fill_mask(self.bitmask[i])
        bits = np.unpackbits(self.bitmask.view(np.uint8), axis=1, bitorder="little")
        blocked = bits[:, : scores.shape[1]] == 0
        if scores.device.type == "cpu" and scores.dtype == torch.float32:
            # numpy, single-threaded: torch's masked_fill_ takes milliseconds here when the
            # cores are busy (its thread pool waits for them), numpy about 0.1 ms
            scores.numpy()[blocked] = -np.inf
        else:
            scores.masked_fill_(torch.from_numpy(blocked).to(scores.device), float("-inf"))
        self.mask_s += time.perf_counter() - started
        return scores
