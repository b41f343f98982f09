"""The persistent call cache: deterministic model calls answered once, on disk, for every process.

A worker call decoded greedily (temperature 0), or sampled with a recorded seed, answers the
same way every time for the same model and request, so its answer can be kept. The cache is a
SQLite database in WAL mode (readers never block the writer; a 30 s busy timeout queues
writers), shared by every process that opens it: the search teacher, GRPO rollouts and their
counterfactual mutants, and ``lemon eval``. :class:`CachedBackend` wraps any backend; it sits
under the executor's in-run :class:`~lemon.engine.executor.CallCache` (which also reuses by
agent name within one run and counts ``reused_calls``), so a run's persistent hits are the calls
that reached the backend and were answered from disk (``cache_hits``).

The key is a SHA-256 over:

- the model's identity: the backend's ``content_id`` when it has one (the in-process backend:
  a hash of the weight and tokenizer files plus dtype and device), else its ``model_id`` (an
  endpoint: URL and served model name, which cannot prove its weights);
- the decoding settings (max tokens, temperature, top-p, seed, stop strings);
- the full request: every message's role and text, the assistant prefill, a raw prompt, and the
  constraint's identity (its grammar's key, which hashes the grammar's code, and a hash of
  :mod:`lemon.backends.guided`, the code that applies it to the tokens in process; an endpoint
  applies the grammar itself, so there a change to that module only costs a miss).

The first answer stored for a key wins, for every process: a writer that computed the same call
at the same time gets the stored answer back from :meth:`PersistentCallCache.put`, so no two
readers ever see two answers to one question.

Sampling without a seed is never cached (nor read). Location: ``$LEMON_CALL_CACHE`` (a file
path, or ``off``), else ``calls.sqlite`` under ``$LEMON_CACHE_DIR`` (default
``~/.cache/lemon``). ``lemon cache stats|clear`` inspects and empties it.

On the in-process backend, a seeded sample decoded in a batch with other seeded requests
depends on its batch mates; the cache keeps the first answer, which makes later runs repeat it.
Greedy decoding is not batch-invariant either: llama.cpp's multi-sequence batches change the
floating-point reductions, so one greedy request can decode differently depending on what else
is in the batch (measured: one medium-tier GSM8K agent gave the same answer on 13 of 30 items
in two runs of the same requests at 8 and at 4 items in flight, 3 vs 6 correct). The cache
keeps the first answer, so every later reader (teacher, GRPO, mutants, eval) sees one answer
per request; comparisons of runs that did not share the cache carry that noise.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from lemon.backends import guided
from lemon.backends.base import Backend, Generation, GenerationRequest

__all__ = [
    "CacheStats",
    "CachedBackend",
    "PersistentCallCache",
    "cacheable",
    "default_cache_path",
    "file_fingerprint",
    "open_default_cache",
    "request_key",
    "wrap_backends",
]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    finish_reason TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS calls_model ON calls(model);
CREATE TABLE IF NOT EXISTS fingerprints (
    path TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    sha256 TEXT NOT NULL
);
"""


def default_cache_path() -> Path | None:
    """Where the cache lives (None: turned off with ``LEMON_CALL_CACHE=off``)."""
    explicit = os.environ.get("LEMON_CALL_CACHE")
    if explicit is not None:
        return None if explicit.strip().lower() in {"", "off", "0", "none"} else Path(explicit)
    base = os.environ.get("LEMON_CACHE_DIR")
    root = Path(base) if base else Path.home() / ".cache" / "lemon"
    return root / "calls.sqlite"


def cacheable(request: GenerationRequest) -> bool:
    """Deterministic calls only: greedy, or sampled with a seed."""
    decoding = request.decoding
    return decoding.temperature <= 0 or decoding.seed is not None


def request_key(model: str, request: GenerationRequest) -> str:
    constraint = (
        [request.constraint.key(), guided.guided_code()] if request.constraint is not None else None
    )
    payload = [
        "lemon-call/v1",
        model,
        list(request.decoding.key()),
        [[m.role, m.content] for m in request.messages],
        request.prefill,
        request.raw_prompt,
        constraint,
    ]
    encoded = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class CacheStats:
    path: str
    entries: int
    bytes: int
    models: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "entries": self.entries,
            "bytes": self.bytes,
            "models": self.models,
        }


