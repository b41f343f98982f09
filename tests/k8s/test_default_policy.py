"""A LemonRun that gives only its task, on the real control plane: the namespace's default
LemonPolicy writes the spec; with none, the orchestration service's default (LEMON's built-in
one, the same team `lemon run` chooses); a run naming a missing policy waits, saying which.

The operator and the service are real processes (tests/k8s/conftest.py). The three tiers are a
small real OpenAI-compatible HTTP server (``tests/service/openai_server.py``: a fixed answer,
which says so), standing in for KServe's InferenceServices: what is under test is who chose the
team, not what the models answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from lemon.policy.fixed import BestTeamPolicy
from lemon.spec import format_spec
from lemon.tasks import classify_task
from lemon_operator import kube
from tests.k8s.test_runs import Cluster, base_url, cluster, condition
from tests.service.conftest import OpenAIServer

__all__ = ["cluster"]  # the fixture, used here from test_runs

TASK = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips "
    "in May. How many clips did Natalia sell altogether in April and May?"
)
PROFILE = """\
apiVersion: lemon.ai/v1alpha1
kind: LemonCapacityProfile
metadata:
  name: default
spec:
  small: {model: HuggingFaceTB/SmolLM2-135M-Instruct, costPerToken: 0.000000135}
  medium: {model: Qwen/Qwen2.5-Coder-0.5B-Instruct, costPerToken: 0.000000494}
  large: {model: Qwen/Qwen2.5-Coder-1.5B-Instruct, costPerToken: 0.00000154}
"""
DEFAULT_POLICY = """\
apiVersion: lemon.ai/v1alpha1
kind: LemonPolicy
metadata:
  name: lemon-default
spec:
  default: true
  versions:
  - {name: template, checkpoint: "lemon://best-fixed-team"}
  servedVersion: template
"""


@pytest.fixture(scope="module")
def tier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenAIServer]:
    server = OpenAIServer(tmp_path_factory.mktemp("tier"), latency=0.0, answer="print(72)")
    yield server
    server.kill()


def task_only(name: str) -> str:
    body = {
        "apiVersion": "lemon.ai/v1alpha1",
        "kind": "LemonRun",
        "metadata": {"name": name},
        "spec": {"task": TASK},
    }
    return yaml.safe_dump(body, sort_keys=False)


def serve_three_tiers(cluster: Cluster, tier: OpenAIServer) -> None:
    cluster.apply(PROFILE)
    for name in ("small", "medium", "large"):
        cluster.serve(f"default-{name}", base_url(tier))


def best_team_text() -> str:
    policy = BestTeamPolicy()
    spec = policy.spec(classify_task(TASK))
    return format_spec(spec, output=spec.output)


def test_without_a_namespace_default_the_builtin_default_chooses(
    cluster: Cluster, tier: OpenAIServer
) -> None:
    serve_three_tiers(cluster, tier)
    cluster.apply(task_only("only-task"))
    run = cluster.wait_phase("only-task", "Succeeded", timeout=120)
    status = run["status"]
    policy = BestTeamPolicy()
    kind = classify_task(TASK)
    # LEMON's built-in default, worded as `lemon run` words it, and its team
    assert status["specOrigin"] == policy.origin(kind)
    assert status["spec"] == best_team_text()
    assert [a["name"] for a in status["agents"]] == [a.name for a in policy.spec(kind).agents]
    assert status["costUnit"] == "tier-priced tokens"
    assert status["cost"] > 0
    columns = cluster.kubectl("get", "lrun", "only-task", "-n", cluster.namespace).stdout
    assert "COST (TIER-PRICED TOKENS)" in columns.splitlines()[0]


def test_a_namespace_default_policy_writes_a_task_only_runs_spec(
    cluster: Cluster, tier: OpenAIServer
) -> None:
    serve_three_tiers(cluster, tier)
    cluster.apply(DEFAULT_POLICY)
    cluster.wait(
        lambda: (
            condition(
                cluster.client.get(
                    kube.POLICIES, namespace=cluster.namespace, name="lemon-default"
                ),
                "Ready",
            ).get("reason")
            == "BuiltIn"
        ),
        what="the built-in version Ready",
    )
    policies = cluster.kubectl("get", "lpol", "-n", cluster.namespace).stdout
    assert "DEFAULT" in policies.splitlines()[0]
    isvcs = cluster.kubectl("get", "isvc", "-n", cluster.namespace, "-o", "json").stdout
    assert "lemon-default-policy" not in isvcs  # the service runs a built-in version itself
    cluster.apply(task_only("by-default"))
    run = cluster.wait_phase("by-default", "Succeeded", timeout=120)
    status = run["status"]
    kind = classify_task(TASK)
    named = f"default LemonPolicy {cluster.namespace}/lemon-default@template"
    assert status["specOrigin"] == f"{named}: {BestTeamPolicy().origin(kind)}"
    assert status["spec"] == best_team_text()
    state = cluster.service_run(run["status"]["runId"])
    assert state.result.spec_choice == 3  # SPEC_CHOICE_DEFAULT_POLICY


def test_a_run_naming_a_missing_policy_is_not_ready_saying_which(
    cluster: Cluster, tier: OpenAIServer
) -> None:
    serve_three_tiers(cluster, tier)
    body = json.loads(json.dumps(yaml.safe_load(task_only("by-ghost"))))
    body["spec"]["policyRef"] = {"name": "ghost"}
    cluster.apply(yaml.safe_dump(body))
    cluster.wait(
        lambda: condition(cluster.run("by-ghost"), "Submitted").get("reason") == "PolicyNotFound",
        what="PolicyNotFound",
    )
    run = cluster.run("by-ghost")
    assert run is not None
    assert run["status"]["phase"] == "Pending"
    message = f"policyRef names LemonPolicy ghost, and {cluster.namespace} has none"
    assert message in run["status"]["message"]
    succeeded = condition(run, "Succeeded")
    assert (succeeded["status"], succeeded["reason"]) == ("Unknown", "PolicyNotFound")


def test_two_sources_are_refused_by_the_api_server(cluster: Cluster) -> None:
    body: dict[str, Any] = yaml.safe_load(task_only("two"))
    body["spec"]["policyRef"] = {"name": "a"}
    body["spec"]["specRef"] = {"name": "b"}
    done = cluster.kubectl(
        "apply", "-n", cluster.namespace, "-f", "-", stdin=yaml.safe_dump(body), check=False
    )
    assert done.returncode != 0
    assert "at most one of specRef, spec or policyRef may be given" in done.stderr
