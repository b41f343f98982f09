"""A run's budget: worker tokens, tier-priced cost and wall time, each optional.

Units (the same as a run's result reports them):

- ``tokens``: worker tokens, prompt and completion of every model call of the run (tool agents
  spend none), as :meth:`lemon.engine.results.RunResult.tokens` counts them;
- ``cost``: tier-priced tokens, each worker token weighed by its tier's price relative to the
  medium tier's (:mod:`lemon.pricing`; a run's ``priced_tokens``);
- ``wall``: seconds from the first agent's start to the run's end.

:func:`parse_budget` reads the command line's form, ``tokens=2000,cost=800,wall=60s`` (any
subset, any order; ``k`` multiplies a count by 1000; ``wall`` takes ``s``, ``m`` or ``h``, bare
numbers are seconds), and :meth:`Budget.from_mapping` a JSON or YAML object of the same keys.
Bad input raises :class:`BudgetError`, whose message names the field (``--budget cost: ...``).

The executor enforces a budget during the run (:mod:`lemon.engine.metering`); before it,
:mod:`lemon.policy.estimates` estimates a spec's cost (:class:`BudgetEstimate`) and refuses it
with :class:`BudgetRefused` when the estimate exceeds the budget. :class:`BudgetUse` is what a
run reports: the budget, what was spent, the estimate and why it stopped, if it did.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

WORKER_MAX_TOKENS = 300
"""The completion tokens one worker agent may write, wherever a caller does not say: ``lemon
run``, ``lemon eval``, ``lemon table build``, the gRPC service (Orchestrate, SubmitRun, a
LemonRun without ``maxTokens``), GRPO's executed rollouts. The outcome tables measured every
team at this budget, so the default team runs as it was measured."""

__all__ = [
    "PROMPT_ALLOWANCE",
    "WORKER_MAX_TOKENS",
    "Budget",
    "BudgetError",
    "BudgetEstimate",
    "BudgetRefused",
    "BudgetScope",
    "BudgetUse",
    "EstimateSource",
    "parse_budget",
    "prompt_bound",
]

FIELDS = ("tokens", "cost", "wall")
"""The budget's fields, in the order they are written."""

PROMPT_ALLOWANCE = 64
"""Tokens a chat template may add around a prompt's text (role markers, a default system
prompt: SmolLM2's and Qwen2.5's add about 20 to 30), in :func:`prompt_bound`."""

_NUMBER = re.compile(r"^(?P<value>-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))\s*(?P<unit>[a-zA-Z]*)$")
_WALL_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_COUNT_UNITS = {"": 1.0, "k": 1000.0}


class BudgetError(ValueError):
    """A budget that cannot be used; ``field`` names the offending field (or ``None`` when the
    whole budget is at fault) and the message starts with ``source`` and the field."""

    def __init__(self, message: str, *, field: str | None = None, source: str = "budget") -> None:
        where = f"{source} {field}" if field else source
        super().__init__(f"{where}: {message}")
        self.field = field
        self.source = source


def prompt_bound(text: str) -> int:
    """An upper bound of a prompt's tokens when no tokenizer is at hand: its UTF-8 bytes (a
    byte-level BPE token, as every model of the built-in profiles uses, covers at least one
    byte) plus :data:`PROMPT_ALLOWANCE` for the chat template."""
    return len(text.encode("utf-8")) + PROMPT_ALLOWANCE