class PersistentCallCache:
    """A SQLite-backed map from request keys to generations; safe across processes."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            self.path, timeout=30.0, check_same_thread=False, isolation_level=None
        )
        self._db.execute("PRAGMA busy_timeout = 30000")
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")
        with self._lock:
            self._db.executescript(_SCHEMA)
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Generation | None:
        with self._lock:
            row = self._db.execute(
                "SELECT text, prompt_tokens, completion_tokens, finish_reason FROM calls "
                "WHERE key = ?",
                (key,),
            ).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return Generation(str(row[0]), int(row[1]), int(row[2]), str(row[3]))

    def put(self, key: str, model: str, generation: Generation) -> Generation:
        """Store ``generation`` unless another writer stored this key first; returns the stored
        answer (the first one wins, for the writer that lost the race too)."""
        with self._lock:
            self._db.execute(
                "INSERT OR IGNORE INTO calls VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    model,
                    generation.text,
                    generation.prompt_tokens,
                    generation.completion_tokens,
                    generation.finish_reason,
                    time.time(),
                ),
            )
            row = self._db.execute(
                "SELECT text, prompt_tokens, completion_tokens, finish_reason FROM calls "
                "WHERE key = ?",
                (key,),
            ).fetchone()
        if row is None:  # cleared meanwhile
            return generation
        stored = Generation(str(row[0]), int(row[1]), int(row[2]), str(row[3]))
        return generation if stored == replace(generation, cached=False) else stored

    def stats(self) -> CacheStats:
        with self._lock:
            entries = self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
            models = dict(
                self._db.execute("SELECT model, COUNT(*) FROM calls GROUP BY model").fetchall()
            )
        size = sum(
            p.stat().st_size
            for p in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm"))
            if p.exists()
        )
        return CacheStats(
            str(self.path), int(entries), size, {str(k): int(v) for k, v in models.items()}
        )

    def clear(self, *, model: str | None = None) -> int:
        """Delete every entry (or one model's); returns how many went."""
        with self._lock:
            if model is None:
                cursor = self._db.execute("DELETE FROM calls")
            else:
                cursor = self._db.execute("DELETE FROM calls WHERE model = ?", (model,))
            removed = cursor.rowcount
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if model is None:
            with self._lock:
                self._db.execute("VACUUM")
        return int(removed)

    def fingerprint(self, path: Path) -> str:
        """SHA-256 of a file, remembered by (size, mtime) so large weights hash once."""
        stat = path.stat()
        key = str(path.resolve())
        with self._lock:
            row = self._db.execute(
                "SELECT size, mtime_ns, sha256 FROM fingerprints WHERE path = ?", (key,)
            ).fetchone()
        if row is not None and row[0] == stat.st_size and row[1] == stat.st_mtime_ns:
            return str(row[2])
        digest = file_fingerprint(path)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO fingerprints VALUES (?, ?, ?, ?)",
                (key, stat.st_size, stat.st_mtime_ns, digest),
            )
        return digest

    def close(self) -> None:
        with self._lock:
            self._db.close()


def file_fingerprint(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class CachedBackend:
    """A backend whose deterministic calls are answered from a :class:`PersistentCallCache`.

    Answers from the cache come back with ``cached=True``; they carry the token counts of the
    call that computed them, so a run's cost does not depend on what was cached."""

    def __init__(
        self, inner: Backend, cache: PersistentCallCache, *, identity: str | None = None
    ) -> None:
        self.inner = inner
        self.cache = cache
        self._identity: str | None = identity
        self._inflight: dict[str, asyncio.Future[Generation]] = {}
        """Calls being computed, by key: a second identical request waits for the first
        instead of decoding again (which, batched differently, could answer differently)."""

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def label(self) -> str:
        return self.inner.label

    def identity(self) -> str:
        """The model's identity in keys: its content id where the backend has one."""
        if self._identity is None:
            content = getattr(self.inner, "content_id", None)
            self._identity = content(self.cache) if callable(content) else self.inner.model_id
        return self._identity

    async def _identity_off_loop(self) -> str:
        """:meth:`identity`, computed in a thread the first time: a content id hashes the
        model's files and reads or writes its fingerprint in SQLite, which must not stall the
        event loop."""
        if self._identity is not None:
            return self._identity
        # two first calls at once may both compute it: the same answer, written once
        return await asyncio.to_thread(self.identity)

    async def count_prompt_tokens(self, request: GenerationRequest) -> int | None:
        """The inner backend's count of ``request``'s prompt tokens, where it has one."""
        count = getattr(self.inner, "count_prompt_tokens", None)
        if not callable(count):
            return None
        counted: int | None = await count(request)
        return counted

    async def generate(self, request: GenerationRequest) -> Generation:
        if not cacheable(request):
            return await self.inner.generate(request)
        identity = await self._identity_off_loop()
        key = request_key(identity, request)
        shared = await self._shared(key)
        if shared is not None:
            return replace(shared, key=key)
        # SQLite may wait on another process's write lock: never on the event loop
        found = await asyncio.to_thread(self.cache.get, key)
        if found is not None:
            return replace(found, cached=True, key=key)
        shared = await self._shared(key)  # another task may have started it while we looked
        if shared is not None:
            return replace(shared, key=key)
        future: asyncio.Future[Generation] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            generation = await self.inner.generate(request)
            try:
                stored = await asyncio.to_thread(self.cache.put, key, identity, generation)
            except sqlite3.Error:  # the answer stands; it is just not kept
                stored = generation
        except asyncio.CancelledError:
            future.cancel()  # a waiter computes it itself
            raise
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when unshared
            raise
        finally:
            self._inflight.pop(key, None)
        future.set_result(stored)
        return replace(stored, key=key)

    async def _shared(self, key: str) -> Generation | None:
        """The answer of an identical call in flight, once it finishes (None: there is none,
        or its caller gave up)."""
        pending = self._inflight.get(key)
        if pending is None:
            return None
        try:
            return replace(await asyncio.shield(pending), cached=True)
        except asyncio.CancelledError:
            if pending.cancelled():
                return None
            raise

    async def aclose(self) -> None:
        await self.inner.aclose()


K = TypeVar("K")


def wrap_backends(
    backends: Mapping[K, Backend], cache: PersistentCallCache | None
) -> dict[K, Backend]:
    """The same mapping with each distinct backend wrapped once (tiers may share one)."""
    if cache is None:
        return dict(backends)
    wrapped: dict[int, Backend] = {}
    out: dict[K, Backend] = {}
    for tier, backend in backends.items():
        if id(backend) not in wrapped:
            wrapped[id(backend)] = CachedBackend(backend, cache)
        out[tier] = wrapped[id(backend)]
    return out


def open_default_cache() -> PersistentCallCache | None:
    """The cache at :func:`default_cache_path`, or None when it is turned off."""
    path = default_cache_path()
    return None if path is None else PersistentCallCache(path)
