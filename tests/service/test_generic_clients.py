"""Generic gRPC clients nobody here wrote — grpcurl and ghz, built through the Go module
proxy (testing/lemon_testing/tools.py) — list the service through reflection and call it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from lemon_testing.tools import ensure_tool
from tests.conftest import ROOT
from tests.service.conftest import ServeProcess
from tests.service.test_rpcs import TASK


def grpcurl(*args: str) -> subprocess.CompletedProcess[str]:
    binary = ensure_tool("grpcurl")  # raises with the build's error: never a skip
    return subprocess.run(
        [str(binary), *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_grpcurl_lists_and_describes_through_reflection(scripted_server: ServeProcess) -> None:
    listed = grpcurl("-plaintext", scripted_server.target, "list")
    assert listed.returncode == 0, listed.stderr
    services = set(listed.stdout.split())
    assert {"lemon.v1.Orchestrator", "grpc.health.v1.Health"} <= services
    methods = grpcurl("-plaintext", scripted_server.target, "list", "lemon.v1.Orchestrator")
    assert sorted(methods.stdout.split()) == [
        f"lemon.v1.Orchestrator.{name}"
        for name in (
            "CancelRun", "ExecuteSpec", "GetRun", "Orchestrate", "StreamOrchestrate",
            "SubmitRun", "SyncNamespaceBudget", "ValidateSpec",
        )
    ]  # fmt: skip
    method = grpcurl(
        "-plaintext", scripted_server.target, "describe", "lemon.v1.Orchestrator.Orchestrate"
    )
    assert "rpc Orchestrate ( .lemon.v1.OrchestrateRequest ) returns ( .lemon.v1.RunResponse )" in (
        method.stdout
    ), method.stderr
    described = grpcurl("-plaintext", scripted_server.target, "describe", "lemon.v1.RunResponse")
    assert "repeated .lemon.v1.AgentReport agents" in described.stdout


def test_grpcurl_calls_validate_spec(scripted_server: ServeProcess) -> None:
    bad = (ROOT / "examples" / "k8s" / "03-invalid-reference.yaml").read_text()
    request = json.dumps({"spec": bad, "source": "bad.yaml"})
    done = grpcurl(
        "-plaintext", "-d", request, scripted_server.target, "lemon.v1.Orchestrator/ValidateSpec"
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert "valid" not in answer  # false is proto3's default, left out of JSON
    assert answer["errors"][0]["rendered"] == (
        "bad.yaml:15:7: 'solver' depends on unknown agent 'ghost'"
    )


def test_grpcurl_calls_orchestrate(scripted_server: ServeProcess) -> None:
    request = json.dumps(
        {"task": TASK, "request_id": "from-grpcurl", "options": {"template": "default"}}
    )
    done = grpcurl(
        "-plaintext", "-d", request, scripted_server.target, "lemon.v1.Orchestrator/Orchestrate"
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["request_id"] == "from-grpcurl"  # grpcurl prints proto field names
    assert answer["status"] == "succeeded"
    assert answer["answer"] == "The answer is 42."
    assert int(answer["tokens"]["total"]) > 0


def test_grpcurl_sees_status_codes(scripted_server: ServeProcess) -> None:
    done = grpcurl(
        *("-plaintext", "-d", '{"task": ""}', scripted_server.target),
        "lemon.v1.Orchestrator/Orchestrate",
    )
    assert done.returncode != 0
    assert "Code: InvalidArgument" in done.stderr
    assert "task: must not be empty" in done.stderr


def test_ghz_drives_orchestrate_through_reflection(
    scripted_server: ServeProcess, tmp_path: Path
) -> None:
    ghz = ensure_tool("ghz")
    done = subprocess.run(
        [
            str(ghz),
            *("--insecure", "--call", "lemon.v1.Orchestrator/Orchestrate"),
            *("-d", json.dumps({"task": TASK}), "-n", "200", "-c", "16", "--format", "json"),
            scripted_server.target,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["count"] == 200
    assert report["statusCodeDistribution"] == {"OK": 200}
    assert not report.get("errorDistribution")
    assert report["rps"] > 0
