"""Policy inference: a policy writes the spec for a task.

Two policies share one interface (:class:`SpecPolicy`):

- :class:`TemplatePolicy`, the documented stand-in (:mod:`lemon.policy.template`);
- :class:`LearnedPolicy`, a causal LM behind any backend (an in-process policy version, or an
  OpenAI-compatible endpoint serving one). Its completion is parsed and validated; an invalid
  spec is retried with the located errors in the conversation (at most ``max_attempts`` in all),
  then the template policy's spec is used. Every attempt is recorded in the run's trace
  (``policy_attempt`` events) and in the returned :class:`PolicyDecision`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from lemon.backends.base import Backend, BackendError, Decoding, GenerationRequest, Message
from lemon.events import PolicyAttempted, PolicyFellBack, TraceWriter
from lemon.policy.prompt import (
    COST_PROMPT_FORMAT,
    PROMPT_FORMAT,
    policy_messages,
    repair_messages,
)
from lemon.policy.template import TemplateVariant
from lemon.spec.formatting import format_spec
from lemon.spec.grammar import GrammarLimits, SpecGrammar
from lemon.spec.issues import SpecError
from lemon.spec.models import Spec
from lemon.spec.roles import RoleLibrary
from lemon.spec.validation import ParsedSpec, ValidationOptions, parse_spec
from lemon.tasks import TaskKind, classify_task

if TYPE_CHECKING:
    from lemon.backends.openai import GrammarDialect

__all__ = [
    "ENGINES",
    "LearnedPolicy",
    "PolicyAttempt",
    "PolicyDecision",
    "PolicyEngine",
    "SpecPolicy",
    "TemplatePolicy",
    "extract_spec_text",
    "load_policy",
    "spec_region",
]

DEFAULT_DECODING = Decoding(max_tokens=384, temperature=0.0, stop=("\n\n",))
"""Greedy, and stop at the first blank line: the canonical layout has none, and a policy that
wrote a complete spec and then kept talking ("Answer: ...") would otherwise spoil a valid spec
(on 50 held-out GSM8K tasks the first real-data SFT policy wrote 40 valid specs with a
three-newline stop and 49 with this one; the policy-on-real-runs experiment)."""


PolicyEngine = Literal["llamacpp", "transformers"]
ENGINES: tuple[PolicyEngine, ...] = ("llamacpp", "transformers")
"""What decodes an in-process policy version (:func:`load_policy`): ``llamacpp``, its merged
weights exported once to GGUF (:mod:`lemon.backends.exporting`) on llama.cpp, the default where
the version can be exported, or ``transformers`` (:mod:`lemon.backends.local`), what training
and scoring use; ``LEMON_POLICY_ENGINE`` picks one for a process."""

POLICY_THREADS = 1
"""llama.cpp threads of a policy on the CPU (``LEMON_POLICY_THREADS`` overrides): one sequence of a
135M model gains little from a second thread, and on this project's busy 2-core machine two
threads waiting at ggml's barriers made the shipped policy's spec take 10-25 s, one 1.8 s
(``lemon bench policy``)."""


@dataclass(frozen=True, slots=True)
class PolicyAttempt:
    completion: str
    errors: tuple[str, ...]
    """Located errors (``LINE:COL: message``); empty when the spec was valid."""
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def valid(self) -> bool:
        return not self.errors


@dataclass(slots=True)
class PolicyDecision:
    spec: Spec
    output: str | None
    origin: str
    """Where the spec came from, in words (shown by ``lemon run``)."""
    kind: TaskKind
    """The task's kind, as classified once for this decision."""
    text: str
    """The spec's canonical text (:func:`lemon.spec.formatting.format_spec`)."""
    attempts: list[PolicyAttempt] = field(default_factory=list)
    fallback: bool = False
    """True when the learned policy wrote no valid spec and the template's was used."""

    @property
    def policy_tokens(self) -> int:
        return sum(a.prompt_tokens + a.completion_tokens for a in self.attempts)

    def to_json(self) -> dict[str, Any]:
        return {
            "origin": self.origin,
            "fallback": self.fallback,
            "attempts": [
                {"valid": a.valid, "errors": list(a.errors), "completion": a.completion}
                for a in self.attempts
            ],
            "policy_tokens": self.policy_tokens,
        }