def _number(raw: str, units: Mapping[str, float], *, field: str, source: str) -> float:
    match = _NUMBER.match(raw.strip())
    if match is None or match["unit"].lower() not in units:
        allowed = ", ".join(repr(u) for u in units if u) or "none"
        raise BudgetError(
            f"{raw.strip()!r} is not a number with a unit this field takes (units: {allowed})",
            field=field,
            source=source,
        )
    return float(match["value"]) * units[match["unit"].lower()]


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits on one run; ``None`` leaves that dimension unlimited (at least one is set)."""

    tokens: int | None = None
    """Worker tokens (prompt + completion of every model call)."""
    cost: float | None = None
    """Tier-priced tokens (:mod:`lemon.pricing`: a medium-tier token costs 1)."""
    wall_s: float | None = None
    """Seconds of the whole run."""
    source: str = "budget"
    """Where it was given, for messages (``--budget``, ``spec.budget``)."""

    def __post_init__(self) -> None:
        if self.tokens is None and self.cost is None and self.wall_s is None:
            raise BudgetError(
                "give at least one of tokens, cost, wall (e.g. tokens=2000,cost=800,wall=60s)",
                source=self.source,
            )
        for name, value in (("tokens", self.tokens), ("cost", self.cost), ("wall", self.wall_s)):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise BudgetError(f"{value!r} is not a number", field=name, source=self.source)
            if not math.isfinite(value) or value <= 0:
                raise BudgetError(
                    f"must be a positive number, got {value:g}", field=name, source=self.source
                )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "budget") -> Budget:
        """From ``{"tokens": 2000, "cost": 800, "wall": "60s"}`` (numbers or strings with
        units; ``wall_s`` is taken for ``wall``)."""
        values: dict[str, str] = {}
        for key, value in data.items():
            name = "wall" if key == "wall_s" else str(key)
            if name not in FIELDS:
                raise BudgetError(
                    f"unknown field (the fields are {', '.join(FIELDS)})", field=name, source=source
                )
            if name in values:
                raise BudgetError("given twice", field=name, source=source)
            if value is None or isinstance(value, bool) or not isinstance(value, int | float | str):
                raise BudgetError(f"{value!r} is not a number", field=name, source=source)
            values[name] = str(value)
        return cls._from_strings(values, source=source)

    @classmethod
    def _from_strings(cls, values: Mapping[str, str], *, source: str) -> Budget:
        tokens = cost = wall = None
        if "tokens" in values:
            count = _number(values["tokens"], _COUNT_UNITS, field="tokens", source=source)
            if count != int(count):
                raise BudgetError(
                    f"{values['tokens']!r} is not a whole number of tokens",
                    field="tokens",
                    source=source,
                )
            tokens = int(count)
        if "cost" in values:
            cost = _number(values["cost"], _COUNT_UNITS, field="cost", source=source)
        if "wall" in values:
            wall = _number(values["wall"], _WALL_UNITS, field="wall", source=source)
        return cls(tokens=tokens, cost=cost, wall_s=wall, source=source)

    def text(self) -> str:
        """The budget as :func:`parse_budget` reads it (``tokens=2000,cost=800,wall=60s``)."""
        parts = []
        if self.tokens is not None:
            parts.append(f"tokens={self.tokens}")
        if self.cost is not None:
            parts.append(f"cost={self.cost:g}")
        if self.wall_s is not None:
            parts.append(f"wall={self.wall_s:g}s")
        return ",".join(parts)

    def label(self) -> str:
        """How messages name it: ``--budget tokens=2000,cost=800``."""
        return f"{self.source} {self.text()}"

    def describe(self) -> str:
        """In words, with units."""
        parts = []
        if self.tokens is not None:
            parts.append(f"{self.tokens} worker tokens")
        if self.cost is not None:
            parts.append(f"{self.cost:g} tier-priced tokens")
        if self.wall_s is not None:
            parts.append(f"{self.wall_s:g} s wall time")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "cost": self.cost, "wall_s": self.wall_s}


def parse_budget(text: str, *, source: str = "--budget") -> Budget:
    """``tokens=2000,cost=800,wall=60s`` (any subset of the fields, any order) as a
    :class:`Budget`; a :class:`BudgetError` naming the field otherwise."""
    values: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            raise BudgetError(
                f"{text!r} has an empty entry; write e.g. tokens=2000,cost=800,wall=60s",
                source=source,
            )
        name, sep, value = part.partition("=")
        name = name.strip().lower()
        if not sep:
            raise BudgetError(
                f"{part.strip()!r} is not FIELD=VALUE (the fields are {', '.join(FIELDS)})",
                source=source,
            )
        if name not in FIELDS:
            raise BudgetError(
                f"unknown field (the fields are {', '.join(FIELDS)})", field=name, source=source
            )
        if name in values:
            raise BudgetError("given twice", field=name, source=source)
        values[name] = value
    return Budget._from_strings(values, source=source)


EstimateSource = Literal["table", "upper_bound"]
BudgetScope = Literal["run", "shared"]
"""Which budget stopped a run: its own, or a shared one it draws from (its namespace's)."""


@dataclass(frozen=True, slots=True)
class BudgetEstimate:
    """What a spec is expected to spend, before it runs, and what that figure rests on."""

    tokens: float
    """Worker tokens."""
    cost: float
    """Tier-priced tokens."""
    source: EstimateSource
    """``table``: the team's mean over an outcome table's items; ``upper_bound``: the most its
    agents can spend (each prompt bounded by its bytes, each answer by ``max_tokens``)."""
    basis: str
    """The figure's origin in words (the team, the table and its items, or the bound's terms)."""

    def overruns(self, budget: Budget) -> list[str]:
        """One message per field of ``budget`` the estimate exceeds, naming the field."""
        out = []
        if budget.tokens is not None and self.tokens > budget.tokens:
            out.append(
                f"tokens: estimated {self.tokens:.0f} worker tokens, the budget allows "
                f"{budget.tokens}"
            )
        if budget.cost is not None and self.cost > budget.cost:
            out.append(
                f"cost: estimated {self.cost:.0f} tier-priced tokens, the budget allows "
                f"{budget.cost:g}"
            )
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "cost": self.cost,
            "source": self.source,
            "basis": self.basis,
        }


