"""A small real OTLP/HTTP trace receiver, run as a subprocess by the tracing tests and
``lemon bench tracing`` (:class:`OTLPReceiver` starts it):
``python -m lemon_testing.otlp_receiver --port P --out FILE``.

It accepts ``POST /v1/traces`` (``application/x-protobuf``, gzip or not) as a collector's port
4318 does, decodes ``ExportTraceServiceRequest`` with opentelemetry-proto's own messages and
appends one JSON object per span to ``--out`` (ids in hex, attributes as plain values, the
resource's ``service.name``). ``GET /health`` answers 200 once it listens.
"""

from __future__ import annotations

import argparse
import gzip
import json
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

__all__ = ["OTLPReceiver", "main", "read_spans"]

STARTUP_S = 60.0

KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    if which is None:
        return None
    if which == "kvlist_value":
        return MessageToDict(value.kvlist_value)
    return getattr(value, which)


def _attributes(pairs: list[KeyValue]) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def spans_of(request: ExportTraceServiceRequest) -> list[dict[str, Any]]:
    """The request's spans as plain JSON objects."""
    out = []
    for resource_spans in request.resource_spans:
        resource = _attributes(list(resource_spans.resource.attributes))
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                out.append(
                    {
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "name": span.name,
                        "kind": KINDS.get(span.kind, str(span.kind)),
                        "start_ns": span.start_time_unix_nano,
                        "end_ns": span.end_time_unix_nano,
                        "attributes": _attributes(list(span.attributes)),
                        "status": {"code": span.status.code, "message": span.status.message},
                        "scope": scope_spans.scope.name,
                        "service": resource.get("service.name"),
                    }
                )
    return out


def make_handler(out: Path) -> type[BaseHTTPRequestHandler]:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def _reply(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            ok = self.path == "/health"
            self._reply(200 if ok else 404, b"ok" if ok else b"not found", "text/plain")

        def do_POST(self) -> None:
            if self.path != "/v1/traces":
                self._reply(404, b"not found", "text/plain")
                return
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            request = ExportTraceServiceRequest()
            try:
                request.ParseFromString(body)
            except Exception as exc:
                self._reply(400, f"not an ExportTraceServiceRequest: {exc}".encode(), "text/plain")
                return
            lines = "".join(json.dumps(span) + "\n" for span in spans_of(request))
            with lock, out.open("a", encoding="utf-8") as file:
                file.write(lines)
            reply = ExportTraceServiceResponse().SerializeToString()
            self._reply(200, reply, "application/x-protobuf")

    return Handler


def read_spans(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.touch()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(args.out))
    server.serve_forever()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class OTLPReceiver:
    """This module as a subprocess on a free loopback port, appending to a file in ``log_dir``;
    ``spans()`` reads what it received."""

    def __init__(self, log_dir: Path) -> None:
        import httpx

        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.out = log_dir / f"otlp-{self.port}.jsonl"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "lemon_testing.otlp_receiver", "--port", str(self.port),
             "--out", str(self.out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + STARTUP_S
        while self.process.poll() is None and time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.endpoint}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.kill()
        raise RuntimeError("the OTLP receiver did not start")

    def env(self, *, service: str) -> dict[str, str]:
        """The standard variables that point ``lemon serve`` at this receiver."""
        return {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint,
            "OTEL_SERVICE_NAME": service,
            "OTEL_BSP_SCHEDULE_DELAY": "100",  # milliseconds between batch exports
        }

    def spans(self) -> list[dict[str, Any]]:
        return read_spans(self.out)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


if __name__ == "__main__":
    main()
