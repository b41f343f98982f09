"""``lemon ui [PATH...]``: the web view of runs, evaluations and training runs, over the files
LEMON writes (traces from ``lemon run --trace``, ``lemon eval`` run folders, training output
with its metrics and credit records), read-only. See docs/ui.md."""

from __future__ import annotations

import argparse
import os
import sys
import threading
from typing import Any

from lemon.cli.options import EXIT_OK, UsageError

__all__ = ["register", "run"]


def run(args: argparse.Namespace) -> int:
    from lemon.ui.app import UIApp, serve
    from lemon.ui.files import LocalFiles

    missing = [path for path in args.paths if not os.path.exists(path)]
    if missing:
        raise UsageError(f"no such file or folder: {', '.join(missing)}")
    token = args.token or os.environ.get("LEMON_UI_TOKEN") or None
    files = LocalFiles(args.paths)
    try:
        server, _ = serve(UIApp(files, token=token), host=args.host, port=args.port)
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}") from None
    runs = len(files.run_summaries())
    print(
        f"lemon ui: http://{args.host}:{server.server_port}/ui/ "
        f"({runs} runs, {len(files.evaluations())} evaluations, {len(files.trainings())} "
        f"training runs under {files.label}; {'token required' if token else 'no token'}; "
        "Ctrl-C stops)",
        file=sys.stderr,
        flush=True,
    )
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
        files.close()
    return EXIT_OK


def register(sub: Any) -> None:
    p = sub.add_parser(
        "ui",
        help="web view of runs, evaluations and training (read-only, local files)",
        description="Serve the web view over the files LEMON writes: run traces "
        "(lemon run --trace), lemon eval run folders and training metrics (with GRPO's "
        "credit record), found under the given paths. Open the printed address in a browser.",
    )
    p.add_argument(
        "paths",
        nargs="*",
        default=["."],
        metavar="PATH",
        help="trace files and folders to search (default: the current folder)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument(
        "--port", type=int, default=8765, help="port to listen on (default 8765; 0: any free)"
    )
    p.add_argument(
        "--token",
        default=None,
        help="require this bearer token (or the login form's cookie); default: "
        "$LEMON_UI_TOKEN, else none",
    )
    p.set_defaults(handler=run)
