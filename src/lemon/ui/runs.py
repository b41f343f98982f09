"""A run as the web view shows it: built from its trace events, pure (no I/O).

A trace file may hold several runs (``lemon run --trace`` appends): :func:`split_runs` cuts it
after each ``run_finish``. :func:`summarise` gives the line of the runs list and
:func:`run_view` the whole page: the spec's agents with their duties, tiers and dependencies
(read from the ``run_start`` event's canonical YAML), each agent's state, prompt, output,
tokens and cost, the timeline and its critical path, the answer and, for a benchmark item, the
verdict.

**Cost.** Tier-priced tokens (:mod:`lemon.pricing`): each agent's prompt and completion tokens
times its tier's relative price (medium = 1), with the prices the run recorded (else the
defaults). **One large agent's cost** is what the same task would cost on a single large
agent: it reads the task once and writes one answer, so its prompt is the run's smallest prompt
among the agents that read no other agent's output (the task in a role's template) and its
answer is as long as the output agent's; priced at the large tier. It is an estimate from this
run's own sizes, not a run of that agent; the page says so.

**Critical path.** The chain of agents that set the run's wall time: from the output agent
back through, at each step, the dependency that finished last (the one it waited for); an
agent that never started falls back to the spec's longest dependency chain.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lemon.events import (
    AgentFailed,
    AgentFinished,
    AgentRetrying,
    AgentStarted,
    Event,
    PolicyAttempted,
    PolicyFellBack,
    RunFinished,
    RunScored,
    RunStarted,
    SpecReady,
    TraceTruncated,
)
from lemon.pricing import DEFAULT_TIER_PRICES, TierPrices
from lemon.spec.issues import SpecError
from lemon.spec.models import Capacity
from lemon.spec.source import read_document

__all__ = [
    "ONE_LARGE_HOW",
    "AgentView",
    "RunSummary",
    "run_view",
    "split_runs",
    "summarise",
]

ONE_LARGE_HOW = (
    "one large agent: the large tier's price x (the run's smallest prompt among agents that "
    "read only the task + the output agent's completion tokens); an estimate from this run's "
    "sizes, not a run"
)


def split_runs(events: Iterable[Event]) -> list[list[Event]]:
    """The runs in a trace, in order: a new run starts with the first event after a
    ``run_finish`` (a ``run_scored`` right after it still belongs to the finished run); the
    last run may be unfinished (still running, or killed)."""
    runs: list[list[Event]] = []
    current: list[Event] = []
    for event in events:
        if isinstance(event, RunScored) and not current and runs:
            runs[-1].append(event)
            continue
        current.append(event)
        if isinstance(event, RunFinished):
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


@dataclass(slots=True)
class AgentView:
    """One agent of a run: what the spec says of it and what happened to it."""

    name: str
    role: str = ""
    duties: str = ""
    capacity: str = ""
    depends_on: list[str] = field(default_factory=list)
    level: int = 0
    status: str = "pending"
    """pending, running, retrying, succeeded, failed or skipped."""
    model: str = ""
    prompt: str = ""
    output: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    started: float | None = None
    """Seconds since the run started (its ``run_start`` event)."""
    finished: float | None = None
    latency_s: float = 0.0
    attempts: int = 0
    reused: bool = False
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "role": self.role,
            "duties": self.duties,
            "capacity": self.capacity,
            "depends_on": list(self.depends_on),
            "level": self.level,
            "status": self.status,
            "model": self.model,
            "prompt": self.prompt,
            "output": self.output,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost": round(self.cost, 3),
            "started": _round(self.started),
            "finished": _round(self.finished),
            "latency_s": round(self.latency_s, 3),
            "attempts": self.attempts,
            "reused": self.reused,
            "error": self.error,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


@dataclass(frozen=True, slots=True)
class RunSummary:
    """A line of the runs list."""

    id: str
    status: str
    """running, succeeded, failed (or the service's queued / cancelled)."""
    task: str
    agents: int
    tiers: dict[str, int]
    """Agents per tier."""
    tokens: int
    cost: float
    wall_s: float | None
    when: float
    """When the run was recorded (seconds since the epoch): newest first in the list."""
    source: str
    correct: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status,
            "task": self.task,
            "agents": self.agents,
            "tiers": dict(self.tiers),
            "tokens": self.tokens,
            "cost": round(self.cost, 1),
            "wall_s": None if self.wall_s is None else round(self.wall_s, 2),
            "when": self.when,
            "source": self.source,
            "correct": self.correct,
        }

    def matches(self, *, query: str = "", status: str = "", tier: str = "") -> bool:
        """The list's filters: text in the task or source, a status, a tier in the team."""
        if status and self.status != status:
            return False
        if tier and tier not in self.tiers:
            return False
        if query:
            needle = query.lower()
            return needle in self.task.lower() or needle in self.source.lower()
        return True


