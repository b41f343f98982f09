"""Answering worker calls from an outcome table: the table as a set of backends.

:func:`table_backends` gives one backend per tier that answers a request from the table's
``calls.jsonl`` when the table holds that exact call (same model identity, decoding, prompt and
prefill: the call-cache key), and otherwise either asks a live backend (GRPO: the new call
joins the table's calls, :attr:`TableCalls.added`) or fails the agent with "not in the outcome
table" (evaluation on a fresh clone: no model is loaded). Any spec whose every worker call is
in the table (a table column, or another spec asking the same questions, such as a column's
agent under another name) runs with no model at all; :class:`TableCalls` counts the calls read
(``hits``), those it could not answer (``misses``) and the distinct keys read, which is what a
learning run's *distinct worker calls* are.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from lemon.backends.base import Backend, BackendError, Generation, GenerationRequest
from lemon.backends.callcache import CachedBackend
from lemon.spec.models import Capacity
from lemon.tables.store import StoredCall, Table

__all__ = ["MISSING", "TableCalls", "table_backends"]

MISSING = "not in the outcome table"
"""The reason of the error a call the table cannot answer fails with (no live backend)."""

_TENTATIVE: ContextVar[set[str] | None] = ContextVar("lemon_table_tentative", default=None)


@dataclass(slots=True)
class TableCalls:
    """The table's calls by key, in the shape :class:`CachedBackend` reads a cache through."""

    calls: dict[str, StoredCall]
    added: dict[str, StoredCall] = field(default_factory=dict)
    """Calls answered live and recorded here (they are not written to the table's files)."""
    read: set[str] = field(default_factory=set)
    """Every key asked for (answered from the table, live, or missed)."""
    hits: int = 0
    misses: int = 0

    def get(self, key: str) -> Generation | None:
        tentative = _TENTATIVE.get()
        if tentative is not None:
            tentative.add(key)
        else:
            self.read.add(key)
        call = self.calls.get(key) or self.added.get(key)
        if call is None:
            if tentative is None:
                self.misses += 1
            return None
        if tentative is None:
            self.hits += 1
        return Generation(call.text, call.prompt_tokens, call.completion_tokens, call.finish)

    @contextmanager
    def tentative(self) -> Iterator[set[str]]:
        """Reads in this context (this task and the tasks it starts) go to the yielded set,
        not to :attr:`read` nor the counts, for a caller that decides afterwards whether they
        happened: a mutant kept only if every call it read had been read before."""
        reads: set[str] = set()
        token = _TENTATIVE.set(reads)
        try:
            yield reads
        finally:
            _TENTATIVE.reset(token)

    def put(self, key: str, model: str, generation: Generation) -> Generation:
        if key in self.added:  # the first answer wins
            kept = self.added[key]
            return Generation(kept.text, kept.prompt_tokens, kept.completion_tokens, kept.finish)
        self.added[key] = StoredCall(
            key=key,
            tier=model,
            text=generation.text,
            prompt_tokens=generation.prompt_tokens,
            completion_tokens=generation.completion_tokens,
            finish=generation.finish_reason,
        )
        return generation


class _NotInTable:
    """The backend behind a table tier with no live model: every call it gets is a miss."""

    def __init__(self, tier: str, model: str) -> None:
        self.tier = tier
        self._model = model

    @property
    def model_id(self) -> str:
        return self._model

    @property
    def label(self) -> str:
        return f"the outcome table's {self.tier} tier (no model loaded)"

    async def generate(self, request: GenerationRequest) -> Generation:
        raise BackendError(MISSING, transient=False, unavailable=False, kind="not_in_table")

    async def aclose(self) -> None:
        return


def table_backends(
    table: Table,
    *,
    live: Mapping[Capacity, Backend] | None = None,
    calls: TableCalls | None = None,
) -> tuple[dict[Capacity, Backend], TableCalls]:
    """One backend per tier answering from ``table`` (then from ``live``, when given), and the
    call store they share (pass ``calls`` to share one across several tables' runs)."""
    store = calls if calls is not None else TableCalls(dict(table.calls))
    backends: dict[Capacity, Backend] = {}
    for tier in Capacity:
        model = table.meta.models.get(tier.value)
        if model is None:
            raise KeyError(f"the table {table.path} has no {tier.value} tier")
        inner = live[tier] if live is not None else _NotInTable(tier.value, model.model)
        backends[tier] = CachedBackend(inner, store, identity=model.identity)  # type: ignore[arg-type]
    return backends, store
