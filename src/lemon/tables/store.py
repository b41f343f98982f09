"""An outcome table on disk: every (item, team) outcome, and every worker call behind them.

A table is a directory (``tables/<name>/``) of three files:

- ``table.json``: what the table is: ``benchmark``, ``split``, the ordered item ids, the teams
  (name → description, decoding, spec), the worker settings (tokens per agent, deadline), the
  tier prices, and each tier's model (name, label and the identity that keys its calls). Written
  when the table is created; later builds may add items (appended in order) and teams, and
  must use the same models and settings (:class:`TableMismatch` otherwise).
- ``cells.jsonl``: one line per (item, team) outcome, appended as each finishes:
  ``{"item", "team", "success", "extracted", "answer", "status", "error", "tokens": {tier: n},
  "worker_tokens", "priced", "agents": [[name, tier, key-or-null, prompt, completion]],
  "wall_s"}``. ``key`` names the agent's worker call in ``calls.jsonl``; a tool agent
  (``python_executor``) has none.
- ``calls.jsonl``: one line per distinct worker call: ``{"key", "tier", "text",
  "prompt_tokens", "completion_tokens", "finish"}``. A call shared by two teams (the solver of
  ``single-medium`` is the solver of ``verify-medium-large``) is stored once: this is what a
  run's *distinct worker calls* count.

Both JSONL files are appended one flushed line at a time (calls first, then the cell that
reads them), so an interrupted build loses at most the cells in flight; a torn last line is
cut when the table is opened for writing and skipped when it is read. ``summary.json`` (per
team accuracy and cost; :func:`lemon.tables.report.summarize`) is rewritten after every build.

The table, not a rerun, is the source of truth: greedy llama.cpp decoding is not
batch-invariant, so the same request can decode differently in another batch. A fresh clone
reads the same answers from these files without any model (:mod:`lemon.tables.replay`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel, ConfigDict, Field

from lemon import atomic
from lemon.engine.results import RunStatus
from lemon.jsonl import drop_torn_tail, json_lines
from lemon.orchestration import AgentRun, ItemOutcome
from lemon.spec.models import Spec

__all__ = [
    "FORMAT",
    "PARTS",
    "Cell",
    "CellAgent",
    "StoredCall",
    "Table",
    "TableError",
    "TableMeta",
    "TableMismatch",
    "TierModel",
    "stored_calls",
]

FORMAT = "lemon-outcome-table/v1"
PARTS = ("all", "fit", "validation")
"""A table's parts (:meth:`Table.part`): every item, or a train table's fit or validation part."""


class TableError(ValueError):
    """A table file that cannot be read; the message names the file and line."""


class TableMismatch(TableError):
    """A build whose models or settings differ from the table's."""


class TierModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    """The backend's model id (e.g. ``llamacpp:qwen2.5-coder-1.5b-instruct``)."""
    label: str
    identity: str
    """What keys its calls: the GGUF's hash, llama-cpp-python's version and the settings."""


class TableMeta(BaseModel):
    """``table.json``."""

    model_config = ConfigDict(extra="forbid")

    format: str = FORMAT
    benchmark: str
    split: str
    items: list[str]
    teams: dict[str, dict[str, Any]] = Field(default_factory=dict)
    worker_max_tokens: int
    deadline_s: float
    tier_prices: dict[str, float]
    models: dict[str, TierModel]
    profile: str
    selection: str = ""
    """How the items were chosen, in words (seeded order, stratification)."""
    builds: list[dict[str, Any]] = Field(default_factory=list)
    """One entry per build: command, commit, start and end, cells added, CPU seconds."""


@dataclass(frozen=True, slots=True)
class StoredCall:
    key: str
    tier: str
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish: str

    @classmethod
    def of(cls, agent: AgentRun) -> StoredCall:
        """The worker call that answered ``agent`` (it must have a key)."""
        if agent.key is None:
            raise ValueError(f"agent {agent.name!r} has no call key to store its call under")
        return cls(
            key=agent.key,
            tier=agent.tier,
            text=agent.output,
            prompt_tokens=agent.prompt_tokens,
            completion_tokens=agent.completion_tokens,
            finish=agent.finish or "stop",
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "tier": self.tier,
            "text": self.text,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "finish": self.finish,
        }


def stored_calls(outcome: ItemOutcome) -> list[StoredCall]:
    """The worker calls ``outcome``'s cell reads (what ``calls.jsonl`` stores of them)."""
    return [StoredCall.of(a) for a in outcome.agent_runs if a.answered and a.key is not None]


CellAgent = tuple[str, str, str | None, int, int]
"""(name, tier, call key or None for a tool or an agent that never answered, prompt tokens,
completion tokens): one agent of a cell, as ``cells.jsonl`` writes it."""


