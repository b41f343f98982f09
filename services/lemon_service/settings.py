"""The server's settings (``lemon serve`` flags) and where its capacity profile comes from.

A profile is either named (built-in or from ``--profiles`` files, as ``lemon run`` resolves it)
or read from a ``LemonCapacityProfile`` resource with its ``status`` (``kubectl get
lemoncapacityprofile NAME -o json``, or the operator's status mounted into the pod): then each
tier runs on the ``openai`` backend at the URL the operator published for it, and a tier the
status lists no URL for has no endpoint (its agents fail, as for any tier a run's profile does
not serve: :mod:`lemon_service.endpoints`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lemon.backends.base import Backend
from lemon.backends.openai import OpenAIBackend
from lemon.budget import WORKER_MAX_TOKENS
from lemon.capacity import CapacityProfile, build_backends, resolve_profile
from lemon.orchestration import RunTiers
from lemon.resources.lemon_run import tier_endpoint
from lemon.resources.status import TierStatus
from lemon.spec.issues import SpecError
from lemon.spec.models import Capacity
from lemon_service.endpoints import Endpoint, endpoint_tiers

__all__ = [
    "EVENT_LOOPS",
    "Limits",
    "ServerConfig",
    "SettingsError",
    "StatusProfile",
    "TlsFiles",
    "profile_from_status",
]

DEFAULT_PORT = 50051
EVENT_LOOPS = ("auto", "uvloop", "asyncio")
"""``lemon serve --event-loop``: auto is uvloop where it is installed, else asyncio's own."""


class SettingsError(ValueError):
    """A server setting is unusable; the message names the flag or file."""


class Limits(BaseModel):
    """What one server accepts: bounded, never an unbounded queue."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_concurrency: Annotated[int, Field(ge=1, le=4096)] = 64
    """Runs executing at once."""
    max_waiting: Annotated[int, Field(ge=0, le=65536)] = 64
    """Runs admitted but waiting for a slot; beyond running + waiting: RESOURCE_EXHAUSTED."""
    max_message_bytes: Annotated[int, Field(ge=1024, le=64 << 20)] = 4 << 20
    """Largest request or response message (gRPC rejects bigger ones: RESOURCE_EXHAUSTED)."""
    max_task_chars: Annotated[int, Field(ge=1, le=1 << 20)] = 32_000
    max_run_s: Annotated[float, Field(gt=0)] = 900.0
    """A run's budget when the call has no (or a later) deadline."""
    max_tokens: Annotated[int, Field(ge=1, le=1 << 16)] = WORKER_MAX_TOKENS
    """Default completion tokens per agent (LEMON's one default, the outcome tables' budget);
    requests may ask for at most this many."""
    max_attempts: Annotated[int, Field(ge=1, le=16)] = 4
    """Engine attempts per model call (transient errors are retried with backoff)."""
    call_timeout_s: Annotated[float, Field(gt=0, le=86_400)] = 120.0
    """The longest one call to a tier endpoint may take to answer (its HTTP read timeout);
    past it the attempt fails and is retried. CPU tiers on a small machine need more
    (``lemon cluster`` serves with 600)."""
    run_retention_s: Annotated[float, Field(gt=0)] = 3600.0
    """How long a finished SubmitRun run is kept for GetRun."""
    max_runs: Annotated[int, Field(ge=1, le=1 << 20)] = 4096
    """Runs held by id, finished ones included (the oldest finished go first)."""


