"""``lemon cluster up|status|down``: Kubernetes on one machine (registered through the
``lemon.commands`` entry points; available with the ``cluster`` extra)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from lemon.cli.options import EXIT_INVALID, EXIT_OK

__all__ = ["register"]

_DESCRIPTION = """\
Kubernetes on one machine: a real kube-apiserver and etcd (built once on first use), LEMON's
CRDs installed with helm beside the pinned KServe and Kubeflow CRDs, the operator and the
orchestration service as local processes, and two local stand-ins: for KServe (each
InferenceService whose model this machine has is served by `lemon serve-model` and marked Ready
at a loopback URL; one it lacks is marked not ready, saying why) and for the Kubeflow training
operator (a PyTorchJob's Master runs here from the job's own command). docs/cluster.md says
more.
"""


def _state_dir(args: argparse.Namespace) -> Path:
    from lemon_cluster.state import default_dir

    return Path(args.state_dir or default_dir()).expanduser().absolute()


def _say(line: str) -> None:
    print(line, flush=True)


def cmd_up(args: argparse.Namespace) -> int:
    from lemon_cluster.launching import ClusterError, UpOptions, up

    options = UpOptions(
        state_dir=_state_dir(args),
        port=args.port,
        service_port=args.service_port,
        build=not args.no_build,
    )
    try:
        return up(options, say=_say)
    except ClusterError as exc:
        print(f"lemon cluster up: {exc}", file=sys.stderr)
        return EXIT_INVALID


def cmd_down(args: argparse.Namespace) -> int:
    from lemon_cluster.launching import ClusterError, down

    try:
        return down(_state_dir(args), say=_say, timeout=args.timeout)
    except ClusterError as exc:
        print(f"lemon cluster down: {exc}", file=sys.stderr)
        return EXIT_INVALID


def cmd_status(args: argparse.Namespace) -> int:
    from lemon_cluster.launching import status

    report = status(_state_dir(args))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(_render(report))
    return EXIT_OK if report["condition"] == "running" else EXIT_INVALID


def _render(report: dict[str, Any]) -> str:
    condition = report["condition"]
    where = report["stateDir"]
    if condition == "running":
        lines = [f"running (lemon cluster up, pid {report.get('pid')}; {report.get('stage')}); "
                 f"state in {where}"]  # fmt: skip
    elif condition == "stale":
        lines = [f"stale: {where} was left by a cluster that is no longer running "
                 "(`lemon cluster down` removes it)"]  # fmt: skip
    else:
        lines = [f"not running (no local cluster at {where})"]
    for key, label in (("kubeconfig", "KUBECONFIG"), ("apiserver", "API server"),
                       ("service", "orchestration service"), ("volumes", "volumes")):  # fmt: skip
        if key in report:
            lines.append(f"  {label}: {report[key]}")
    for name, process in (report.get("processes") or {}).items():
        state = "running" if process["alive"] else "gone"
        lines.append(f"  process {name}: pid {process['pid']} ({state})")
    for row in report.get("inferenceServices") or []:
        detail = row.get("url") or row.get("message", "")
        model = f" {row['model']} as {row['servedAs']!r}" if "model" in row else ""
        lines.append(
            f"  InferenceService {row['inferenceService']}:{model} {row['state']} {detail}"
        )
    return "\n".join(lines)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "cluster",
        help="Kubernetes on one machine: lemon cluster up | status | down",
        description=_DESCRIPTION,
    )
    commands = p.add_subparsers(dest="cluster_command", required=True, metavar="COMMAND")
    up = commands.add_parser(
        "up",
        help="start a local cluster and run it until Ctrl-C or `lemon cluster down`",
        description=_DESCRIPTION + "\nRuns in the foreground and prints the KUBECONFIG line.",
    )
    up.add_argument("--port", type=int, default=0, help="the API server's port (default: free)")
    up.add_argument(
        "--service-port", type=int, default=0, help="the orchestration service's (default: free)"
    )
    up.add_argument(
        "--no-build",
        action="store_true",
        help="refuse to build the control plane when it is not built yet",
    )
    status = commands.add_parser("status", help="what runs, where, and what is served")
    status.add_argument("--json", action="store_true", help="one JSON object")
    down = commands.add_parser("down", help="stop everything `up` started; remove its state")
    down.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to let `up` stop before killing"
    )
    for command, handler in ((up, cmd_up), (status, cmd_status), (down, cmd_down)):
        command.add_argument(
            "--state-dir",
            default=None,
            metavar="DIR",
            help="the cluster's state directory (default: $LEMON_CLUSTER_DIR, else "
            "$XDG_STATE_HOME/lemon/cluster)",
        )
        command.set_defaults(handler=handler)
