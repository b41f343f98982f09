"""`lemon bench grpc` end to end (small), the cluster profile from a LemonCapacityProfile's
status, and `lemon client`/`lemon serve` usage errors."""

from __future__ import annotations

import asyncio
import gc
import json
import warnings
from pathlib import Path

import pytest

from lemon.backends.base import BackendError, GenerationRequest
from lemon.capacity import close_backends
from lemon.orchestration import profile_note
from lemon.spec.models import Capacity
from lemon_service.endpoints import Endpoint
from lemon_service.settings import SettingsError, profile_from_status
from tests.conftest import ROOT, run_lemon
from tests.service.conftest import ServeProcess


def test_bench_grpc_prints_the_load_figures() -> None:
    done = run_lemon(
        *("bench", "grpc", "--json", "--clients", "4", "--per-client", "3", "--single", "3")
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    for key in ("rps", "p50_ms", "p99_ms", "lost", "duplicated", "ghz_rps"):
        assert key in result, key
    # The time outside the engine excludes the engine's own run, which the end-to-end includes.
    assert 0 < result["p50_ms"] < result["e2e_p50_ms"]
    assert result["one_client_engine_wall_p50_ms"] >= 3 * 20  # 3 calls of L = 20 ms
    assert result["server_engine_wall_p50_ms"] >= 3 * 20
    assert result["e2e_over_one_client_p50"] > 0
    assert result["requests"] == 12
    assert result["lost"] == result["duplicated"] == result["errors"] == 0
    assert result["ghz_count"] == 12
    assert result["ghz_status"] == {"OK": 12}
    assert result["rps"] > 0
    assert result["event_loop"] == "uvloop"  # the service extra brings it: the default's loop


def _resource(tmp_path: Path, tiers: list[dict[str, object]]) -> Path:
    resource = {
        "apiVersion": "lemon.ai/v1alpha1",
        "kind": "LemonCapacityProfile",
        "metadata": {"name": "gpu-pool"},
        "spec": {"small": {"model": "HuggingFaceTB/SmolLM2-135M-Instruct"}},
        "status": {"tiers": tiers},
    }
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(resource))
    return path


def test_cluster_profile_uses_the_tier_urls_from_the_status(tmp_path: Path) -> None:
    path = _resource(
        tmp_path,
        [
            {
                "tier": "small",
                "inferenceService": "gpu-pool-small",
                "url": "http://gpu-pool-small.ns.svc",
                "ready": True,
            },
            {
                "tier": "large",
                "inferenceService": "gpu-pool-large",
                "url": "http://gpu-pool-large.ns.svc/",
                "ready": True,
            },
            {"tier": "medium", "inferenceService": "gpu-pool-medium", "ready": False},
        ],
    )
    profile = profile_from_status(path)
    assert profile.name == "gpu-pool"
    assert profile.endpoints == {
        # the operator serves each tier's model under the tier's name
        Capacity.SMALL: Endpoint("http://gpu-pool-small.ns.svc/openai/v1", "small"),
        Capacity.LARGE: Endpoint("http://gpu-pool-large.ns.svc/openai/v1", "large"),
    }
    tiers = profile.run_tiers()
    try:
        assert profile_note(tiers) == (
            "profile gpu-pool: small: small at http://gpu-pool-small.ns.svc/openai/v1 (chat); "
            "medium: no endpoint; large: large at http://gpu-pool-large.ns.svc/openai/v1 (chat)"
        )
        # no URL yet: the medium tier's agents fail as unavailable, no tier borrows another's
        with pytest.raises(BackendError) as failed:
            asyncio.run(tiers.backends[Capacity.MEDIUM].generate(GenerationRequest(messages=())))
        assert failed.value.unavailable
        assert not failed.value.transient  # fails at once, never retried
        assert "tier medium has no endpoint in LemonCapacityProfile gpu-pool's status" in str(
            failed.value.reason
        )
    finally:
        asyncio.run(close_backends(tiers.backends))


