"""The tiers and the policy a ``SubmitRun`` names: OpenAI-compatible endpoints (a
``LemonCapacityProfile``'s InferenceServices, a ``LemonPolicy``'s), their backends built once per
(url, model) and shared by every run that names them.

A backend stays open while a run leases it; past ``max_idle`` idle backends the least recently
used ones are closed. A tier a run's profile lacks gets :class:`UnservedTier`, which fails the
agents that need it with that reason (a policy may write a spec on any tier).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from lemon.backends.base import Backend, BackendError, Generation, GenerationRequest
from lemon.backends.openai import OpenAIBackend
from lemon.capacity import CapacityProfile, TierBackend
from lemon.policy.inference import LearnedPolicy, SpecPolicy
from lemon.spec.models import Capacity
from lemon_service.status_codes import BadRequest

__all__ = [
    "Endpoint",
    "EndpointPool",
    "RunTiers",
    "UnservedTier",
    "check_endpoint",
    "run_policy",
    "tier_endpoints",
]

_URL = re.compile(r"^https?://[^\s/]+(/\S*)?$")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One OpenAI-compatible endpoint: a base URL (…/v1) and the model name it serves."""

    url: str
    model: str


def check_endpoint(url: str, model: str, *, field: str) -> Endpoint:
    """A request's endpoint, or ``BadRequest`` naming the field."""
    if not _URL.match(url) or len(url) > 2048:
        raise BadRequest(f"{field}.url: {url!r} is not an http(s) URL")
    if not model or len(model) > 256 or any(c.isspace() for c in model):
        raise BadRequest(f"{field}.model: {model!r} is not a model name")
    return Endpoint(url.rstrip("/"), model)


class UnservedTier:
    """The backend of a tier the run's capacity profile does not have: every call fails."""

    def __init__(self, tier: Capacity) -> None:
        self.tier = tier

    @property
    def model_id(self) -> str:
        return f"unserved:{self.tier.value}"

    @property
    def label(self) -> str:
        return "no endpoint"

    async def generate(self, request: GenerationRequest) -> Generation:
        raise BackendError(
            f"tier {self.tier.value} has no endpoint in this run's capacity profile",
            transient=False,
        )

    async def aclose(self) -> None:
        return None


@dataclass(frozen=True, slots=True)
class RunTiers:
    """A run's capacity profile (names and labels) and one backend per tier."""

    profile: CapacityProfile
    backends: Mapping[Capacity, Backend]


class EndpointPool:
    """OpenAI backends by endpoint, leased by runs and closed once idle and over the bound."""

    def __init__(self, *, timeout_s: float = 120.0, max_idle: int = 64) -> None:
        self.timeout_s = timeout_s
        self.max_idle = max_idle
        self._backends: OrderedDict[Endpoint, OpenAIBackend] = OrderedDict()
        self._leases: dict[Endpoint, int] = {}

    def _backend(self, endpoint: Endpoint, *, tier: str) -> OpenAIBackend:
        backend = self._backends.get(endpoint)
        if backend is None:
            backend = OpenAIBackend(
                endpoint.url, model=endpoint.model, timeout_s=self.timeout_s, tier=tier
            )
            self._backends[endpoint] = backend
        self._backends.move_to_end(endpoint)
        return backend

    @asynccontextmanager
    async def lease(
        self,
        tiers: Mapping[Capacity, Endpoint],
        *,
        policy: Endpoint | None = None,
        name: str = "run",
    ) -> AsyncIterator[tuple[RunTiers, Backend | None]]:
        """The run's tiers (and its policy's backend) for as long as the run lasts."""
        held = [*tiers.values(), *([policy] if policy is not None else [])]
        for endpoint in held:
            self._leases[endpoint] = self._leases.get(endpoint, 0) + 1
        try:
            backends: dict[Capacity, Backend] = {}
            configs: dict[Capacity, TierBackend] = {}
            for tier in Capacity:
                served = tiers.get(tier)
                if served is None:
                    backends[tier] = UnservedTier(tier)
                    continue
                backends[tier] = self._backend(served, tier=tier.value)
                configs[tier] = TierBackend(type="openai", url=served.url, model=served.model)
            unserved = [tier.value for tier in Capacity if tier not in tiers]
            note = f"; no endpoint for {', '.join(unserved)}" if unserved else ""
            profile = CapacityProfile.model_construct(  # a tier may have no endpoint
                name="run-tiers",
                description=f"the tiers of {name}{note}",
                tiers=configs,
            )
            writer = None if policy is None else self._backend(policy, tier="policy")
            yield RunTiers(profile, backends), writer
        finally:
            for endpoint in held:
                self._leases[endpoint] -= 1
                if not self._leases[endpoint]:
                    del self._leases[endpoint]
            await self._close_idle()

    async def _close_idle(self) -> None:
        idle = [endpoint for endpoint in self._backends if endpoint not in self._leases]
        for endpoint in idle[: max(0, len(idle) - self.max_idle)]:  # least recently used first
            await self._backends.pop(endpoint).aclose()

    async def aclose(self) -> None:
        backends = list(self._backends.values())
        self._backends.clear()
        for backend in backends:
            await backend.aclose()


def run_policy(backend: Backend, *, name: str, attempts: int = 2) -> SpecPolicy:
    """The learned policy of one run, on a pooled backend (never closed by the run)."""
    return LearnedPolicy(backend, name=name, max_attempts=attempts)


def tier_endpoints(
    entries: Sequence[tuple[str, str, str]], *, field: str = "tiers"
) -> dict[Capacity, Endpoint]:
    """A request's ``(tier, url, model)`` entries, checked: known tiers, each at most once."""
    found: dict[Capacity, Endpoint] = {}
    for index, (tier, url, model) in enumerate(entries):
        where = f"{field}[{index}]"
        if tier not in set(Capacity):
            raise BadRequest(f"{where}.tier: {tier!r} is not small, medium or large")
        if Capacity(tier) in found:
            raise BadRequest(f"{where}.tier: {tier} is given twice")
        found[Capacity(tier)] = check_endpoint(url, model, field=where)
    return found
