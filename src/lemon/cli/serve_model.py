"""``lemon serve-model``: an OpenAI-compatible HTTP server over an in-process model
(:mod:`lemon.serving`), e.g. to put a tier behind the ``openai`` backend, or to point any OpenAI
client at one of the embedded tiers' models.

What it serves (``--model``): a GGUF model of :mod:`lemon.backends.ggufs` by name (the embedded
tiers' models: ``smollm2-135m-instruct``, ``qwen2.5-coder-0.5b-instruct``,
``qwen2.5-coder-1.5b-instruct``) or a ``.gguf`` file, on llama.cpp; ``packaged`` (the packaged
SmolLM2-135M-Instruct through transformers), or a local model directory (a policy version) or
Hugging Face id, through transformers. Or ``--profile P --tier T``: the model of tier T of
capacity profile P (``--profile tiny --tier small`` is the packaged SmolLM2 GGUF).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from lemon.backends.base import BackendError
from lemon.backends.local import DTYPES
from lemon.cli.options import EXIT_INVALID, EXIT_OK, UsageError

__all__ = ["register", "run", "served_backend"]


def served_backend(args: argparse.Namespace) -> tuple[Any, str]:
    """The backend ``args`` ask for and its default served name."""
    from lemon.backends.ggufs import GGUF_MODELS
    from lemon.backends.llamacpp import LlamaBackend
    from lemon.backends.local import PACKAGED, LocalBackend, ModelSource

    if args.profile is not None or args.tier is not None:
        return _profile_tier(args)
    model = args.model
    if model in GGUF_MODELS or model.endswith(".gguf"):
        llama = LlamaBackend(model, slots=args.slots, context=args.context, threads=args.threads)
        return llama, model.rsplit("/", 1)[-1].removesuffix(".gguf")
    name = PACKAGED if model == "packaged" else model
    local = LocalBackend(ModelSource(name, args.dtype), window_s=args.batch_window)
    return local, ("SmolLM2-135M-Instruct" if model == "packaged" else model)


def _profile_tier(args: argparse.Namespace) -> tuple[Any, str]:
    from lemon.backends.packaged import PACKAGED
    from lemon.capacity import CapacityProfile, build_backends, resolve_profile
    from lemon.spec.models import Capacity

    if args.profile is None or args.tier is None:
        raise UsageError("--profile and --tier go together")
    if args.model is not None:
        raise UsageError("--model or --profile/--tier, not both")
    try:
        profile = resolve_profile(args.profile, files=args.profiles)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from None
    tier = Capacity(args.tier)
    config = profile.tiers[tier]
    if config.type not in {"llamacpp", "transformers"}:
        raise UsageError(
            f"tier {tier.value} of profile {profile.name} is a {config.type} backend; "
            "serve-model serves in-process models (llamacpp, transformers)"
        )
    one = CapacityProfile.model_construct(name=profile.name, tiers={tier: config})
    served = "SmolLM2-135M-Instruct" if config.model in (None, PACKAGED) else str(config.model)
    return build_backends(one)[tier], served


def run(args: argparse.Namespace) -> int:
    from lemon.serving import serve

    if args.model is None and args.profile is None and args.tier is None:
        args.model = "packaged"
    backend, default_name = served_backend(args)
    names = args.served_model_name or [default_name]
    try:  # load before listening: a model that cannot load fails here, saying why
        asyncio.run(backend.model())
    except BackendError as exc:
        print(f"lemon serve-model: {exc.reason}", file=sys.stderr)
        return EXIT_INVALID
    shown = ", ".join(repr(name) for name in names)
    print(
        f"serving {backend.label} as {shown} on http://{args.host}:{args.port}/v1",
        file=sys.stderr,
        flush=True,
    )
    serve(backend, served_name=names, host=args.host, port=args.port)
    return EXIT_OK


def register(sub: Any) -> None:
    p = sub.add_parser(
        "serve-model",
        help="OpenAI-compatible HTTP server over an in-process model (GGUF or transformers)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--model",
        default=None,
        help="a pinned GGUF model name or a .gguf file (llama.cpp); 'packaged', a model "
        "directory or an HF id (transformers). Default: packaged",
    )
    p.add_argument("--profile", default=None, help="serve a tier of this capacity profile")
    p.add_argument("--tier", choices=["small", "medium", "large"], default=None)
    p.add_argument(
        "--profiles", action="append", default=[], metavar="FILE", help="profile file (repeatable)"
    )
    p.add_argument(
        "--served-model-name",
        nargs="+",
        default=None,
        metavar="NAME",
        help="the model name(s) requests must give (the first is the one answers carry)",
    )
    p.add_argument(
        "--dtype",
        default="auto",
        choices=DTYPES,
        help="transformers: auto is bfloat16 on CUDA; on the CPU fbgemm float16 weights "
        "(int8 without fbgemm)",
    )
    p.add_argument("--slots", type=int, default=8, help="llama.cpp: sequences decoded together")
    p.add_argument("--context", type=int, default=4096, help="llama.cpp: tokens per sequence")
    p.add_argument("--threads", type=int, default=0, help="llama.cpp: CPU threads (0: all)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument(
        "--batch-window", type=float, default=0.02, help="transformers: seconds to gather a batch"
    )
    p.set_defaults(handler=run)
