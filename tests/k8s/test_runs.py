"""LemonRun end to end on the real control plane: ``kubectl apply`` a run, the operator hands it
to the orchestration service (a real ``lemon serve`` process), the agents run on real model
servers, the answer lands in status.

The tests stand in for KServe: they start ``lemon serve-model`` processes on loopback (a tiny
random Llama with SmolLM2's tokenizer, as the model tier does) and write their URLs into the
InferenceServices' status, which the operator copies into the profile's status. Where a tier
must be slow, or a policy must write a known spec, a small real OpenAI-compatible HTTP server
(``tests/service/openai_server.py``, fixed latency and answer) serves instead, and says so.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from lemon.resources.lemon_run import LemonRunSpec
from lemon.spec import format_spec, parse_spec
from lemon_api.client import ClientConfig, LemonClient
from lemon_operator import kube
from tests.conftest import LEMON, ROOT
from tests.k8s.conftest import Kubectl, Operator, wait_for
from tests.model.conftest import ModelServer, tiny_model_dir
from tests.service.conftest import OpenAIServer, ServeProcess

__all__ = ["tiny_model_dir"]  # the fixture, used here from the model tier's conftest

pytestmark = pytest.mark.model  # real (tiny) models serve the tiers

PRICES = {"small": 0.000001, "medium": 0.000004}
PROFILE = f"""\
apiVersion: lemon.ai/v1alpha1
kind: LemonCapacityProfile
metadata:
  name: default
spec:
  small: {{model: HuggingFaceTB/SmolLM2-135M-Instruct, costPerToken: {PRICES["small"]}}}
  medium: {{model: HuggingFaceTB/SmolLM2-360M-Instruct, costPerToken: {PRICES["medium"]}}}
"""
TEAM = """\
apiVersion: lemon.ai/v1alpha1
kind: LemonSpec
metadata:
  name: pair
spec:
  agents:
  - {name: planner, role: planner, capacity: small}
  - {name: solver, role: math_solver, capacity: medium, depends_on: [planner]}
  output: solver
"""
TASK = "A shop sells 3 pens for 2 dollars. How much do 12 pens cost?"


def run_manifest(name: str, source: dict[str, Any], **extra: Any) -> str:
    body = {
        "apiVersion": "lemon.ai/v1alpha1",
        "kind": "LemonRun",
        "metadata": {"name": name},
        "spec": {"task": TASK, **source, **extra},
    }
    return yaml.safe_dump(body, sort_keys=False)


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    for entry in ((obj or {}).get("status") or {}).get("conditions") or []:
        if entry["type"] == kind:
            return dict(entry)
    return {}


class Cluster:
    """The test's view: kubectl, a client for quick polls, the operator and the service."""

    def __init__(
        self, kubectl: Kubectl, operator: Operator, service: ServeProcess, namespace: str
    ) -> None:
        self.kubectl = kubectl
        self.operator = operator
        self.service = service
        self.namespace = namespace
        self.client = kube.connect(kubeconfig=kubectl.kubeconfig)

    def apply(self, text: str) -> None:
        self.kubectl("apply", "-n", self.namespace, "-f", "-", stdin=text)

    def run(self, name: str) -> dict[str, Any] | None:
        return self.client.get(kube.RUNS, namespace=self.namespace, name=name)

    def phase(self, name: str) -> str | None:
        return ((self.run(name) or {}).get("status") or {}).get("phase")

    def diagnose(self) -> str:
        objects = self.kubectl(
            "get", "lrun,lspec,lcap,lpol,isvc", "-n", self.namespace, "-o", "yaml", check=False
        )
        service_log = self.service.log.read_text()[-3000:]
        return (
            f"{objects.stdout[-6000:]}\n--- operator log\n{self.operator.tail()}"
            f"\n--- service log\n{service_log}"
        )

    def wait(self, check: Callable[[], Any], *, what: str, timeout: float = 90.0) -> Any:
        return wait_for(check, what=what, timeout=timeout, diagnose=self.diagnose)

    def wait_phase(self, name: str, phase: str, *, timeout: float = 90.0) -> dict[str, Any]:
        self.wait(lambda: self.phase(name) == phase, what=f"{name} {phase}", timeout=timeout)
        found = self.run(name)
        assert found is not None
        return found

    def serve(self, isvc: str, url: str, *, ready: bool = True) -> None:
        """Stand in for KServe: the InferenceService is Ready at ``url``."""
        self.wait(
            lambda: self.client.get(kube.ISVC, namespace=self.namespace, name=isvc),
            what=f"InferenceService {isvc}",
        )
        status = {
            "url": url,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        }
        self.kubectl("patch", "isvc", isvc, "-n", self.namespace, "--subresource=status",
                     "--type=merge", "-p", json.dumps({"status": status}))  # fmt: skip

    def service_run(self, run_id: str) -> Any:
        async def get() -> Any:
            async with LemonClient(ClientConfig(target=self.service.target)) as client:
                return await client.get_run(run_id, timeout=10)

        return asyncio.run(get())

    def executions(self, run_id: str) -> int:
        """How often the service started run ``run_id`` (its log says each start)."""
        return len(
            re.findall(rf"run {re.escape(run_id)} \(.*\): started", self.service.log.read_text())
        )