@pytest.mark.parametrize(
    ("tiers", "message"),
    [
        ([], "no tier with a URL"),
        ([{"tier": "huge", "inferenceService": "x", "ready": True}], "status.tiers"),
    ],
)
def test_cluster_profile_errors_are_clear(
    tmp_path: Path, tiers: list[dict[str, object]], message: str
) -> None:
    with pytest.raises(SettingsError, match=message):
        profile_from_status(_resource(tmp_path, tiers))


def test_serve_usage_errors() -> None:
    done = run_lemon("serve", "--tls-cert", "x.pem")
    assert done.returncode == 2
    assert "--tls-cert and --tls-key go together" in done.stderr
    done = run_lemon("serve", "--profile", "nosuch")
    assert done.returncode == 2
    assert "unknown capacity profile 'nosuch'" in done.stderr
    done = run_lemon("serve", "--max-concurrency", "0")
    assert done.returncode == 2
    assert "--max-concurrency" in done.stderr
    done = run_lemon(
        "serve", "--profile-status", str(ROOT / "examples" / "k8s" / "02-code-team.yaml")
    )
    assert done.returncode == 2
    assert "not a LemonCapacityProfile resource" in done.stderr


def test_client_commands(scripted_server: ServeProcess) -> None:
    target = ("client", "--target", scripted_server.target)
    good = ROOT / "examples" / "specs" / "01-single-solver.yaml"
    bad = ROOT / "examples" / "k8s" / "03-invalid-reference.yaml"
    valid = run_lemon(*target, "validate", str(good))
    assert valid.returncode == 0, valid.stderr
    invalid = run_lemon(*target, "validate", str(bad))
    assert invalid.returncode == 1
    assert f"{bad}:15:7: 'solver' depends on unknown agent 'ghost'" in invalid.stdout
    ran = run_lemon(*target, "execute", "--spec", str(good), "--task", "2+2?", "--json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["agents"][0]["name"] == "solver"
    streamed = run_lemon(*target, "stream", "--task", "2+2?", "--template", "default")
    assert streamed.returncode == 0, streamed.stderr
    lines = [json.loads(line) for line in streamed.stdout.splitlines()]
    assert "spec_ready" in lines[0]
    assert lines[-1]["result"]["answer"] == "The answer is 42."
    refused = run_lemon(*target, "orchestrate", "--task", " ")
    assert refused.returncode == 1
    assert "INVALID_ARGUMENT: task: must not be empty" in refused.stderr
    missing = run_lemon(*target, "validate", "/no/such/file.yaml")
    assert missing.returncode == 2
    assert "cannot read /no/such/file.yaml" in missing.stderr


@pytest.mark.parametrize("event_loop", ["asyncio", "uvloop"])
def test_serve_answers_and_drains_on_either_event_loop(
    event_loop: str, service_logs: Path, tmp_path: Path
) -> None:
    """``--event-loop``: the server says which loop it runs, answers a run, and drains on
    SIGTERM (the signal handlers and grpc.aio's completion queue work on both loops)."""
    server = ServeProcess("--profile", "scripted", "--event-loop", event_loop, log_dir=service_logs)
    try:
        done = run_lemon(
            "client", "--target", server.target, "orchestrate", "--task", "What is 6 * 7?", "--json"
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["status"] == "succeeded"
    finally:
        server.stop()
    assert server.process.returncode == 0, server.log.read_text()
    assert f"event loop {event_loop})" in server.log.read_text().replace(";", ")")


def test_event_loop_choice_without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    """``auto`` falls back to asyncio's loop where uvloop is not installed; asking for uvloop
    then is a clear error naming the package, and no coroutine is left unawaited."""
    import sys

    from lemon_service.server import event_loop_name, run_serving

    assert event_loop_name("auto") == "uvloop"
    assert event_loop_name("asyncio") == "asyncio"
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop now raises ImportError
    assert event_loop_name("auto") == "asyncio"
    with pytest.raises(SettingsError, match="uvloop is not installed"):
        event_loop_name("uvloop")
    with pytest.raises(SettingsError, match="not one of auto, uvloop, asyncio"):
        event_loop_name("trio")

    async def never() -> None:
        raise AssertionError("must not run")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(SettingsError):
            run_serving(never(), event_loop="uvloop")
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]