def _prices(started: RunStarted | None) -> TierPrices:
    if started is not None and started.tier_prices:
        try:
            return TierPrices.from_mapping(started.tier_prices)
        except ValueError:
            pass
    return DEFAULT_TIER_PRICES


def _spec_agents(text: str) -> list[dict[str, Any]]:
    """The agents of a spec's YAML, read structurally (no role library: a run may have used
    its own roles); empty when the text is missing or unreadable."""
    if not text:
        return []
    try:
        data, _, _ = read_document(text, source="<run spec>")
    except SpecError:
        return []
    body = data.get("spec", data)
    agents = body.get("agents") if isinstance(body, dict) else None
    return [a for a in agents if isinstance(a, dict) and "name" in a] if agents else []


def _price(prices: TierPrices, tier: str, tokens: int) -> float:
    try:
        return prices.price(tier) * tokens
    except ValueError:  # a tier this version does not know
        return float(tokens)


class _Run:
    """The fold of a run's events into its agents and totals."""

    def __init__(self, events: Sequence[Event]) -> None:
        self.events = events
        self.started = next((e for e in events if isinstance(e, RunStarted)), None)
        self.finished = next((e for e in events if isinstance(e, RunFinished)), None)
        self.prices = _prices(self.started)
        self.t0 = self.started.t if self.started is not None else 0.0
        self.agents: dict[str, AgentView] = {}
        spec = self.started.spec if self.started is not None else ""
        levels = self.started.levels if self.started is not None else ()
        level_of = {name: i for i, level in enumerate(levels) for name in level}
        for raw in _spec_agents(spec):
            depends = raw.get("depends_on") or []
            name = str(raw["name"])
            self.agents[name] = AgentView(
                name=name,
                role=str(raw.get("role", "")),
                duties=str(raw.get("duties") or ""),
                capacity=str(raw.get("capacity", "")),
                depends_on=[str(d) for d in depends] if isinstance(depends, list) else [],
                level=level_of.get(name, 0),
            )
        for name, level in level_of.items():  # a trace without the spec: names and levels only
            self.agents.setdefault(name, AgentView(name=name, level=level))
        for event in events:
            self._apply(event)
        for agent in self.agents.values():
            agent.cost = _price(
                self.prices, agent.capacity, agent.prompt_tokens + agent.completion_tokens
            )

    def _agent(self, name: str) -> AgentView:
        if name not in self.agents:
            self.agents[name] = AgentView(name=name)
        return self.agents[name]

    def _apply(self, event: Event) -> None:
        if isinstance(event, AgentStarted):
            agent = self._agent(event.agent)
            agent.role = agent.role or event.role
            agent.capacity = agent.capacity or event.capacity
            agent.model, agent.prompt, agent.reused = event.model, event.prompt, event.reused
            agent.started = event.t - self.t0
            agent.status = "running"
        elif isinstance(event, AgentRetrying):
            agent = self._agent(event.agent)
            agent.status, agent.attempts, agent.error = "retrying", event.attempt, event.error
        elif isinstance(event, AgentFailed):
            agent = self._agent(event.agent)
            agent.attempts, agent.error = event.attempt, event.error
        elif isinstance(event, AgentFinished):
            agent = self._agent(event.agent)
            agent.status = event.status
            agent.prompt_tokens, agent.completion_tokens = (
                event.prompt_tokens,
                event.completion_tokens,
            )
            agent.latency_s, agent.attempts = event.latency_s, event.attempts
            agent.reused = agent.reused or event.reused
            agent.error, agent.output = event.error, event.output
            agent.finished = event.t - self.t0

    @property
    def status(self) -> str:
        return self.finished.status if self.finished is not None else "running"

    @property
    def tokens(self) -> int:
        return sum(a.prompt_tokens + a.completion_tokens for a in self.agents.values())

    @property
    def cost(self) -> float:
        return sum(a.cost for a in self.agents.values())

    @property
    def wall_s(self) -> float | None:
        if self.finished is not None:
            return self.finished.wall_s
        return None

    @property
    def verdict(self) -> RunScored | None:
        return next((e for e in self.events if isinstance(e, RunScored)), None)

    def critical_path(self) -> list[str]:
        output = self.started.output if self.started is not None else ""
        if output not in self.agents:
            return []
        path = [output]
        seen = {output}
        current = self.agents[output]
        while current.depends_on:
            deps = [self.agents[d] for d in current.depends_on if d in self.agents]
            if not deps:
                break
            timed = [d for d in deps if d.finished is not None]
            if timed:  # the dependency this agent waited for
                gate = max(timed, key=lambda d: d.finished or 0.0)
            else:  # never ran: the longest chain behind it
                gate = max(deps, key=lambda d: (d.level, d.name))
            if gate.name in seen:
                break
            path.append(gate.name)
            seen.add(gate.name)
            current = gate
        return list(reversed(path))

    def one_large(self) -> dict[str, Any]:
        readers = [
            a.prompt_tokens for a in self.agents.values() if not a.depends_on and a.prompt_tokens
        ]
        output = self.started.output if self.started is not None else ""
        answer = self.agents[output].completion_tokens if output in self.agents else 0
        prompt = min(readers) if readers else 0
        tokens = prompt + answer
        return {
            "prompt_tokens": prompt,
            "completion_tokens": answer,
            "cost": round(self.prices.price(Capacity.LARGE) * tokens, 1),
            "how": ONE_LARGE_HOW,
        }