@pytest.fixture
def cluster(
    kubectl: Kubectl,
    operator_process: Operator,
    orchestration_service: ServeProcess,
    namespace: str,
) -> Cluster:
    return Cluster(kubectl, operator_process, orchestration_service, namespace)


@pytest.fixture(scope="module")
def model_servers(tiny_model_dir: Path) -> Iterator[dict[str, ModelServer]]:
    """``lemon serve-model`` on the tiny model, one process per tier (small, medium), each
    serving its tier's name as the operator starts KServe's (``--model_name=<tier>``)."""
    servers: dict[str, ModelServer] = {}
    try:
        for tier in PRICES:
            servers[tier] = ModelServer(tiny_model_dir, served=(tier,))
        yield servers
    finally:
        for server in servers.values():
            server.kill()


def base_url(server: ModelServer | OpenAIServer) -> str:
    """The server as an InferenceService's status gives it: no path (the runtime's OpenAI API
    is under /openai/v1, which lemon serve-model also answers)."""
    return server.url.removesuffix("/v1")


def serve_profile(cluster: Cluster, servers: dict[str, Any]) -> None:
    cluster.apply(PROFILE)
    for tier, server in servers.items():
        cluster.serve(f"default-{tier}", base_url(server))


def test_run_from_profile_to_answer(
    cluster: Cluster, model_servers: dict[str, ModelServer]
) -> None:
    cluster.apply(PROFILE + "---\n" + TEAM)
    cluster.apply(run_manifest("first", {"specRef": {"name": "pair"}}, maxTokens=8))

    # The tiers are not up yet: Pending, saying so.
    pending = cluster.wait_phase("first", "Pending")
    cluster.wait(
        lambda: "waiting for" in str((cluster.run("first") or {}).get("status", {}).get("message")),
        what="the Pending reason",
    )
    assert condition(cluster.run("first"), "Succeeded")["status"] == "Unknown"
    assert condition(cluster.run("first"), "TiersReady")["reason"] == "TiersNotReady"
    del pending

    for tier, server in model_servers.items():
        cluster.serve(f"default-{tier}", base_url(server))
    run = cluster.wait_phase("first", "Succeeded", timeout=120)
    status = run["status"]
    uid = run["metadata"]["uid"]
    assert status["runId"] == uid
    assert status["answer"]
    assert condition(run, "Succeeded")["status"] == "True"
    assert condition(run, "Succeeded")["observedGeneration"] == 1
    assert condition(run, "Submitted")["status"] == "True"
    assert status["specOrigin"].startswith(f"LemonSpec {cluster.namespace}/pair")
    assert [agent["name"] for agent in status["agents"]] == ["planner", "solver"]
    assert [agent["tier"] for agent in status["agents"]] == ["small", "medium"]

    # What the status says is what the service reported for that run id.
    reported = cluster.service_run(uid).result
    assert status["answer"] == reported.answer
    for agent, report in zip(status["agents"], reported.agents, strict=True):
        assert agent["promptTokens"] == report.prompt_tokens
        assert agent["completionTokens"] == report.completion_tokens
        assert agent["tokens"] == report.prompt_tokens + report.completion_tokens
        assert agent["model"] == report.model
        assert agent["status"] == "succeeded"
    assert status["tokens"]["total"] == reported.tokens.total > 0
    # in tier-priced tokens: each tier's costPerToken relative to the medium tier's
    relative = {tier: price / PRICES["medium"] for tier, price in PRICES.items()}
    expected = sum(agent["tokens"] * relative[agent["tier"]] for agent in status["agents"])
    assert status["cost"] == pytest.approx(expected)
    assert status["costUnit"] == "tier-priced tokens"
    assert status["spec"] == reported.spec
    assert cluster.executions(uid) == 1

    # kubectl shows it; the trace is readable with kubectl and lemon trace.
    table = cluster.kubectl("get", "lrun", "first", "-n", cluster.namespace).stdout.splitlines()
    assert table[0].split() == [
        "NAME", "PHASE", "ANSWER", "TOKENS", "COST", "(TIER-PRICED", "TOKENS)", "BUDGET", "SPENT",
        "AGE",
    ]  # fmt: skip
    assert "Succeeded" in table[1]
    assert str(status["tokens"]["total"]) in table[1]
    trace = cluster.kubectl(
        "get", "configmap", status["trace"], "-n", cluster.namespace, "-o", "jsonpath={.data.trace}"
    ).stdout
    events = [json.loads(line)["event"] for line in trace.splitlines()]
    assert events[-1] == "run_finish"
    assert events.count("agent_finish") == 2
    shown = subprocess.run(
        [str(LEMON), "trace", "-"], input=trace, capture_output=True, text=True, check=True
    ).stdout
    assert "planner" in shown
    assert "solver" in shown


