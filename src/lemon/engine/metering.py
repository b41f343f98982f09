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
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass

from lemon.budget import Budget
from lemon.pricing import TierPrices

__all__ = ["Grant", "Meter"]


@dataclass(slots=True)
class Grant:
    """A held reservation: the call may use ``max_tokens`` completion tokens."""

    tier: str
    prompt_tokens: int
    max_tokens: int
    cut: bool
    """``max_tokens`` is below what the agent asked for: the budget cut it."""
    settled: bool = False

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.max_tokens


class Meter:
    """Spent and held tokens and cost of one run under ``budget`` (see the module)."""

    def __init__(self, budget: Budget, prices: TierPrices) -> None:
        self.budget = budget
        self.prices = prices
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

    def _left(self, tier: str) -> float:
        """Tokens of ``tier`` the budget has left after what is spent and held."""
        left = math.inf
        if self.budget.tokens is not None:
            left = self.budget.tokens - self.spent_tokens - self.held_tokens
        price = self.prices.price(tier)
        if self.budget.cost is not None and price > 0:
            left = min(left, (self.budget.cost - self.spent_cost - self.held_cost) / price)
        return left

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
            if allowed >= wanted or self.in_flight == 0:
                break
            await self._wait_settled()
        if allowed < 1:
            return None
        grant = Grant(tier, prompt_tokens, allowed, cut=allowed < wanted)
        self.held_tokens += grant.tokens
        self.held_cost += grant.tokens * self.prices.price(tier)
        self.in_flight += 1
        return grant

    def settle(self, grant: Grant, *, prompt_tokens: int = 0, completion_tokens: int = 0) -> None:
        """Release ``grant`` and charge what its call spent (0 for a call that failed or was
        cancelled before answering: its tokens are unknown, as in the run's result)."""
        if grant.settled:
            return
        grant.settled = True
        self.held_tokens -= grant.tokens
        self.held_cost -= grant.tokens * self.prices.price(grant.tier)
        self.in_flight -= 1
        self.charge(grant.tier, prompt_tokens + completion_tokens)
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

    def exceeded(self) -> bool:
        """Whether what was spent is over a limit (only a tier that overspent gets here)."""
        budget = self.budget
        return (budget.tokens is not None and self.spent_tokens > budget.tokens) or (
            budget.cost is not None and self.spent_cost > budget.cost + 1e-9
        )

    def stop(self, reason: str) -> None:
        """Record the first reason the budget stopped or cut an agent."""
        if self.stopped is None:
            self.stopped = reason

    def spent_words(self) -> str:
        """What was spent against the limits, with units."""
        parts = []
        if self.budget.tokens is not None:
            parts.append(f"{self.spent_tokens} of {self.budget.tokens} worker tokens")
        if self.budget.cost is not None:
            parts.append(f"{self.spent_cost:.1f} of {self.budget.cost:g} tier-priced tokens")
        return ", ".join(parts) + " spent" if parts else "no token limit"

    async def _wait_settled(self) -> None:
        await self._settled.wait()
