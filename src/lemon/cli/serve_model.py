"""``lemon serve-model``: an OpenAI-compatible HTTP server over an in-process model
(:mod:`lemon.serving`), e.g. to put a tier behind the ``openai`` backend."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from lemon.backends.local import DTYPES
from lemon.cli.options import EXIT_OK

__all__ = ["register", "run"]


def run(args: argparse.Namespace) -> int:
    from lemon.backends.local import PACKAGED, LocalBackend, ModelSource
    from lemon.serving import serve

    name = PACKAGED if args.model == "packaged" else args.model
    backend = LocalBackend(ModelSource(name, args.dtype), window_s=args.batch_window)
    served = args.served_model_name or (
        "SmolLM2-135M-Instruct" if args.model == "packaged" else args.model
    )
    print(
        f"serving {backend.label} as {served!r} on http://{args.host}:{args.port}/v1",
        file=sys.stderr,
    )
    serve(backend, served_name=served, host=args.host, port=args.port)
    return EXIT_OK


def register(sub: Any) -> None:
    p = sub.add_parser("serve-model", help="OpenAI-compatible HTTP server over an in-process model")
    p.add_argument("--model", default="packaged", help="'packaged' or a local model directory")
    p.add_argument("--served-model-name", default=None)
    p.add_argument(
        "--dtype",
        default="auto",
        choices=DTYPES,
        help="auto: bfloat16 on CUDA; on the CPU fbgemm float16 weights (int8 without fbgemm)",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--batch-window", type=float, default=0.02, help="seconds to gather a batch")
    p.set_defaults(handler=run)