def test_the_readme_path_from_profile_to_answer(
    cluster: Cluster, model_servers: dict[str, ModelServer]
) -> None:
    """README: apply the example profile and the example run with its team written out, wait,
    read the answer (the task-only example: tests/k8s/test_default_policy.py)."""
    for example in ("01-capacity-profile.yaml", "05-run-spec.yaml"):
        cluster.kubectl(
            "apply", "-n", cluster.namespace, "-f", str(ROOT / "examples/k8s" / example)
        )
    for tier, server in model_servers.items():  # KServe's part: small and medium are up
        cluster.serve(f"default-{tier}", base_url(server))
    cluster.kubectl("wait", "-n", cluster.namespace, "--for=condition=Succeeded",
                    "lrun/natalia-team", "--timeout=180s")  # fmt: skip
    listed = cluster.kubectl("get", "lrun", "natalia-team", "-n", cluster.namespace).stdout
    row = listed.splitlines()[1]
    run = cluster.run("natalia-team")
    assert run is not None
    assert row.split()[:2] == ["natalia-team", "Succeeded"]
    assert run["status"]["answerPreview"].split()[0] in row


def test_inline_spec_with_a_cycle_fails_at_once(cluster: Cluster) -> None:
    spec = {
        "agents": [
            {"name": "a", "role": "planner", "capacity": "small", "depends_on": ["b"]},
            {"name": "b", "role": "planner", "capacity": "small", "depends_on": ["a"]},
        ],
        "output": "a",
    }
    cluster.apply(run_manifest("cyclic", {"spec": spec}))
    run = cluster.wait_phase("cyclic", "Failed")
    assert condition(run, "Succeeded")["reason"] == "SpecInvalid"
    assert "dependency cycle" in run["status"]["message"]
    assert cluster.executions(run["metadata"]["uid"]) == 0


def test_spec_is_validated_by_the_crd(cluster: Cluster) -> None:
    """The API server's CEL rules and the operator's pydantic model agree on every combination
    of spec sources; the spec cannot change after creation."""
    sources = {
        "specRef": {"name": "team"},
        "spec": ONE_AGENT,
        "policyRef": {"name": "router"},
    }
    for size in range(4):
        for combo in itertools.combinations(sources, size):
            manifest = run_manifest(f"combo-{size}", {key: sources[key] for key in combo})
            proc = cluster.kubectl("apply", "--dry-run=server", "-n", cluster.namespace,
                                   "-f", "-", stdin=manifest, check=False)  # fmt: skip
            try:
                LemonRunSpec.model_validate(yaml.safe_load(manifest)["spec"])
                valid = True
            except ValidationError:
                valid = False
            assert (proc.returncode == 0) == valid, (combo, proc.stderr)
            if not valid:
                assert "at most one of specRef, spec or policyRef may be given" in proc.stderr
    cluster.apply(run_manifest("fixed", {"specRef": {"name": "absent"}}))
    edit = '[{"op": "replace", "path": "/spec/task", "value": "Another task"}]'
    proc = cluster.kubectl("patch", "lrun", "fixed", "-n", cluster.namespace, "--type=json",
                           "-p", edit, check=False)  # fmt: skip
    assert proc.returncode != 0
    assert "a run's spec is immutable" in proc.stderr
    cluster.wait(
        lambda: condition(cluster.run("fixed"), "Succeeded").get("reason") == "SpecNotFound",
        what="SpecNotFound",
    )
    assert cluster.phase("fixed") == "Pending"


