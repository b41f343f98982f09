"""Which policy writes a task's spec: one resolution order for every door a task comes in by.

``lemon run``, the gRPC service (Orchestrate, StreamOrchestrate, SubmitRun) and a ``LemonRun``
all decide the same way, here:

1. the spec the request gives (``--spec``, ExecuteSpec, a LemonRun's ``spec``/``specRef``);
2. else the policy it names (``--policy``, ``--baseline template``, a LemonRun's
   ``policyRef``);
3. else the default policy of where it arrived: a namespace's default ``LemonPolicy``, or the
   server's (``lemon serve --policy``);
4. else LEMON's built-in default, :data:`BUILTIN_DEFAULT`: the best fixed team for the task's
   kind read from the outcome tables (:class:`lemon.policy.fixed.BestTeamPolicy`), until a
   learned policy beats it on the test tables.

:func:`resolve_policy` is steps 2 to 4 (step 1 needs no policy); the policy it returns says
which step chose it (:func:`spec_choice`), and a default policy names itself in the spec's
origin (``<via>: <the policy's own origin>``), so every result says where its spec came from:
``spec_origin`` in ``lemon run --json`` and the RPC's response, ``status.specOrigin`` on a
LemonRun, with the step as :class:`SpecChoice`.

The policies that ship with LEMON are named in :data:`BUILTIN_POLICIES`; a ``LemonPolicy``
version whose checkpoint is ``lemon://<name>`` serves one of them (the orchestration service
runs it itself, no model server), which is how a namespace's default can be LEMON's own.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from lemon.events import TraceWriter
from lemon.policy.inference import PolicyDecision, SpecPolicy
from lemon.spec.roles import RoleLibrary
from lemon.tasks import TaskKind

__all__ = [
    "BUILTIN_DEFAULT",
    "BUILTIN_POLICIES",
    "BUILTIN_SCHEME",
    "ChosenPolicy",
    "SpecChoice",
    "UnknownPolicy",
    "builtin_default",
    "builtin_name",
    "builtin_policy",
    "resolve_policy",
    "spec_choice",
]


class SpecChoice(StrEnum):
    """Which step of the resolution order chose a run's spec."""

    SPEC = "spec"
    """The request gave the spec."""
    POLICY = "policy"
    """The request named the policy that wrote it."""
    DEFAULT_POLICY = "default-policy"
    """The namespace's (or the server's) default policy wrote it."""
    BUILTIN_DEFAULT = "builtin-default"
    """LEMON's built-in default policy wrote it (nothing else was given or configured)."""


class UnknownPolicy(ValueError):
    """A built-in policy name LEMON does not ship."""


def _best_fixed_team() -> SpecPolicy:
    from lemon.policy.fixed import BestTeamPolicy

    return BestTeamPolicy()


def _learned() -> SpecPolicy:
    from lemon.policy.inference import load_policy

    policy = load_policy("learned")
    policy.fallback = _best_fixed_team()  # an invalid spec falls back to the default's team
    return policy


BUILTIN_POLICIES: dict[str, Callable[[], SpecPolicy]] = {
    "best-fixed-team": _best_fixed_team,
    "learned": _learned,
}
"""The policies that ship with LEMON, by name: ``best-fixed-team`` (:mod:`lemon.policy.fixed`;
no model) and ``learned`` (:mod:`lemon.policy.shipped`: the pinned adapter, run in-process on
llama.cpp, exported once to GGUF; :func:`lemon.policy.inference.load_policy`)."""

BUILTIN_DEFAULT = "best-fixed-team"
"""The built-in default: the best fixed team per task kind. It becomes ``learned`` when a
learned policy beats the fixed teams on the test tables (the mixed-policy issue)."""

BUILTIN_SCHEME = "lemon://"
"""A ``LemonPolicy`` version's checkpoint ``lemon://<name>`` names a built-in policy."""


def builtin_policy(name: str) -> SpecPolicy:
    """A new instance of the built-in policy ``name`` (raises :class:`UnknownPolicy`)."""
    make = BUILTIN_POLICIES.get(name)
    if make is None:
        known = ", ".join(BUILTIN_POLICIES)
        raise UnknownPolicy(f"no built-in policy {name!r} (LEMON ships: {known})")
    return make()


def builtin_name(checkpoint: str) -> str | None:
    """The built-in policy a checkpoint URI names (``lemon://learned``: ``learned``), or None
    for any other URI."""
    if not checkpoint.startswith(BUILTIN_SCHEME):
        return None
    return checkpoint[len(BUILTIN_SCHEME) :]


class ChosenPolicy:
    """A policy chosen by default (step 3 or 4): it writes what ``policy`` writes, and the
    spec's origin names the default first (``via``) when the default is not LEMON's own."""

    def __init__(self, policy: SpecPolicy, *, choice: SpecChoice, via: str = "") -> None:
        self.policy = policy
        self.choice = choice
        self.via = via

    @property
    def label(self) -> str:
        return f"{self.via}: {self.policy.label}" if self.via else self.policy.label

    async def write_spec(
        self,
        task: str,
        *,
        kind: TaskKind | None = None,
        roles: RoleLibrary | None = None,
        trace: TraceWriter | None = None,
    ) -> PolicyDecision:
        decision = await self.policy.write_spec(task, kind=kind, roles=roles, trace=trace)
        if self.via:
            decision.origin = f"{self.via}: {decision.origin}"
        return decision

    async def aclose(self) -> None:
        await self.policy.aclose()


def builtin_default() -> ChosenPolicy:
    """LEMON's built-in default policy (step 4)."""
    return ChosenPolicy(builtin_policy(BUILTIN_DEFAULT), choice=SpecChoice.BUILTIN_DEFAULT)


def resolve_policy(
    *, policy: SpecPolicy | None = None, default: SpecPolicy | None = None, via: str = ""
) -> SpecPolicy:
    """Steps 2 to 4: the ``policy`` the request named; else ``default``, the namespace's or
    server's default (``via`` names it in the origin, e.g. ``"default LemonPolicy
    team/lemon-default@best-fixed-team"``); else :func:`builtin_default`."""
    if policy is not None:
        return policy
    if default is not None:
        if isinstance(default, ChosenPolicy):
            return default
        return ChosenPolicy(default, choice=SpecChoice.DEFAULT_POLICY, via=via)
    return builtin_default()


def spec_choice(policy: SpecPolicy | None) -> SpecChoice:
    """The step that chose a spec written by ``policy`` (None: the request gave the spec)."""
    if policy is None:
        return SpecChoice.SPEC
    if isinstance(policy, ChosenPolicy):
        return policy.choice
    return SpecChoice.POLICY