class TlsFiles(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cert: Path
    key: Path
    client_ca: Path | None = None
    """When set, clients must present a certificate signed by it (mTLS)."""

    def read(self) -> tuple[bytes, bytes, bytes | None]:
        try:
            return (
                self.key.read_bytes(),
                self.cert.read_bytes(),
                self.client_ca.read_bytes() if self.client_ca is not None else None,
            )
        except OSError as exc:
            raise SettingsError(f"cannot read TLS file {exc.filename}: {exc.strerror}") from None


class ServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = DEFAULT_PORT
    profile: str = "embedded"
    profiles: tuple[Path, ...] = ()
    profile_status: Path | None = None
    """A LemonCapacityProfile resource with status; overrides ``profile``."""
    token: str | None = Field(default=None, repr=False)
    tls: TlsFiles | None = None
    limits: Limits = Limits()
    metrics_port: Annotated[int, Field(ge=0, le=65535)] | None = None
    """Serve Prometheus metrics (``GET /metrics``) on this port of ``host``; None: off."""
    run_journal: Path | None = None
    """SubmitRun's runs on disk (:mod:`lemon_service.run_journal`), read back at start so a
    restarted server answers them and runs none twice; None: runs live in memory only."""

    @model_validator(mode="after")
    def _token_shape(self) -> ServerConfig:
        if self.token is not None and (not self.token or any(c.isspace() for c in self.token)):
            raise ValueError("the bearer token must be non-empty and contain no whitespace")
        return self

    def run_tiers(self) -> RunTiers:
        """The server's tiers, their backends built (the caller closes them)."""
        if self.profile_status is not None:
            return profile_from_status(self.profile_status).run_tiers(
                timeout_s=self.limits.call_timeout_s
            )
        profile = self.capacity_profile()
        return RunTiers.of(profile, build_backends(profile))

    def capacity_profile(self) -> CapacityProfile:
        """The named profile (``--profile``, from the built-ins or ``--profiles`` files)."""
        try:
            return resolve_profile(self.profile, files=self.profiles)
        except KeyError as exc:
            raise SettingsError(str(exc.args[0])) from None
        except OSError as exc:
            raise SettingsError(f"cannot read profile file: {exc}") from None
        except SpecError as exc:
            raise SettingsError(f"invalid profile file:\n{exc.render()}") from None


def read_token(path: Path) -> str:
    """The bearer token in ``path`` (surrounding whitespace stripped)."""
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise SettingsError(f"cannot read token file {path}: {exc.strerror}") from None
    if not token:
        raise SettingsError(f"token file {path} is empty")
    return token


@dataclass(frozen=True, slots=True)
class StatusProfile:
    """A ``LemonCapacityProfile``'s tiers as its status lists them: the endpoint of each tier
    with a URL (a tier without one has none)."""

    name: str
    endpoints: Mapping[Capacity, Endpoint]

    def run_tiers(self, *, timeout_s: float = 120.0) -> RunTiers:
        """An ``openai`` backend per endpoint; a tier without one fails the agents that need it."""

        def backend(endpoint: Endpoint, tier: Capacity) -> Backend:
            return OpenAIBackend(
                endpoint.url, model=endpoint.model, timeout_s=timeout_s, tier=tier.value
            )

        where = f"LemonCapacityProfile {self.name}'s status"
        return endpoint_tiers(self.name, self.endpoints, backend=backend, where=where)


def profile_from_status(path: Path) -> StatusProfile:
    """The OpenAI endpoints a ``LemonCapacityProfile``'s status lists, by tier.

    KServe's huggingface runtime serves the OpenAI API under ``/openai/v1``, the model under
    the name the operator starts it with (the tier's: :func:`lemon.resources.lemon_run.
    tier_endpoint`). A tier without a URL (not in the profile, or not up yet) has no endpoint.
    """
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SettingsError(f"cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise SettingsError(f"{path}: not YAML or JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("kind") != "LemonCapacityProfile":
        raise SettingsError(f"{path}: not a LemonCapacityProfile resource")
    name = str((data.get("metadata") or {}).get("name") or "cluster")
    status = data.get("status") or {}
    try:
        tiers = [TierStatus.model_validate(t) for t in status.get("tiers") or []]
    except ValidationError as exc:
        raise SettingsError(f"{path}: status.tiers: {json.dumps(exc.errors()[0]['msg'])}") from None
    endpoints = {
        found.tier: Endpoint(found.url, found.model)
        for found in (tier_endpoint(t) for t in tiers)
        if found is not None
    }
    if not endpoints:
        raise SettingsError(f"{path}: status lists no tier with a URL yet (is the profile Ready?)")
    return StatusProfile(name, endpoints)
