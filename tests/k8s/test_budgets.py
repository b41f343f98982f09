"""A namespace's LemonBudget on the real control plane: LemonRuns applied at once share it, and
together they never spend past it, counted at the tier; its status shows what was spent and
what remains; a run it stopped says so (``NamespaceBudgetExceeded``); a LemonRun's own budget
is checked by the API server and shown by ``kubectl get lrun``; and RBAC can let a user create
runs without letting them raise the budget.

The operator and the service are real processes (tests/k8s/conftest.py); the tiers are a small
real OpenAI-compatible HTTP server (``tests/service/openai_server.py``: whitespace words as
tokens, ``max_tokens`` honoured, each call's reported tokens in its log).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from lemon.budget import PROMPT_ALLOWANCE
from lemon_operator import kube
from tests.k8s.test_default_policy import serve_three_tiers
from tests.k8s.test_runs import Cluster, cluster, condition
from tests.service.conftest import OpenAIServer

__all__ = ["cluster"]  # the fixture, used here from test_runs

TASK = "A shop sells 3 pens for 2 dollars. How much do 12 pens cost?"
MAX_TOKENS = 200
ANSWER = " ".join("a" for _ in range(MAX_TOKENS))
"""Tokens of one byte and a space: the meter's bound of a prompt (its bytes) stays within a
few times what the tier counts, so the budget below can be set between the two."""
CHAIN = {
    "agents": [
        {"name": "planner", "role": "planner", "capacity": "small"},
        {"name": "solver", "role": "math_solver", "capacity": "small", "depends_on": ["planner"]},
    ],
    "output": "solver",
}
RUNS = 4


@pytest.fixture(scope="module")
def tier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenAIServer]:
    server = OpenAIServer(tmp_path_factory.mktemp("budget-tier"), latency=0.2, answer=ANSWER)
    yield server
    server.kill()


def run_manifest(name: str, **extra: Any) -> str:
    body = {
        "apiVersion": "lemon.ai/v1alpha1",
        "kind": "LemonRun",
        "metadata": {"name": name},
        "spec": {"task": TASK, "spec": CHAIN, "maxTokens": MAX_TOKENS, **extra},
    }
    return yaml.safe_dump(body, sort_keys=False)


def budget_manifest(tokens: int) -> str:
    body = {
        "apiVersion": "lemon.ai/v1alpha1",
        "kind": "LemonBudget",
        "metadata": {"name": "tenant"},
        "spec": {"tokens": tokens, "windowSeconds": 3600},
    }
    return yaml.safe_dump(body, sort_keys=False)


def tier_tokens(tier: OpenAIServer) -> list[int]:
    """The tokens the tier reported for each call it answered, in order."""
    return [
        int(line.split()[1]) + int(line.split()[2])
        for line in tier.events()
        if line.startswith("usage ")
    ]


def finished(cluster: Cluster, name: str) -> dict[str, Any]:
    cluster.wait(
        # a bound on a hang, not a speed check: the module's first run also waits for the
        # operator to see the tiers ready, minutes on a loaded two-core machine
        lambda: cluster.phase(name) in ("Succeeded", "Failed"),
        what=f"{name} done",
        timeout=300,
    )
    found = cluster.run(name)
    assert found is not None
    return found


def test_a_namespace_budget_shared_by_concurrent_runs_is_never_exceeded(
    cluster: Cluster, tier: OpenAIServer
) -> None:
    serve_three_tiers(cluster, tier)
    # one run without a budget: what a run spends here, counted at the tier
    cluster.apply(run_manifest("measure"))
    measured = finished(cluster, "measure")
    assert measured["status"]["phase"] == "Succeeded", cluster.diagnose()
    one_run = sum(tier_tokens(tier))
    assert measured["status"]["tokens"]["total"] == one_run
    planner = next(a for a in measured["status"]["agents"] if a["name"] == "planner")["tokens"]
    # the most the meter reserves for the solver's call: its prompt's bytes (as the trace has
    # it, a few bytes over), the chat template's allowance and max_tokens
    trace = cluster.kubectl(
        "get", "configmap", measured["status"]["trace"], "-n", cluster.namespace, "-o", "json"
    )
    prompts = {
        event["agent"]: event["prompt"]
        for event in map(json.loads, json.loads(trace.stdout)["data"]["trace"].splitlines())
        if event["event"] == "agent_start"
    }
    solver_bound = len(prompts["solver"].encode()) + PROMPT_ALLOWANCE + MAX_TOKENS
    # enough that once the four planners spent theirs a solver's whole call still fits (so
    # one run at least succeeds), less than four runs spend (so one at least is stopped)
    least, most = 4 * planner + solver_bound, 4 * one_run
    assert least < most, (least, most)  # the set-up
    limit = (least + most) // 2
    cluster.apply(budget_manifest(limit))
    cluster.wait(
        lambda: (
            condition(
                cluster.client.get(kube.BUDGETS, namespace=cluster.namespace, name="tenant"),
                "Synced",
            ).get("status")
            == "True"
        ),
        what="the LemonBudget synced with the service",
    )
    before = len(tier_tokens(tier))
    cluster.apply("---\n".join(run_manifest(f"shared-{n}") for n in range(RUNS)))
    runs = [finished(cluster, f"shared-{n}") for n in range(RUNS)]

    spent_at_tier = sum(tier_tokens(tier)[before:])
    assert spent_at_tier <= limit, cluster.diagnose()
    succeeded = [r for r in runs if r["status"]["phase"] == "Succeeded"]
    stopped = [r for r in runs if r["status"]["phase"] == "Failed"]
    assert succeeded, "a budget a solver's call fits after every planner ran none of four"
    assert stopped, "a budget below four runs' spending let four run"
    for run in stopped:
        assert condition(run, "Succeeded")["reason"] == "NamespaceBudgetExceeded"
        budget = run["status"]["budget"]
        assert budget["stoppedBy"] == "Namespace"
        assert f"LemonBudget {cluster.namespace}/tenant" in budget["reason"]
    for run in runs:  # what each run spent, as its status says, adds up to the tier's count
        assert run["status"]["budget"]["namespaceBudget"].startswith(
            f"LemonBudget {cluster.namespace}/tenant"
        )
    assert sum(r["status"]["budget"]["spent"]["tokens"] for r in runs) == spent_at_tier

    def status() -> dict[str, Any]:
        found = cluster.client.get(kube.BUDGETS, namespace=cluster.namespace, name="tenant")
        return dict((found or {}).get("status") or {})

    cluster.wait(
        lambda: (status().get("spent") or {}).get("tokens") == spent_at_tier,
        what="the LemonBudget's status to show what was spent",
        timeout=30,
    )
    shown = status()
    assert shown["remaining"]["tokens"] == limit - spent_at_tier
    assert shown["runs"] == RUNS
    assert shown["stoppedRuns"] == len(stopped)
    table = cluster.kubectl("get", "lbud", "tenant", "-n", cluster.namespace).stdout
    assert table.splitlines()[0].split()[:2] == ["NAME", "TOKENS"]
    assert str(limit) in table.splitlines()[1]


def test_a_runs_own_budget_is_checked_by_the_api_server_and_shown(
    cluster: Cluster, tier: OpenAIServer
) -> None:
    refused = cluster.kubectl(
        "apply", "-n", cluster.namespace, "-f", "-",
        stdin=run_manifest("zero", budget={"tokens": 0}), check=False,
    )  # fmt: skip
    assert refused.returncode != 0
    assert "spec.budget.tokens" in refused.stderr
    empty = cluster.kubectl(
        "apply", "-n", cluster.namespace, "-f", "-",
        stdin=run_manifest("empty", budget={}), check=False,
    )  # fmt: skip
    assert empty.returncode != 0
    assert "spec.budget" in empty.stderr

    serve_three_tiers(cluster, tier)
    # far below the chain's estimate (an upper bound: a given spec no table measured)
    cluster.apply(run_manifest("tight", budget={"tokens": 20}))
    run = finished(cluster, "tight")
    assert run["status"]["phase"] == "Failed"
    outcome = condition(run, "Succeeded")
    assert outcome["reason"] == "BudgetRefused"
    assert "spec.budget tokens=20" in outcome["message"]
    assert run["status"]["budget"]["stoppedBy"] == "Refused"
    assert run["status"]["budget"]["spent"]["tokens"] == 0

    cluster.apply(run_manifest("roomy", budget={"tokens": 100000, "wallSeconds": 60}))
    run = finished(cluster, "roomy")
    assert run["status"]["phase"] == "Succeeded", cluster.diagnose()
    budget = run["status"]["budget"]
    assert budget["limits"] == {"tokens": 100000, "wallSeconds": 60}
    assert budget["spent"]["tokens"] == run["status"]["tokens"]["total"]
    assert budget["remaining"]["tokens"] == 100000 - budget["spent"]["tokens"]
    assert "reason" not in budget
    header, row = cluster.kubectl(
        "get", "lrun", "roomy", "-n", cluster.namespace
    ).stdout.splitlines()
    assert "BUDGET" in header
    assert "SPENT" in header
    assert "tokens=100000,wall=60s" in row


def test_a_run_author_cannot_raise_the_namespace_budget(cluster: Cluster) -> None:
    """A Role that lets a user create LemonRuns gives no verb on LemonBudgets: a separate kind
    with its own RBAC, checked by the real API server's authorizer."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "run-author"},
        "rules": [
            {
                "apiGroups": ["lemon.ai"],
                "resources": ["lemonruns"],
                "verbs": ["create", "get", "list", "watch", "delete"],
            },
            {"apiGroups": ["lemon.ai"], "resources": ["lemonbudgets"], "verbs": ["get", "list"]},
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "run-author"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "run-author"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "author"}],
    }
    cluster.apply(json.dumps(role) + "\n---\n" + json.dumps(binding))
    cluster.apply(budget_manifest(1000))

    def can(verb: str, resource: str) -> str:
        answer = cluster.kubectl(
            "auth", "can-i", verb, f"{resource}.lemon.ai", "-n", cluster.namespace,
            "--as", "author", check=False,
        )  # fmt: skip
        return answer.stdout.strip()

    assert can("create", "lemonruns") == "yes"
    assert can("get", "lemonbudgets") == "yes"
    for verb in ("patch", "update", "delete", "create"):
        assert can(verb, "lemonbudgets") == "no", verb
    raised = cluster.kubectl(
        "patch", "lbud", "tenant", "-n", cluster.namespace, "--as", "author", "--type=merge",
        "-p", json.dumps({"spec": {"tokens": 10**9}}), check=False,
    )  # fmt: skip
    assert raised.returncode != 0
    assert "forbidden" in raised.stderr.lower()
    found = cluster.client.get(kube.BUDGETS, namespace=cluster.namespace, name="tenant")
    assert found is not None
    assert found["spec"]["tokens"] == 1000
