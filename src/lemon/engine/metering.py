"""A run's budget, kept exact while its agents run at once: reserve before a call, settle after.

Before an agent's model call, :meth:`Meter.reserve` holds what the call can spend at most: its
prompt's tokens (the backend's own count where it has ``count_prompt_tokens``, else
:func:`lemon.budget.prompt_bound`) plus its completion's ``max_tokens``, cut to what the budget
has left after what was spent and what the calls in flight hold. When less is left than the
agent asks for and other calls are in flight, it waits for them to settle (they usually spend
less than they held) and looks again; once nothing else is in flight, it takes what is left, or,
when not one completion token is left, is refused: the agent never starts. :meth:`Meter.settle`
charges what the call spent (the backend's counts) and releases the rest of the hold.

Every check and update happens between two awaits on the run's one event loop, so concurrent
agents cannot both take the same tokens: the sum of what is spent and held never exceeds the
budget. A tier that spends more than it was allowed (a server that ignores ``max_tokens``, a
tokenizer longer than the bound) is charged what it reports, and :attr:`Meter.overrun` says so;
the run then fails for its budget.

A :class:`SharedBudget` is a budget several runs draw from (a namespace's, per time window):
each run's meter reserves from it too, on the same terms, so runs executing at once on one
event loop (the orchestration service's) can never together spend past it. A meter may have a
run budget, a shared budget, or both; the tighter one cuts, and :attr:`Meter.bound_by` says
which.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from lemon.budget import Budget, BudgetScope
from lemon.pricing import TierPrices

__all__ = ["BudgetScope", "Grant", "Meter", "SharedBudget"]


class SharedBudget:
    """Worker tokens and/or tier-priced cost several runs draw from, per fixed time window
    (windows start at multiples of ``window_s`` since the epoch; what was spent is forgotten
    when the next one starts, what is held stays held). ``name`` says whose it is in
    messages (``LemonBudget team/tenant-a``)."""

    def __init__(
        self,
        name: str,
        *,
        tokens: int | None = None,
        cost: float | None = None,
        window_s: float = 3600.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if tokens is None and cost is None:
            raise ValueError(f"shared budget {name}: give tokens, cost or both")
        if window_s <= 0:
            raise ValueError(f"shared budget {name}: window_s must be positive")
        self.name = name
        self.tokens = tokens
        self.cost = cost
        self.window_s = window_s
        self._clock = clock
        self.window_start = self._window(clock())
        self.spent_tokens = 0
        self.spent_cost = 0.0
        self.held_tokens = 0
        self.held_cost = 0.0
        self.in_flight = 0
        self.runs = 0
        """Runs that drew from it (in this window)."""
        self.stopped = 0
        """Runs it stopped or cut (in this window)."""
        self._settled = asyncio.Event()

    def _window(self, now: float) -> float:
        return math.floor(now / self.window_s) * self.window_s

    def roll(self) -> None:
        """Start a new window when the clock passed into one (spent, runs, stopped to 0)."""
        start = self._window(self._clock())
        if start > self.window_start:
            self.window_start = start
            self.spent_tokens, self.spent_cost = 0, 0.0
            self.runs = self.stopped = 0

    def update(self, *, tokens: int | None, cost: float | None, window_s: float) -> None:
        """New limits (the resource was edited); a changed window starts afresh."""
        if tokens is None and cost is None:
            raise ValueError(f"shared budget {self.name}: give tokens, cost or both")
        self.tokens, self.cost = tokens, cost
        if window_s != self.window_s:
            self.window_s = window_s
            self.window_start = -math.inf
        self.roll()

    def left(self, price: float) -> float:
        """Tokens at ``price`` it has left after what is spent and held (this window)."""
        self.roll()
        left = math.inf
        if self.tokens is not None:
            left = self.tokens - self.spent_tokens - self.held_tokens
        if self.cost is not None and price > 0:
            left = min(left, (self.cost - self.spent_cost - self.held_cost) / price)
        return left

    def remaining(self) -> tuple[int | None, float | None]:
        """What the window has left to spend (None for an unlimited field), at least 0."""
        self.roll()
        tokens = None if self.tokens is None else max(0, self.tokens - self.spent_tokens)
        cost = None if self.cost is None else max(0.0, self.cost - self.spent_cost)
        return tokens, cost

    def hold(self, tokens: int, cost: float) -> None:
        self.held_tokens += tokens
        self.held_cost += cost
        self.in_flight += 1

    def release(self, tokens: int, cost: float) -> None:
        self.held_tokens -= tokens
        self.held_cost -= cost
        self.in_flight -= 1
        event, self._settled = self._settled, asyncio.Event()
        event.set()

    def charge(self, tokens: int, cost: float) -> None:
        self.roll()
        self.spent_tokens += tokens
        self.spent_cost += cost

    def label(self) -> str:
        """``LemonBudget team/a (tokens=5000 per 3600 s)``."""
        parts = []
        if self.tokens is not None:
            parts.append(f"tokens={self.tokens}")
        if self.cost is not None:
            parts.append(f"cost={self.cost:g}")
        return f"{self.name} ({','.join(parts)} per {self.window_s:g} s)"

    def spent_words(self) -> str:
        parts = []
        if self.tokens is not None:
            parts.append(f"{self.spent_tokens} of {self.tokens} worker tokens")
        if self.cost is not None:
            parts.append(f"{self.spent_cost:.1f} of {self.cost:g} tier-priced tokens")
        return ", ".join(parts) + " spent this window"

    async def wait_settled(self) -> None:
        await self._settled.wait()


@dataclass(slots=True)
class Grant:
    """A held reservation: the call may use ``max_tokens`` completion tokens."""

    tier: str
    prompt_tokens: int
    max_tokens: int
    cut: bool
    """``max_tokens`` is below what the agent asked for: the budget cut it."""
    scope: BudgetScope = "run"
    """Which budget left the least when it was granted (the one that cut it, if it was)."""
    settled: bool = False

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.max_tokens


class Meter:
    """Spent and held tokens and cost of one run under ``budget`` and/or ``shared`` (see the
    module)."""

    def __init__(
        self, budget: Budget | None, prices: TierPrices, *, shared: SharedBudget | None = None
    ) -> None:
        if budget is None and shared is None:
            raise ValueError("a meter needs a budget, a shared budget or both")
        self.budget = budget
        self.shared = shared
        self.prices = prices
        self.bound_by: BudgetScope | None = None
        """Which budget stopped or cut an agent first (None while neither has)."""
        if shared is not None:
            shared.roll()
            shared.runs += 1
        self.spent_tokens = 0
        self.spent_cost = 0.0
        self.held_tokens = 0
        self.held_cost = 0.0
        self.in_flight = 0
        self.overrun: str | None = None
        """Set when a call spent more than its reservation took the budget past its limit."""
        self.stopped: str | None = None
        """The first reason the budget stopped or cut an agent (None while it has not)."""
        self._settled = asyncio.Event()

    def _own_left(self, tier: str) -> float:
        left = math.inf
        budget = self.budget
        if budget is None:
            return left
        if budget.tokens is not None:
            left = budget.tokens - self.spent_tokens - self.held_tokens
        price = self.prices.price(tier)
        if budget.cost is not None and price > 0:
            left = min(left, (budget.cost - self.spent_cost - self.held_cost) / price)
        return left

    def _left(self, tier: str) -> float:
        """Tokens of ``tier`` the budgets have left after what is spent and held."""
        left = self._own_left(tier)
        if self.shared is not None:
            left = min(left, self.shared.left(self.prices.price(tier)))
        return left

    def binding(self, tier: str) -> BudgetScope:
        """Which budget leaves less for a call on ``tier`` now."""
        if self.shared is not None and self.shared.left(self.prices.price(tier)) < self._own_left(
            tier
        ):
            return "shared"
        return "run"

    def label(self, scope: BudgetScope) -> str:
        """How messages name the budget of ``scope``."""
        if scope == "shared" and self.shared is not None:
            return f"namespace budget {self.shared.label()}"
        return self.budget.label() if self.budget is not None else "budget"

    def allowance(self, tier: str, prompt_tokens: int, wanted: int) -> int:
        """The most completion tokens a call on ``tier`` with ``prompt_tokens`` may have now
        (at most ``wanted``; below 1 when the prompt alone does not fit)."""
        left = self._left(tier)
        if math.isinf(left):
            return wanted
        return min(wanted, math.floor(left + 1e-9) - prompt_tokens)

    def fits(self, tier: str, tokens: int) -> bool:
        """Whether ``tokens`` on ``tier`` fit in what is left (an answer reused from the
        run's cache: its cost is known exactly)."""
        return self._left(tier) + 1e-9 >= tokens

    async def reserve(self, tier: str, *, prompt_tokens: int, wanted: int) -> Grant | None:
        """Hold a call's tokens (see the module); None when not one completion token fits."""
        while True:
            allowed = self.allowance(tier, prompt_tokens, wanted)
            in_flight = self.shared.in_flight if self.shared is not None else self.in_flight
            if allowed >= wanted or in_flight == 0:
                break
            await self._wait_settled()
        if allowed < 1:
            return None
        grant = Grant(tier, prompt_tokens, allowed, cut=allowed < wanted, scope=self.binding(tier))
        cost = grant.tokens * self.prices.price(tier)
        self.held_tokens += grant.tokens
        self.held_cost += cost
        self.in_flight += 1
        if self.shared is not None:
            self.shared.hold(grant.tokens, cost)
        return grant

    def settle(self, grant: Grant, *, prompt_tokens: int = 0, completion_tokens: int = 0) -> None:
        """Release ``grant`` and charge what its call spent (0 for a call that failed or was
        cancelled before answering: its tokens are unknown, as in the run's result)."""
        if grant.settled:
            return
        grant.settled = True
        cost = grant.tokens * self.prices.price(grant.tier)
        self.held_tokens -= grant.tokens
        self.held_cost -= cost
        self.in_flight -= 1
        self.charge(grant.tier, prompt_tokens + completion_tokens)
        if self.shared is not None:
            self.shared.release(grant.tokens, cost)
        if prompt_tokens + completion_tokens > grant.tokens and self.exceeded():
            self.overrun = (
                f"the {grant.tier} tier spent {prompt_tokens + completion_tokens} tokens where "
                f"{grant.tokens} were reserved ({grant.prompt_tokens} prompt, at most "
                f"{grant.max_tokens} completion)"
            )
        event, self._settled = self._settled, asyncio.Event()
        event.set()

    def charge(self, tier: str, tokens: int) -> None:
        """Count ``tokens`` on ``tier`` as spent (a settled call, or a reused answer)."""
        self.spent_tokens += tokens
        self.spent_cost += tokens * self.prices.price(tier)
        if self.shared is not None:
            self.shared.charge(tokens, tokens * self.prices.price(tier))

    def exceeded(self) -> bool:
        """Whether what was spent is over a limit (only a tier that overspent gets here)."""
        budget, shared = self.budget, self.shared
        if budget is not None and (
            (budget.tokens is not None and self.spent_tokens > budget.tokens)
            or (budget.cost is not None and self.spent_cost > budget.cost + 1e-9)
        ):
            return True
        return shared is not None and (
            (shared.tokens is not None and shared.spent_tokens > shared.tokens)
            or (shared.cost is not None and shared.spent_cost > shared.cost + 1e-9)
        )

    def stop(self, reason: str, *, scope: BudgetScope = "run") -> None:
        """Record the first reason (and budget) that stopped or cut an agent."""
        if self.stopped is None:
            self.stopped = reason
            self.bound_by = scope
            if scope == "shared" and self.shared is not None:
                self.shared.stopped += 1

    def spent_words(self) -> str:
        """What was spent against the limits, with units."""
        parts = []
        budget = self.budget
        if budget is not None and budget.tokens is not None:
            parts.append(f"{self.spent_tokens} of {budget.tokens} worker tokens")
        if budget is not None and budget.cost is not None:
            parts.append(f"{self.spent_cost:.1f} of {budget.cost:g} tier-priced tokens")
        words = ", ".join(parts) + " spent" if parts else "no token limit of its own"
        if self.shared is not None:
            words += f"; the namespace's {self.shared.spent_words()}"
        return words

    async def _wait_settled(self) -> None:
        if self.shared is not None:  # every run's settle settles the shared budget too
            await self.shared.wait_settled()
        else:
            await self._settled.wait()
