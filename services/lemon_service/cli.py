"""``lemon serve`` and ``lemon client ...`` (registered through the ``lemon.commands`` entry
points; imported only when the ``service`` extra is installed)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Any

from lemon.cli.options import (
    EXIT_INVALID,
    EXIT_OK,
    UsageError,
    add_policy_options,
    open_policy,
    sample_item,
)
from lemon.policy.template import TemplateVariant

__all__ = ["register_client", "register_serve"]

TOKEN_ENV = "LEMON_TOKEN"
TEMPLATES = [variant.value for variant in TemplateVariant]


def _token(path: str | None) -> str | None:
    from lemon_service.settings import SettingsError, read_token

    if path is None:
        return os.environ.get(TOKEN_ENV) or None
    try:
        return read_token(Path(path))
    except SettingsError as exc:
        raise UsageError(str(exc)) from None


def cmd_serve(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from lemon_service.server import run_serving, serve
    from lemon_service.settings import Limits, ServerConfig, SettingsError, TlsFiles

    if (args.tls_cert is None) != (args.tls_key is None):
        raise UsageError("--tls-cert and --tls-key go together")
    if args.tls_client_ca is not None and args.tls_cert is None:
        raise UsageError("--tls-client-ca (mTLS) needs --tls-cert and --tls-key")
    try:
        config = ServerConfig(
            host=args.host,
            port=args.port,
            profile=args.profile,
            profiles=tuple(Path(p) for p in args.profiles),
            profile_status=args.profile_status,
            token=_token(args.token_file),
            tls=TlsFiles(cert=args.tls_cert, key=args.tls_key, client_ca=args.tls_client_ca)
            if args.tls_cert
            else None,
            metrics_port=args.metrics_port,
            run_journal=args.run_journal,
            limits=Limits(
                max_concurrency=args.max_concurrency,
                max_waiting=args.max_waiting,
                max_message_bytes=args.max_message_bytes,
                max_task_chars=args.max_task_chars,
                max_run_s=args.max_run_s,
                max_tokens=args.max_tokens,
                max_attempts=args.max_attempts,
                call_timeout_s=args.call_timeout_s,
                run_retention_s=args.run_retention_s,
                max_runs=args.max_runs,
            ),
        )
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        policy = open_policy(args) if args.policy is not None else None
        run_serving(serve(config, policy=policy), event_loop=args.event_loop)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UsageError(f"--{where.split('.')[-1].replace('_', '-')}: {first['msg']}") from None
    except SettingsError as exc:
        raise UsageError(str(exc)) from None
    return EXIT_OK


def register_serve(sub: Any) -> None:
    from lemon_service.settings import DEFAULT_PORT, EVENT_LOOPS, Limits

    d = Limits()
    p = sub.add_parser(
        "serve",
        help="serve the gRPC orchestration API (lemon.v1.Orchestrator)",
        description="Serve lemon.v1.Orchestrator with standard health checking and server "
        "reflection. Backends are built once; SIGTERM drains and stops.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (0.0.0.0 in a pod)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    p.add_argument("--profile", default="embedded", help="capacity profile (default: embedded)")
    p.add_argument(
        "--profiles", action="append", default=[], metavar="FILE", help="profile file (repeatable)"
    )
    p.add_argument(
        "--profile-status",
        type=Path,
        metavar="FILE",
        help="a LemonCapacityProfile with status (kubectl get -o json): tiers at its URLs",
    )
    p.add_argument(
        "--token-file", metavar="PATH", help=f"require this bearer token (or ${TOKEN_ENV})"
    )
    p.add_argument("--tls-cert", type=Path, metavar="PEM")
    p.add_argument("--tls-key", type=Path, metavar="PEM")
    p.add_argument(
        "--tls-client-ca", type=Path, metavar="PEM", help="require client certs signed by it"
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (default: off)",
    )
    p.add_argument("--max-concurrency", type=int, default=d.max_concurrency, help="runs at once")
    p.add_argument("--max-waiting", type=int, default=d.max_waiting, help="runs queued beyond that")
    p.add_argument("--max-message-bytes", type=int, default=d.max_message_bytes)
    p.add_argument("--max-task-chars", type=int, default=d.max_task_chars)
    p.add_argument("--max-run-s", type=float, default=d.max_run_s, help="a run's budget")
    p.add_argument("--max-tokens", type=int, default=d.max_tokens, help="per agent")
    p.add_argument("--max-attempts", type=int, default=d.max_attempts, help="per model call")
    p.add_argument(
        "--call-timeout-s",
        type=float,
        default=d.call_timeout_s,
        help="longest one call to a tier endpoint may take to answer, then it is retried "
        f"(default {d.call_timeout_s:g}; CPU tiers on a small machine need more)",
    )
    p.add_argument(
        "--run-retention-s",
        type=float,
        default=d.run_retention_s,
        help="how long a finished SubmitRun run stays readable (GetRun)",
    )
    p.add_argument("--max-runs", type=int, default=d.max_runs, help="runs held by id")
    p.add_argument(
        "--run-journal",
        type=Path,
        metavar="PATH",
        default=os.environ.get("LEMON_RUN_JOURNAL") or None,
        help="keep SubmitRun's runs in this SQLite file, so a restarted server answers them "
        "and starts none twice (default: $LEMON_RUN_JOURNAL, else in memory only)",
    )
    p.add_argument(
        "--event-loop",
        choices=EVENT_LOOPS,
        default="auto",
        help="the server's event loop (default auto: uvloop where installed, the service "
        "extra brings it; 10-20%% less CPU per request than asyncio's here)",
    )
    add_policy_options(p)  # the same --policy flags as lemon run: who writes Orchestrate's specs
    p.set_defaults(handler=cmd_serve)


def _client(args: argparse.Namespace) -> Any:
    from lemon_api.client import ClientConfig, LemonClient

    return LemonClient(
        ClientConfig(
            target=args.target,
            token=_token(args.token_file),
            tls_ca=args.tls_ca,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            server_name=args.server_name,
        )
    )


def _print_message(message: Any) -> None:
    from google.protobuf import json_format

    text = json_format.MessageToJson(
        message, preserving_proto_field_name=True, indent=None, ensure_ascii=False
    )
    print(text, flush=True)


def _print_run(response: Any, *, as_json: bool) -> int:
    if as_json:
        _print_message(response)
    else:
        print(f"spec from {response.spec_origin}", file=sys.stderr)
        for agent in response.agents:
            tokens = agent.prompt_tokens + agent.completion_tokens
            note = f": {agent.error}" if agent.error else ""
            print(
                f"  {agent.status:<9} {agent.name} ({agent.capacity}, {tokens} tokens, "
                f"{agent.latency_s:.2f} s){note}",
                file=sys.stderr,
            )
        print(f"{response.profile_note}; engine wall {response.wall_s:.2f} s", file=sys.stderr)
        print(response.answer if response.status == "succeeded" else f"FAILED: {response.error}")
        print(f"cost: {response.cost:.0f} {response.cost_unit}", file=sys.stderr)
    return EXIT_OK if response.status == "succeeded" else EXIT_INVALID


async def _client_call(args: argparse.Namespace) -> int:
    from lemon_api.client import run_options

    options = run_options(
        max_tokens=getattr(args, "max_tokens", 0),
        seed=getattr(args, "seed", None),
        template=getattr(args, "template", ""),
    )
    async with _client(args) as client:
        if args.action == "health":
            status = await client.health(args.service, timeout=args.timeout)
            print(status)
            return EXIT_OK if status == "SERVING" else EXIT_INVALID
        if args.action == "validate":
            text = Path(args.path).read_text(encoding="utf-8")
            result = await client.validate(text, source=args.path, timeout=args.timeout)
            if args.json:
                _print_message(result)
            for issue in [*result.errors, *result.warnings]:
                print(issue.rendered, file=sys.stderr if args.json else sys.stdout)
            return EXIT_OK if result.valid else EXIT_INVALID
        if args.task is None:
            args.task = sample_item().question
        if args.action == "execute":
            text = Path(args.spec).read_text(encoding="utf-8")
            response = await client.execute(
                args.task, text, source=args.spec, options=options, timeout=args.timeout
            )
            return _print_run(response, as_json=args.json)
        if args.action == "stream":
            code = EXIT_OK
            async for event in client.stream(args.task, options=options, timeout=args.timeout):
                _print_message(event)
                if event.HasField("result") and event.result.status != "succeeded":
                    code = EXIT_INVALID
            return code
        response = await client.orchestrate(args.task, options=options, timeout=args.timeout)
        return _print_run(response, as_json=args.json)


def cmd_client(args: argparse.Namespace) -> int:
    import grpc

    try:
        return asyncio.run(_client_call(args))
    except grpc.aio.AioRpcError as exc:
        print(f"lemon client: {exc.code().name}: {exc.details()}", file=sys.stderr)
        return EXIT_INVALID
    except OSError as exc:
        raise UsageError(f"cannot read {exc.filename}: {exc.strerror}") from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def register_client(sub: Any) -> None:
    p = sub.add_parser(
        "client",
        help="call a lemon serve server (orchestrate, stream, execute, validate, health)",
        description="A client of lemon.v1.Orchestrator. Exit 1 when the call fails "
        "(status printed as CODE: details) or the run/spec is not a success.",
    )
    p.add_argument("--target", default="127.0.0.1:50051", help="HOST:PORT of the server")
    p.add_argument("--token-file", metavar="PATH", help=f"bearer token (or ${TOKEN_ENV})")
    p.add_argument("--tls-ca", type=Path, metavar="PEM", help="trust this CA (turns TLS on)")
    p.add_argument("--tls-cert", type=Path, metavar="PEM", help="client certificate (mTLS)")
    p.add_argument("--tls-key", type=Path, metavar="PEM")
    p.add_argument("--server-name", help="name expected in the server's certificate")
    p.add_argument("--timeout", type=float, default=None, help="call deadline in seconds")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    def run_flags(q: argparse.ArgumentParser) -> None:
        q.add_argument(
            "--task", default=None, help="the task text (default: the sample GSM8K item)"
        )
        q.add_argument("--max-tokens", type=int, default=0, help="per agent (0: server default)")
        q.add_argument("--seed", type=int, default=None)
        q.add_argument("--json", action="store_true", help="print one JSON object")

    template_help = (
        "the template policy's team (this variant) instead of the server's default policy "
        "(its --policy, else LEMON's built-in default: the best fixed team for the task's kind)"
    )
    q = actions.add_parser("orchestrate", help="the policy writes the team; print the answer")
    run_flags(q)
    q.add_argument("--template", choices=TEMPLATES, default="", help=template_help)
    q = actions.add_parser("stream", help="the same, as events (one JSON object a line)")
    run_flags(q)
    q.add_argument("--template", choices=TEMPLATES, default="", help=template_help)
    q = actions.add_parser("execute", help="run a given spec on a task")
    q.add_argument("--spec", required=True, metavar="PATH")
    run_flags(q)
    q = actions.add_parser("validate", help="validate a spec on the server (located errors)")
    q.add_argument("path", metavar="PATH")
    q.add_argument("--json", action="store_true")
    q = actions.add_parser("health", help="standard gRPC health check")
    q.add_argument("--service", default="", help="service name ('' = the whole server)")
    p.set_defaults(handler=cmd_client)