class SpecPolicy(Protocol):
    @property
    def label(self) -> str: ...

    async def write_spec(
        self,
        task: str,
        *,
        kind: TaskKind | None = None,
        roles: RoleLibrary | None = None,
        trace: TraceWriter | None = None,
    ) -> PolicyDecision:
        """The spec for ``task`` (of ``kind``, classified once by the caller; here when not
        given)."""
        ...

    async def aclose(self) -> None: ...


class TemplatePolicy:
    """The template policy behind the :class:`SpecPolicy` interface."""

    def __init__(self, variant: TemplateVariant = TemplateVariant.DEFAULT) -> None:
        self.variant = TemplateVariant(variant)

    @property
    def label(self) -> str:
        default = self.variant is TemplateVariant.DEFAULT
        return "template policy" + ("" if default else f" ({self.variant})")

    async def write_spec(
        self,
        task: str,
        *,
        kind: TaskKind | None = None,
        roles: RoleLibrary | None = None,
        trace: TraceWriter | None = None,
    ) -> PolicyDecision:
        from lemon.policy.template import template_spec

        kind, spec, text = template_spec(task, kind=kind, variant=self.variant)
        default = self.variant is TemplateVariant.DEFAULT
        label = kind.value if default else f"{kind.value}, {self.variant}"
        return PolicyDecision(spec, spec.output, f"template policy ({label})", kind, text)

    async def aclose(self) -> None:
        return None