@dataclass(slots=True)
class Cell:
    """One (item, team) outcome: the table's projection of the run's
    :class:`~lemon.orchestration.ItemOutcome` (:meth:`of`), and back (:meth:`outcome`). The
    fields carry the record's names; ``cells.jsonl`` keeps its own keys (``tokens`` for
    ``tokens_by_tier``, ``priced`` for ``priced_tokens``)."""

    item: str
    team: str
    success: float
    extracted: float | str | None
    answer: str | None
    status: str
    error: str | None
    tokens_by_tier: dict[str, int]
    """Worker tokens (prompt + completion) per tier."""
    priced_tokens: float
    """Tier-priced worker tokens (the table's prices)."""
    agents: list[CellAgent]
    """Every agent, in the spec's order (:data:`CellAgent`)."""
    wall_s: float = 0.0

    @classmethod
    def of(cls, outcome: ItemOutcome, *, item: str, team: str) -> Cell:
        """``outcome`` as ``team``'s cell of ``item``. Every worker answer a cell reads is named
        by the content key the call cache (or the table) gave it as it answered: a table is
        built on backends wrapped by one of them, and an answered agent without a key is a
        ``ValueError``."""
        for agent in outcome.agent_runs:
            if agent.answered and agent.key is None:
                raise ValueError(
                    f"{item} {team}: agent {agent.name!r} has no call key (a table is built on "
                    "backends wrapped by the call cache or the table)"
                )
        return cls(
            item=item,
            team=team,
            success=outcome.success,
            extracted=outcome.extracted,
            answer=outcome.answer,
            status=outcome.status.value,
            error=outcome.error,
            tokens_by_tier=outcome.tokens_by_tier,
            priced_tokens=outcome.priced_tokens or 0.0,
            agents=[
                (a.name, a.tier, a.key, a.prompt_tokens, a.completion_tokens)
                for a in outcome.agent_runs
            ],
            wall_s=outcome.wall_s,
        )

    def outcome(self, *, spec: Spec, policy_priced_tokens: float = 0.0) -> ItemOutcome:
        """The cell as the record it was projected from, for ``spec`` (the team's spec, whose
        structure R_orch counts). What the table does not keep stays at its default: the
        agents' outputs (``calls.jsonl`` holds them), the failure kind, the calls made."""
        return ItemOutcome(
            valid=True,
            success=self.success,
            worker_tokens=self.worker_tokens,
            priced_tokens=self.priced_tokens,
            policy_priced_tokens=policy_priced_tokens,
            agents=len(spec.agents),
            edges=sum(len(a.depends_on) for a in spec.agents),
            answer=self.answer,
            extracted=self.extracted,
            agent_runs=tuple(
                AgentRun(
                    name=name,
                    tier=tier,
                    prompt_tokens=prompt,
                    completion_tokens=completion,
                    answered=key is not None,
                    key=key,
                )
                for name, tier, key, prompt, completion in self.agents
            ),
            status=RunStatus(self.status),
            error=self.error,
            wall_s=self.wall_s,
        )

    @property
    def worker_tokens(self) -> int:
        return sum(self.tokens_by_tier.values())

    @property
    def keys(self) -> list[str]:
        return [a[2] for a in self.agents if a[2] is not None]

    def to_json(self) -> dict[str, Any]:
        return {
            "item": self.item,
            "team": self.team,
            "success": self.success,
            "extracted": self.extracted,
            "answer": self.answer,
            "status": self.status,
            "error": self.error,
            "tokens": self.tokens_by_tier,
            "worker_tokens": self.worker_tokens,
            "priced": round(self.priced_tokens, 3),
            "agents": [list(a) for a in self.agents],
            "wall_s": round(self.wall_s, 3),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Cell:
        return cls(
            item=str(data["item"]),
            team=str(data["team"]),
            success=float(data["success"]),
            extracted=data.get("extracted"),
            answer=data.get("answer"),
            status=str(data["status"]),
            error=data.get("error"),
            tokens_by_tier={str(k): int(v) for k, v in dict(data["tokens"]).items()},
            priced_tokens=float(data["priced"]),
            agents=[
                (str(a[0]), str(a[1]), None if a[2] is None else str(a[2]), int(a[3]), int(a[4]))
                for a in data["agents"]
            ],
            wall_s=float(data.get("wall_s", 0.0)),
        )


@dataclass(slots=True)
class Table:
    """A table directory, read into memory (a few MB at most)."""

    path: Path
    meta: TableMeta
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)
    calls: dict[str, StoredCall] = field(default_factory=dict)
    torn: list[str] = field(default_factory=list)
    """Torn last lines skipped while reading (an interrupted build)."""

    # -- reading ------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path | str) -> Table:
        """Read the table at ``path``; :class:`TableError` (located) when it cannot be read."""
        root = Path(path)
        meta_path = root / "table.json"
        try:
            meta = TableMeta.model_validate_json(meta_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise TableError(f"{meta_path}: no table here (no table.json)") from None
        except ValueError as exc:
            raise TableError(f"{meta_path}: not a table description: {exc}") from None
        if meta.format != FORMAT:
            raise TableError(f"{meta_path}: format {meta.format!r}, this LEMON reads {FORMAT!r}")
        table = cls(root, meta)
        for where, value in table._lines("calls.jsonl"):
            try:
                call = StoredCall(
                    key=str(value["key"]),
                    tier=str(value["tier"]),
                    text=str(value["text"]),
                    prompt_tokens=int(value["prompt_tokens"]),
                    completion_tokens=int(value["completion_tokens"]),
                    finish=str(value.get("finish", "stop")),
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise TableError(f"{where}: not a call record: {exc!r}") from None
            table.calls.setdefault(call.key, call)
        for where, value in table._lines("cells.jsonl"):
            try:
                cell = Cell.from_json(value)
            except (KeyError, TypeError, ValueError, IndexError) as exc:
                raise TableError(f"{where}: not a cell record: {exc!r}") from None
            table.cells.setdefault((cell.item, cell.team), cell)
        return table

    def _lines(self, name: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
        path = self.path / name
        if not path.is_file():
            return
        try:
            for where, _, value in json_lines(path, on_torn_tail=self.torn.append):
                if not isinstance(value, dict):
                    raise TableError(f"{where}: not a JSON object")
                yield where, value
        except ValueError as exc:
            if isinstance(exc, TableError):
                raise
            raise TableError(str(exc)) from None

    @property
    def teams(self) -> list[str]:
        return list(self.meta.teams)

    @property
    def items(self) -> list[str]:
        return list(self.meta.items)

    def part(self, part: str) -> list[str]:
        """The table's items in ``part``, in its order: ``all``, or a train table's ``fit`` or
        ``validation`` part (:func:`lemon.data.splits.validation_ids`: by template or sibling).
        :class:`TableError` for an unknown part or a part of a test table."""
        if part == "all":
            return self.items
        if part not in PARTS:
            raise TableError(f"part {part!r}: one of {', '.join(PARTS)}")
        if self.meta.split != "train":
            raise TableError(f"part {part} needs a train table; {self.path} is {self.meta.split}")
        from lemon.data import Benchmark
        from lemon.data.splits import validation_ids
        from lemon.scoring import item_index

        index = item_index(Benchmark(self.meta.benchmark))
        held = validation_ids([index[i] for i in self.items])
        return [i for i in self.items if (i in held) == (part == "validation")]

    def cell(self, item: str, team: str) -> Cell | None:
        return self.cells.get((item, team))

    def complete_teams(self, items: list[str] | None = None) -> list[str]:
        """Teams with a cell for every item (of ``items``, default all)."""
        wanted = items if items is not None else self.meta.items
        return [t for t in self.meta.teams if all((i, t) in self.cells for i in wanted)]

    def covered(self, team: str) -> list[str]:
        """The items, in table order, that ``team`` has a cell for."""
        return [i for i in self.meta.items if (i, team) in self.cells]

    # -- writing ------------------------------------------------------------------------------

    @classmethod
    def create(cls, path: Path | str, meta: TableMeta) -> Table:
        root = Path(path)
        root.mkdir(parents=True, exist_ok=True)
        table = cls(root, meta)
        table.save_meta()
        return table

    def save_meta(self) -> None:
        atomic.write_text(self.path / "table.json", self.meta.model_dump_json(indent=1) + "\n")

    def writer(self) -> TableWriter:
        return TableWriter(self)


class TableWriter:
    """Appends cells and the calls they read, one flushed line each (calls first)."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self._calls: TextIO | None = None
        self._cells: TextIO | None = None

    def __enter__(self) -> TableWriter:
        for name in ("calls.jsonl", "cells.jsonl"):
            drop_torn_tail(self.table.path / name)
        self._calls = (self.table.path / "calls.jsonl").open("a", encoding="utf-8")
        self._cells = (self.table.path / "cells.jsonl").open("a", encoding="utf-8")
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in (self._calls, self._cells):
            if handle is not None:
                handle.close()

    def add(self, cell: Cell, calls: list[StoredCall]) -> int:
        """Record ``cell`` and those of ``calls`` the table lacks; returns how many were new."""
        if self._calls is None or self._cells is None:
            raise RuntimeError("TableWriter.add outside its with-block")
        new = 0
        for call in calls:
            if call.key in self.table.calls:
                continue
            self._calls.write(json.dumps(call.to_json(), ensure_ascii=False) + "\n")
            self.table.calls[call.key] = call
            new += 1
        self._calls.flush()
        self._cells.write(json.dumps(cell.to_json(), ensure_ascii=False) + "\n")
        self._cells.flush()
        self.table.cells[(cell.item, cell.team)] = cell
        return new