def test_explain_describes_every_field(kubectl: Kubectl) -> None:
    out = kubectl("explain", "lemonrun.spec").stdout
    for field in ("task", "specRef", "spec", "policyRef", "profile", "deadlineSeconds",
                  "maxTokens", "ttlSecondsAfterFinished", "budget"):  # fmt: skip
        assert re.search(rf"^\s+{field}\s", out, re.MULTILINE), field
    assert "at most one of specRef, spec, policyRef" in out
    fields = re.findall(r"^  (\w+)\s+<", out, re.MULTILINE)
    assert len(fields) == 9
    described = kubectl("explain", "lemonrun.status.agents").stdout
    assert "latencySeconds" in described


def canonical(text: str) -> str:
    parsed = parse_spec(text, source="<test>")
    return format_spec(parsed.spec, output=parsed.output)


@pytest.fixture
def slow_tier(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[OpenAIServer]:
    """A tier that takes ``param`` seconds per call (a real HTTP server, not a model)."""
    server = OpenAIServer(tmp_path, latency=getattr(request, "param", 5.0))
    yield server
    server.kill()


ONE_AGENT = {"agents": [{"name": "solver", "role": "math_solver", "capacity": "small"}]}
PAIR = {
    "agents": [
        {"name": "planner", "role": "planner", "capacity": "small"},
        {"name": "solver", "role": "math_solver", "capacity": "medium", "depends_on": ["planner"]},
    ],
    "output": "solver",
}


@pytest.mark.parametrize("slow_tier", [8.0], indirect=True)
def test_a_tier_server_killed_mid_run_fails_the_run_as_tier_unavailable(
    cluster: Cluster, model_servers: dict[str, ModelServer], slow_tier: OpenAIServer
) -> None:
    serve_profile(cluster, {"small": model_servers["small"], "medium": slow_tier})
    cluster.apply(run_manifest("doomed", {"spec": PAIR}, maxTokens=8))
    cluster.wait_phase("doomed", "Running")
    cluster.wait(lambda: slow_tier.count("start") == 1, what="the medium tier's call")
    slow_tier.kill()
    run = cluster.wait_phase("doomed", "Failed", timeout=120)
    # the failure kind the engine set (its tier stayed down through the retries), not a message
    assert condition(run, "Succeeded")["reason"] == "TierUnavailable"
    message = run["status"]["message"]
    assert message.startswith("agent solver (medium) failed"), message
    agents = {agent["name"]: agent for agent in run["status"]["agents"]}
    assert agents["planner"]["status"] == "succeeded"
    assert agents["solver"]["status"] == "failed"
    assert agents["solver"]["error"] in message
    assert "answer" not in run["status"]
    assert cluster.executions(run["metadata"]["uid"]) == 1


@pytest.mark.parametrize("slow_tier", [8.0], indirect=True)
def test_operator_killed_mid_run_then_restarted_executes_the_run_once(
    cluster: Cluster, slow_tier: OpenAIServer
) -> None:
    serve_profile(cluster, {"small": slow_tier, "medium": slow_tier})
    cluster.apply(run_manifest("survivor", {"spec": ONE_AGENT}))
    cluster.wait_phase("survivor", "Running")
    cluster.operator.kill()  # SIGKILL while the service runs the agent
    try:
        time.sleep(1.0)
        assert slow_tier.count("answered") == 0, "the run finished before the kill"
    finally:
        cluster.operator.start()
    run = cluster.wait_phase("survivor", "Succeeded", timeout=120)
    uid = run["metadata"]["uid"]
    assert cluster.executions(uid) == 1
    assert slow_tier.count("start") == 1  # one model call: the agent ran once
    assert run["status"]["answer"] == "The answer is 42."
    log = cluster.operator.log_text()
    assert f"run {uid} submitted" in log
    assert log.count(f"run {uid} submitted") == 1


@pytest.mark.parametrize("slow_tier", [8.0], indirect=True)
def test_operator_killed_before_it_recorded_running_resubmits_and_the_service_runs_it_once(
    cluster: Cluster, slow_tier: OpenAIServer
) -> None:
    """Killed between the submit and the Running write: after the restart the run is
    submitted again under the same id, and the service answers with the run it has."""
    serve_profile(cluster, {"small": slow_tier, "medium": slow_tier})
    cluster.apply(run_manifest("resubmitted", {"spec": ONE_AGENT}))
    cluster.wait(lambda: slow_tier.count("start") == 1, what="the agent's call at the tier")
    cluster.operator.kill()  # the submit is still waiting for the run: no Running yet
    try:
        assert cluster.phase("resubmitted") is None
    finally:
        cluster.operator.start()
    run = cluster.wait_phase("resubmitted", "Succeeded", timeout=120)
    uid = run["metadata"]["uid"]
    assert cluster.executions(uid) == 1
    assert slow_tier.count("start") == 1
    assert f"run {uid} was already on the service: re-attached" in cluster.operator.log_text()


@pytest.mark.parametrize("slow_tier", [8.0], indirect=True)
def test_service_killed_before_running_then_restarted_ends_the_run_once(
    cluster: Cluster, slow_tier: OpenAIServer
) -> None:
    """Killed while the operator's submit still waits (no Running yet): the operator submits
    again to the restarted service, which answers from its journal: interrupted, not rerun."""
    serve_profile(cluster, {"small": slow_tier, "medium": slow_tier})
    cluster.apply(run_manifest("unlucky", {"spec": ONE_AGENT}))
    cluster.wait(lambda: slow_tier.count("start") == 1, what="the agent's call at the tier")
    cluster.service.kill()  # the submit is still waiting for the run: no Running yet
    try:
        # the operator may already have seen the dead service and said so (Pending,
        # ServiceUnavailable); what matters is that it never recorded Running
        assert cluster.phase("unlucky") in (None, "Pending")
    finally:
        cluster.service.restart()
    run = cluster.wait_phase("unlucky", "Failed", timeout=120)
    assert condition(run, "Succeeded")["reason"] == "Interrupted"
    assert "not run again" in run["status"]["message"]
    uid = run["metadata"]["uid"]
    assert cluster.executions(uid) == 1
    time.sleep(1.0)  # a second execution would have reached the tier by now
    assert slow_tier.count("start") == 1  # the spec's one call, never repeated
    assert f"run {uid} was already on the service: re-attached" in cluster.operator.log_text()


@pytest.mark.parametrize("slow_tier", [8.0], indirect=True)
def test_service_killed_mid_run_then_restarted_ends_the_run_once(
    cluster: Cluster, slow_tier: OpenAIServer
) -> None:
    """Killed after Running: the operator's GetRun finds the run in the restarted service's
    journal, failed as interrupted (without a journal it would be ServiceLostRun)."""
    serve_profile(cluster, {"small": slow_tier, "medium": slow_tier})
    cluster.apply(run_manifest("cut-short", {"spec": ONE_AGENT}))
    cluster.wait_phase("cut-short", "Running")
    cluster.service.restart()  # SIGKILL, then a new process on the same port and journal
    run = cluster.wait_phase("cut-short", "Failed", timeout=120)
    assert condition(run, "Succeeded")["reason"] == "Interrupted"
    uid = run["metadata"]["uid"]
    assert cluster.executions(uid) == 1
    time.sleep(1.0)
    assert slow_tier.count("start") == 1
    log = cluster.operator.log_text()
    assert log.count(f"run {uid} submitted") == 1


POLICY_SPEC = """agents:
- name: solver
  role: math_solver
  duties: Solve it step by step and state the number.
  capacity: small
output: solver
"""


def test_a_policy_writes_the_spec_of_a_run_with_policy_ref(
    cluster: Cluster, model_servers: dict[str, ModelServer], tmp_path: Path
) -> None:
    """The policy's InferenceService is stood for by a real HTTP server that answers every
    call with one fixed spec (a scripted policy, not a trained model): what is tested is that
    the spec the run executes is the one the served policy wrote."""
    policy_server = OpenAIServer(tmp_path, latency=0.0, answer=POLICY_SPEC)
    try:
        serve_profile(cluster, model_servers)
        cluster.apply("""\
apiVersion: lemon.ai/v1alpha1
kind: LemonPolicy
metadata:
  name: router
spec:
  versions:
  - {name: v1, checkpoint: "pvc://policies/router/v1", stage: sft}
  servedVersion: v1
""")
        cluster.apply(run_manifest("by-policy", {"policyRef": {"name": "router"}}, maxTokens=8))
        cluster.wait(
            lambda: (
                condition(cluster.run("by-policy"), "Succeeded").get("reason") == "PolicyNotReady"
            ),
            what="PolicyNotReady",
        )
        cluster.serve("router-policy", base_url(policy_server))
        run = cluster.wait_phase("by-policy", "Succeeded", timeout=120)
    finally:
        policy_server.kill()
    status = run["status"]
    assert f"LemonPolicy {cluster.namespace}/router@v1" in status["specOrigin"]
    assert status["spec"] == canonical(POLICY_SPEC)
    assert [agent["name"] for agent in status["agents"]] == ["solver"]
    assert policy_server.count("start") == 1


def test_a_hundred_runs_at_once_all_finish_once(
    cluster: Cluster, model_servers: dict[str, ModelServer]
) -> None:
    serve_profile(cluster, model_servers)
    count = 100
    cluster.apply("---\n".join(
        run_manifest(f"burst-{i}", {"spec": ONE_AGENT}, maxTokens=4) for i in range(count)
    ))  # fmt: skip

    def finished() -> list[dict[str, Any]] | None:
        items = cluster.client.list(kube.RUNS, namespace=cluster.namespace)
        done = [item for item in items if (item.get("status") or {}).get("phase") == "Succeeded"]
        return done if len(done) == count else None

    done = cluster.wait(finished, what=f"{count} runs Succeeded", timeout=300)
    log = cluster.service.log.read_text()
    for item in done:
        uid = item["metadata"]["uid"]
        assert len(re.findall(rf"run {uid} \(.*\): started", log)) == 1, uid
        assert item["status"]["tokens"]["total"] > 0
        assert item["status"]["runId"] == uid


@pytest.mark.parametrize("slow_tier", [60.0], indirect=True)
def test_deleting_a_running_run_cancels_it_on_the_service(
    cluster: Cluster, slow_tier: OpenAIServer
) -> None:
    serve_profile(cluster, {"small": slow_tier, "medium": slow_tier})
    cluster.apply(run_manifest("doomed", {"spec": ONE_AGENT}))
    uid = cluster.wait_phase("doomed", "Running")["metadata"]["uid"]
    cluster.wait(lambda: slow_tier.count("start") == 1, what="the tier's call")
    started = time.monotonic()
    cluster.kubectl("delete", "lrun", "doomed", "-n", cluster.namespace, "--timeout=60s")
    assert time.monotonic() - started < 30
    assert cluster.run("doomed") is None
    state = cluster.service_run(uid)
    assert state.phase == state.CANCELLED
    cluster.wait(lambda: slow_tier.count("disconnected") == 1, what="the tier call dropped")


def test_a_spec_with_a_task_gets_a_run_it_owns(
    cluster: Cluster, model_servers: dict[str, ModelServer]
) -> None:
    serve_profile(cluster, model_servers)
    with_task = TEAM.replace("spec:\n", f"spec:\n  task: {TASK}\n")
    cluster.apply(with_task)
    run = cluster.wait_phase("pair-task-1", "Succeeded", timeout=120)
    owner = run["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("LemonSpec", "pair")
    assert "generation 1, its task" in run["status"]["specOrigin"]

    def spec_run() -> dict[str, Any]:
        found = cluster.client.get(kube.SPECS, namespace=cluster.namespace, name="pair") or {}
        return dict((found.get("status") or {}).get("run") or {})

    cluster.wait(lambda: spec_run().get("phase") == "Succeeded", what="the spec's run status")
    assert spec_run()["answer"] == run["status"]["answer"]
    assert spec_run()["tokens"] == run["status"]["tokens"]["total"]

    # A new task is a new generation, so a new run; the old one goes.
    cluster.apply(with_task.replace(TASK, "What is 6 times 7?"))
    cluster.wait_phase("pair-task-2", "Succeeded", timeout=120)
    cluster.wait(lambda: cluster.run("pair-task-1") is None, what="the old run deleted")


def test_a_finished_run_is_deleted_after_its_ttl(
    cluster: Cluster, model_servers: dict[str, ModelServer]
) -> None:
    serve_profile(cluster, model_servers)
    cluster.apply(
        run_manifest("brief", {"spec": ONE_AGENT}, maxTokens=4, ttlSecondsAfterFinished=2)
    )
    cluster.wait(lambda: cluster.phase("brief") == "Succeeded" or cluster.run("brief") is None,
                 what="finished")  # fmt: skip
    cluster.wait(lambda: cluster.run("brief") is None, what="deleted after its TTL")
    proc = cluster.kubectl("get", "configmap", "brief-trace", "-n", cluster.namespace, check=False)
    assert proc.returncode != 0  # the trace went with it