class BudgetRefused(Exception):
    """A run refused before anything ran: its spec's estimate exceeds the budget (and no
    replacement was allowed, or none fits). The message names the budget."""

    def __init__(
        self, reason: str, *, budget: Budget, estimate: BudgetEstimate | None = None
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.budget = budget
        self.estimate = estimate

    def to_json(self) -> dict[str, Any]:
        return {
            "status": "refused",
            "failure": "budget_exceeded",
            "error": self.reason,
            "budget": self.budget.to_json(),
            "estimate": self.estimate.to_json() if self.estimate is not None else None,
        }


@dataclass(frozen=True, slots=True)
class BudgetUse:
    """A budgeted run's account: the limits, what it spent, and why it stopped if it did."""

    budget: Budget | None
    """The run's own budget (None: it drew only from a shared budget)."""
    tokens: int
    """Worker tokens spent (equal to the run's ``tokens.total``)."""
    cost: float
    """Tier-priced tokens spent."""
    wall_s: float
    reason: str | None = None
    """Why the budget stopped the run or an agent (None when it did not)."""
    estimate: BudgetEstimate | None = None
    """The estimate made before the run (set by :mod:`lemon.orchestration`)."""
    replaced: str | None = None
    """When the budget replaced the spec: why (the original's estimate), else None."""
    scope: BudgetScope | None = None
    """Which budget stopped the run (with ``reason``): its own, or the shared one."""
    shared: str | None = None
    """The shared budget the run drew from, in words (``LemonBudget team/a (tokens=5000 per
    3600 s)``), else None."""

    def to_json(self) -> dict[str, Any]:
        """The account as a run's JSON carries it, unrounded (:meth:`from_json` reads it back
        equal); ``limits_source`` only where the limits came from elsewhere than ``budget``."""
        data: dict[str, Any] = {
            "limits": self.budget.to_json() if self.budget is not None else None,
            "spent": {"tokens": self.tokens, "cost": self.cost, "wall_s": self.wall_s},
            "reason": self.reason,
            "estimate": self.estimate.to_json() if self.estimate is not None else None,
            "replaced": self.replaced,
            "scope": self.scope,
            "shared": self.shared,
        }
        if self.budget is not None and self.budget.source != "budget":
            data["limits_source"] = self.budget.source
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BudgetUse:
        """The account :meth:`to_json` wrote (the run's JSON, the service's run journal)."""
        limits, spent, estimate = data.get("limits"), data["spent"], data.get("estimate")
        scope = data.get("scope")
        if scope not in (None, "run", "shared"):
            raise ValueError(f"budget scope {scope!r} is neither run nor shared")
        if estimate is not None and estimate["source"] not in ("table", "upper_bound"):
            raise ValueError(f"estimate source {estimate['source']!r} is not table or upper_bound")
        return cls(
            budget=None
            if limits is None
            else Budget(
                tokens=limits.get("tokens"),
                cost=limits.get("cost"),
                wall_s=limits.get("wall_s"),
                source=str(data.get("limits_source", "budget")),
            ),
            tokens=int(spent["tokens"]),
            cost=float(spent["cost"]),
            wall_s=float(spent["wall_s"]),
            reason=data.get("reason"),
            estimate=None
            if estimate is None
            else BudgetEstimate(
                tokens=float(estimate["tokens"]),
                cost=float(estimate["cost"]),
                source=estimate["source"],
                basis=str(estimate["basis"]),
            ),
            replaced=data.get("replaced"),
            scope=scope,
            shared=data.get("shared"),
        )
