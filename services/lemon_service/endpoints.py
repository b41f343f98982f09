"""The tiers and the policy a ``SubmitRun`` names: OpenAI-compatible endpoints (a
``LemonCapacityProfile``'s InferenceServices, a ``LemonPolicy``'s), their backends built once per
(url, model) and shared by every run that names them.

A backend stays open while a run leases it; past ``max_idle`` idle backends the least recently
used ones are closed.

A tier without an endpoint (one the run's profile does not serve, or, for ``lemon serve
--profile-status``, one the profile's status lists no URL for) gets :class:`UnservedTier`: the
agents that need it fail, with failure kind ``tier_unavailable`` and no model call. No tier ever
borrows another tier's model: the spec's capacity decision is what ran, or the run says it could
not (a policy may write a spec on any tier).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

from lemon.backends.base import Backend, BackendError, Generation, GenerationRequest
from lemon.backends.openai import OpenAIBackend
from lemon.orchestration import RunTiers
from lemon.policy.inference import LearnedPolicy, SpecPolicy
from lemon.spec.models import Capacity
from lemon_service.status_codes import BadRequest

__all__ = [
    "RUN_TIERS",
    "Endpoint",
    "EndpointPool",
    "UnservedTier",
    "check_endpoint",
    "endpoint_tiers",
    "run_policy",
]

RUN_TIERS = "run-tiers"
"""The profile name a SubmitRun's own tiers report."""

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
    """The backend of a tier without an endpoint: every call fails at once, as the tier being
    unavailable (never retried)."""

    def __init__(self, tier: Capacity, *, where: str = "this run's capacity profile") -> None:
        self.tier = tier
        self.where = where

    @property
    def model_id(self) -> str:
        return f"unserved:{self.tier.value}"

    @property
    def label(self) -> str:
        return "no endpoint"

    async def generate(self, request: GenerationRequest) -> Generation:
        raise BackendError(
            f"tier {self.tier.value} has no endpoint in {self.where}",
            transient=False,
            unavailable=True,
        )

    async def aclose(self) -> None:
        return None


def endpoint_tiers(
    name: str,
    endpoints: Mapping[Capacity, Endpoint],
    *,
    backend: Callable[[Endpoint, Capacity], Backend],
    where: str = "this run's capacity profile",
) -> RunTiers:
    """Tiers named ``name`` on ``endpoints`` (each tier's backend from ``backend``); a tier
    without one is an :class:`UnservedTier`."""
    backends: dict[Capacity, Backend] = {
        tier: backend(endpoints[tier], tier)
        if tier in endpoints
        else UnservedTier(tier, where=where)
        for tier in Capacity
    }
    return RunTiers(name, backends)


class EndpointPool:
    """OpenAI backends by endpoint, leased by runs and closed once idle and over the bound."""

    def __init__(self, *, timeout_s: float = 120.0, max_idle: int = 64) -> None:
        self.timeout_s = timeout_s
        self.max_idle = max_idle
        self._backends: OrderedDict[Endpoint, OpenAIBackend] = OrderedDict()
        self._leases: dict[Endpoint, int] = {}

    def _backend(self, endpoint: Endpoint, *, tier: Capacity | str) -> OpenAIBackend:
        backend = self._backends.get(endpoint)
        if backend is None:
            backend = OpenAIBackend(
                endpoint.url, model=endpoint.model, timeout_s=self.timeout_s, tier=str(tier)
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
    ) -> AsyncIterator[tuple[RunTiers, Backend | None]]:
        """The run's tiers (and its policy's backend) for as long as the run lasts."""
        held = [*tiers.values(), *([policy] if policy is not None else [])]
        for endpoint in held:
            self._leases[endpoint] = self._leases.get(endpoint, 0) + 1
        try:
            run_tiers = endpoint_tiers(
                RUN_TIERS, tiers, backend=lambda endpoint, tier: self._backend(endpoint, tier=tier)
            )
            writer = None if policy is None else self._backend(policy, tier="policy")
            yield run_tiers, writer
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