_FENCE = re.compile(r"```(?:ya?ml)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def extract_spec_text(completion: str) -> str:
    """The YAML in a completion: a fenced block's body when there is one, else the text from
    the first line that starts a spec (``agents:``, ``apiVersion:``) on."""
    start, end = _region(completion)
    return completion[start:end]


def _region(completion: str) -> tuple[int, int]:
    match = _FENCE.search(completion)
    if match:
        return match.start(1), match.end(1)
    found = re.search(r"(?m)^(agents|apiVersion|kind)\s*:", completion)
    return (found.start() if found else 0), len(completion)


def spec_region(completion: str, *, stop: Sequence[str] = DEFAULT_DECODING.stop) -> tuple[int, int]:
    """Where, in a raw completion, the text lies that the policy's spec is read from: the
    completion cut at the first ``stop`` string (what decoding with :data:`DEFAULT_DECODING`
    returns), then :func:`extract_spec_text`'s YAML. ``completion[start:end]`` is that text;
    GRPO's reward scores exactly it, and shifts its credit spans by ``start``."""
    end = len(completion)
    for marker in stop:
        found = completion.find(marker)
        if marker and found >= 0:
            end = min(end, found)
    start, stop_at = _region(completion[:end])
    return start, stop_at


class LearnedPolicy:
    """A causal LM that writes specs, through any :class:`Backend`."""

    def __init__(
        self,
        backend: Backend,
        *,
        name: str,
        max_attempts: int = 2,
        decoding: Decoding = DEFAULT_DECODING,
        fallback: SpecPolicy | None = None,
        constrained: bool = False,
        limits: GrammarLimits | None = None,
        model: str | None = None,
        prompt_format: str = PROMPT_FORMAT,
        choices: Mapping[TaskKind, Sequence[str]] | None = None,
        cost_weight: float | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if cost_weight is not None:
            if cost_weight < 0:
                raise ValueError(f"cost weight must be >= 0, got {cost_weight}")
            if prompt_format != COST_PROMPT_FORMAT:
                raise ValueError(
                    f"a cost weight needs a policy trained on {COST_PROMPT_FORMAT}, whose prompt "
                    f"states it; this one's prompt is {prompt_format}"
                )
        self.cost_weight = cost_weight
        """The cost weight its prompt states (R_orch's cost per 1,000 tier-priced tokens; None:
        the prompt format's default): one policy trained with weights sampled in its prompt
        traces accuracy against cost as this moves."""
        self.constrained = constrained
        """Decode under the spec grammar (:mod:`lemon.spec.grammar`): every spec is valid."""
        self.limits = limits
        self.backend = backend
        self.name = name
        self.prompt_format = prompt_format
        """The prompt it was trained on (:mod:`lemon.policy.prompt`; its version's metadata)."""
        self.model = model
        """The model the policy runs (a base model id or path; None: unknown), which prices its
        tokens (:func:`lemon.pricing.policy_price`)."""
        self.max_attempts = max_attempts
        self.decoding = decoding
        self.fallback = fallback if fallback is not None else TemplatePolicy()
        self.choices = {kind: tuple(texts) for kind, texts in (choices or {}).items() if texts}
        """When given, for a task of a kind it holds, the policy writes the one of that kind's
        spec texts its model gives the highest
        log-probability (as its answer to the prompt), instead of decoding freely: the policy's
        own preference over a fixed set of teams (an outcome table's columns), with no syntax
        to get wrong. Needs a backend that scores completions (in-process models)."""

    @property
    def label(self) -> str:
        how = ", constrained to the spec grammar" if self.constrained else ""
        if self.choices:
            most = max(len(texts) for texts in self.choices.values())
            how = f", choosing among up to {most} teams by log-probability"
        if self.cost_weight is not None:
            how += f", cost weight {self.cost_weight:g}"
        return f"learned policy {self.name} ({self.backend.label}{how})"

    def constraint(self, roles: RoleLibrary | None) -> SpecGrammar | None:
        """The grammar each request carries (None when unconstrained)."""
        if not self.constrained:
            return None
        return SpecGrammar.build(budget=self.decoding.max_tokens, roles=roles, limits=self.limits)

    async def write_spec(
        self,
        task: str,
        *,
        kind: TaskKind | None = None,
        roles: RoleLibrary | None = None,
        trace: TraceWriter | None = None,
    ) -> PolicyDecision:
        kind = kind or classify_task(task)
        messages = policy_messages(
            task, roles=roles, format=self.prompt_format, cost_weight=self.cost_weight
        )
        options = ValidationOptions(roles=roles) if roles is not None else ValidationOptions()
        if kind in self.choices:
            return await self._choose(messages, options, self.choices[kind], kind=kind, trace=trace)
        attempts: list[PolicyAttempt] = []
        constraint = self.constraint(roles)
        for number in range(1, self.max_attempts + 1):
            request = GenerationRequest(
                messages=tuple(Message(m["role"], m["content"]) for m in messages),  # type: ignore[arg-type]  # roles come from policy_messages
                decoding=self.decoding,
                constraint=constraint,
            )
            try:
                generation = await self.backend.generate(request)
            except BackendError as exc:
                attempts.append(PolicyAttempt("", (f"policy backend failed: {exc.reason}",)))
                if trace is not None:
                    trace.emit(PolicyAttempted(attempt=number, valid=False, errors=(exc.reason,)))
                break
            text = extract_spec_text(generation.text)
            parsed, errors = _validate(text, options)
            attempt = PolicyAttempt(
                generation.text,
                errors,
                generation.prompt_tokens,
                generation.completion_tokens,
            )
            attempts.append(attempt)
            if trace is not None:
                trace.emit(
                    PolicyAttempted(
                        attempt=number,
                        valid=attempt.valid,
                        errors=errors,
                        prompt_tokens=generation.prompt_tokens,
                        completion_tokens=generation.completion_tokens,
                    )
                )
            if parsed is not None:
                origin = f"{self.label}, attempt {number}"
                canonical = format_spec(parsed.spec, output=parsed.output)
                return PolicyDecision(
                    parsed.spec, parsed.output, origin, kind, canonical, attempts=attempts
                )
            messages = repair_messages(messages, generation.text, errors)
        decision = await self.fallback.write_spec(task, kind=kind, roles=roles, trace=trace)
        decision.attempts = attempts + decision.attempts
        decision.fallback = True
        decision.origin = (
            f"{decision.origin}: fallback after {len(attempts)} invalid attempt(s) of {self.label}"
        )
        if trace is not None:
            trace.emit(PolicyFellBack(origin=decision.origin))
        return decision

    async def _choose(
        self,
        messages: list[dict[str, str]],
        options: ValidationOptions,
        choices: tuple[str, ...],
        *,
        kind: TaskKind,
        trace: TraceWriter | None,
    ) -> PolicyDecision:
        """The choice its model scores highest (:attr:`choices`). Its tokens are the prompt's
        and every choice's (each was scored: the full cost of the decision)."""
        score = getattr(self.backend, "score", None)
        if score is None:
            raise ValueError(f"{self.backend.label} cannot score completions (choices need one)")
        prompt = tuple(Message(m["role"], m["content"]) for m in messages)  # type: ignore[arg-type]
        try:
            prompt_tokens, scored = await score(prompt, choices)
        except BackendError as exc:
            raise ValueError(f"policy backend failed: {exc.reason}") from exc
        best = max(range(len(scored)), key=lambda i: scored[i][0])
        text = choices[best]
        parsed, errors = _validate(text, options)
        if parsed is None:
            raise ValueError(f"choice {best} is not a valid spec: {'; '.join(errors)}")
        attempt = PolicyAttempt(text, (), prompt_tokens, sum(n for _, n in scored))
        if trace is not None:
            trace.emit(
                PolicyAttempted(
                    attempt=1,
                    valid=True,
                    errors=(),
                    prompt_tokens=attempt.prompt_tokens,
                    completion_tokens=attempt.completion_tokens,
                )
            )
        origin = f"{self.label}: choice {best + 1} (log-probability {scored[best][0]:.2f})"
        canonical = format_spec(parsed.spec, output=parsed.output)
        return PolicyDecision(
            parsed.spec, parsed.output, origin, kind, canonical, attempts=[attempt]
        )

    async def aclose(self) -> None:
        await self.backend.aclose()


def _validate(text: str, options: ValidationOptions) -> tuple[ParsedSpec | None, tuple[str, ...]]:
    try:
        return parse_spec(text, source="<policy>", options=options), ()
    except SpecError as exc:
        return None, tuple(f"{issue.line}:{issue.column}: {issue.message}" for issue in exc.issues)


def load_policy(
    source: str | os.PathLike[str],
    *,
    model: str | None = None,
    max_attempts: int = 2,
    decoding: Decoding = DEFAULT_DECODING,
    dtype: str = "auto",
    device: str = "auto",
    constrained: bool = False,
    grammar_dialect: GrammarDialect = "vllm",
    engine: PolicyEngine | None = None,
    cost_weight: float | None = None,
) -> LearnedPolicy:
    """A learned policy from a policy-version directory (loaded in-process, lazily), an
    OpenAI-compatible base URL (``http(s)://...``; ``model`` names the served model),
    ``packaged`` (the untrained packaged SmolLM2, the baseline a trained version is compared to)
    or ``learned`` (the version shipped with the package, :mod:`lemon.policy.shipped`).

    A version directory decodes on ``engine`` (:data:`ENGINES`; None: ``$LEMON_POLICY_ENGINE``,
    else llama.cpp where the version can be exported to GGUF and neither ``dtype`` nor a CUDA
    ``device`` asks for transformers, else transformers). Both take the same prompt, decoding
    settings and, when ``constrained``, the same grammar matcher. ``cost_weight`` is stated in
    the prompt of a version trained on the cost prompt (:data:`COST_PROMPT_FORMAT`); asking it
    of another is a :class:`ValueError`."""
    text = os.fspath(source)
    if text.startswith(("http://", "https://")):
        from lemon.backends.openai import OpenAIBackend

        backend: Backend = OpenAIBackend(
            text, model=model or "policy", tier="policy", grammar_dialect=grammar_dialect
        )
        return LearnedPolicy(
            backend, name=text, max_attempts=max_attempts, decoding=decoding,
            constrained=constrained, cost_weight=cost_weight,
            # a served policy's prompt is not known here: asking a cost weight of it says it
            # was trained on the prompt that states one
            prompt_format=COST_PROMPT_FORMAT if cost_weight is not None else PROMPT_FORMAT,
        )  # fmt: skip
    from lemon.backends.local import PACKAGED, LocalBackend, ModelSource
    from lemon.policy.version import read_policy

    if text == "packaged":  # the untrained base model: the "before SFT" policy
        backend = LocalBackend(ModelSource(PACKAGED, dtype=dtype, device=device), tier="policy")
        return LearnedPolicy(
            backend, name="packaged SmolLM2-135M-Instruct (base, untrained)",
            max_attempts=max_attempts, decoding=decoding, constrained=constrained,
            cost_weight=cost_weight,
        )  # fmt: skip

    if text == "learned":  # the version shipped with the package, checked against its pins
        from lemon.policy.shipped import shipped_policy

        text = str(shipped_policy())
    meta = read_policy(text)  # PolicyVersionError when the directory is not a complete version
    path = Path(text).resolve()
    name = f"{meta.policy}@{meta.version} ({meta.stage})"
    chosen = engine or os.environ.get("LEMON_POLICY_ENGINE") or None
    if chosen not in (None, *ENGINES):
        raise ValueError(f"policy engine {chosen!r}: not one of {', '.join(ENGINES)}")
    if chosen is None:
        wants_torch = dtype != "auto" or device == "cuda"
        chosen = "transformers" if wants_torch or _gguf_blocker(path) else "llamacpp"
    elif chosen == "llamacpp" and (why := _gguf_blocker(path)) is not None:
        raise ValueError(f"{text}: cannot decode on llama.cpp: {why}")
    if chosen == "llamacpp":
        backend = _gguf_backend(path, name=f"{meta.policy}@{meta.version}")
    else:
        backend = LocalBackend(ModelSource(str(path), dtype=dtype, device=device), tier="policy")
    return LearnedPolicy(
        backend, name=name, max_attempts=max_attempts, decoding=decoding,
        constrained=constrained, model=meta.base_model, prompt_format=meta.prompt_format,
        cost_weight=cost_weight,
    )  # fmt: skip


def _gguf_blocker(version: Path) -> str | None:
    """Why ``version`` cannot run on llama.cpp here (None: it can); nothing is loaded."""
    import importlib.util

    from lemon.backends.exporting import ExportError, base_gguf
    from lemon.backends.gguf_header import read_header

    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (the llama extra)"
    try:
        header = read_header(base_gguf(version), keys=("general.architecture",))
    except (ExportError, LookupError, OSError, ValueError, RuntimeError) as exc:
        return str(exc)
    arch = header.architecture
    return None if arch == "llama" else f"its base is a {arch!r} model (the export takes llama)"


def _gguf_backend(version: Path, *, name: str) -> Backend:
    """``version`` exported to GGUF (once, into the cache, when first loaded) on llama.cpp."""
    from lemon.backends.exporting import policy_gguf
    from lemon.backends.llamacpp import LlamaBackend

    threads = int(os.environ.get("LEMON_POLICY_THREADS", "") or POLICY_THREADS)
    return LlamaBackend(
        str(version), tier="policy", slots=4, context=2048, threads=threads,
        locate=lambda: policy_gguf(version), title=f"{name} (GGUF F16)",
    )  # fmt: skip