def summarise(events: Sequence[Event], *, id: str, when: float, source: str) -> RunSummary:
    """The runs list's line for one run."""
    run = _Run(events)
    tiers: dict[str, int] = {}
    for agent in run.agents.values():
        if agent.capacity:
            tiers[agent.capacity] = tiers.get(agent.capacity, 0) + 1
    verdict = run.verdict
    return RunSummary(
        id=id,
        status=run.status,
        task=run.started.task if run.started is not None else "",
        agents=len(run.agents),
        tiers=tiers,
        tokens=run.tokens,
        cost=run.cost,
        wall_s=run.wall_s,
        when=when,
        source=source,
        correct=verdict.correct if verdict is not None else None,
    )


def _policy(events: Sequence[Event]) -> dict[str, Any]:
    attempts = [e for e in events if isinstance(e, PolicyAttempted)]
    origin = next((e.origin for e in events if isinstance(e, SpecReady)), "")
    return {
        "origin": origin,
        "fell_back": any(isinstance(e, PolicyFellBack) for e in events),
        "attempts": [
            {
                "attempt": a.attempt,
                "valid": a.valid,
                "errors": list(a.errors),
                "tokens": a.prompt_tokens + a.completion_tokens,
            }
            for a in attempts
        ],
    }


def run_view(
    events: Sequence[Event], *, id: str, source: str, status: str | None = None
) -> dict[str, Any]:
    """The run page's data (JSON-ready); ``status`` overrides the trace's (a service run that
    is queued or cancelled)."""
    run = _Run(events)
    started, finished = run.started, run.finished
    agents = list(run.agents.values())
    by_level: dict[int, list[str]] = {}
    for agent in agents:
        by_level.setdefault(agent.level, []).append(agent.name)
    levels = (
        [list(level) for level in started.levels]
        if started is not None and started.levels
        else [by_level[i] for i in sorted(by_level)]
    )
    edges = [[dep, a.name] for a in agents for dep in a.depends_on]
    verdict = run.verdict
    last_t = events[-1].t - run.t0 if events else 0.0
    return {
        "id": id,
        "source": source,
        "status": status or run.status,
        "task": started.task if started is not None else "",
        "profile": started.profile if started is not None else "",
        "policy": _policy(events),
        "spec": started.spec if started is not None else "",
        "output": started.output if started is not None else "",
        "answer": finished.answer if finished is not None else None,
        "error": finished.error if finished is not None else None,
        "budget": dict(finished.budget) if finished is not None and finished.budget else None,
        "verdict": None
        if verdict is None
        else {
            "item": verdict.item,
            "expected": verdict.expected,
            "extracted": verdict.extracted,
            "correct": verdict.correct,
        },
        "levels": levels,
        "edges": edges,
        "agents": [a.to_json() for a in agents],
        "critical_path": run.critical_path(),
        "wall_s": run.wall_s,
        "elapsed_s": round(max(last_t, 0.0), 3),
        "tokens": run.tokens,
        "cost": round(run.cost, 1),
        "tier_prices": run.prices.to_json(),
        "one_large": run.one_large(),
        "truncated": sum(e.left_out for e in events if isinstance(e, TraceTruncated)),
        "events": len(events),
        "t0": run.t0,
    }
