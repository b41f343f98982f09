"""The generated CRDs on a real API server: explain, printer columns, admission checks."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT
from tests.k8s.conftest import Kubectl

VALID = """\
apiVersion: lemon.ai/v1alpha1
kind: LemonSpec
metadata:
  name: {name}
spec:
  agents:
  - name: planner
    role: planner
    capacity: small
  - name: solver
    role: math_solver
    capacity: medium
    depends_on: [planner]
  output: solver
"""


def test_explain_describes_the_fields(kubectl: Kubectl) -> None:
    out = kubectl("explain", "lemonspec.spec.agents").stdout
    assert "The agents (1 to 64 by default)" in out
    assert "depends_on" in out
    assert "Names of the agents whose outputs this agent reads" in out
    out = kubectl("explain", "lcap.spec.small.runtimeArgs").stdout
    assert "vLLM" in out


def test_short_names_and_printer_columns(kubectl: Kubectl, namespace: str) -> None:
    kubectl("apply", "-n", namespace, "-f", "-", stdin=VALID.format(name="columns"))
    kubectl("apply", "-n", namespace, "-f", str(ROOT / "examples/k8s/01-capacity-profile.yaml"))
    header = kubectl("get", "lspec", "-n", namespace).stdout.splitlines()[0].split()
    assert header == ["NAME", "PROFILE", "OUTPUT", "VALIDATED", "READY", "AGE"]
    row = kubectl("get", "lcap", "-n", namespace).stdout.splitlines()[1].split()
    assert row[:4] == [
        "default",
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        "Qwen/Qwen2.5-Coder-0.5B-Instruct",
        "hf://Qwen/Qwen2.5-Coder-1.5B-Instruct",
    ]


def _mutated(old: str, new: str) -> str:
    text = VALID.format(name="bad")
    assert old in text
    return text.replace(old, new)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (_mutated("depends_on: [planner]", "depends_on: [solver]"), "cannot depend on itself"),
        (_mutated("output: solver", "output: ghost"), "output must name one of the agents"),
        (_mutated("name: solver", "name: planner"), "Duplicate value"),
        (_mutated("[planner]", "[planner, planner]"), "Duplicate value"),
        (_mutated("capacity: medium", "capacity: huge"), 'supported values: "small"'),
        (_mutated("name: solver", "name: Solver"), "should match"),
        (_mutated("role: planner", "role: planner\n    color: red"), 'unknown field "spec.agents'),
        (VALID.format(name="bad").split("  agents:")[0] + "  agents: []\n", "at least 1 items"),
    ],
    ids=["self-dependency", "unknown-output", "duplicate-agent", "duplicate-dependency",
         "unknown-capacity", "bad-name", "unknown-field", "no-agents"],
)  # fmt: skip
def test_invalid_specs_are_refused_at_admission(
    kubectl: Kubectl, namespace: str, text: str, message: str
) -> None:
    proc = kubectl("apply", "-n", namespace, "-f", "-", stdin=text, check=False)
    assert proc.returncode != 0, f"accepted:\n{text}"
    assert message in proc.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("spec: {}", "at least one tier"),
        ("spec:\n  small: {model: a/b, minReplicas: 3, maxReplicas: 2}", "at least minReplicas"),
        ("spec:\n  small: {model: not a model}", "spec.small.model"),
        ("spec:\n  small: {model: a/b, costPerToken: -1}", "spec.small.costPerToken"),
    ],
    ids=["no-tier", "replica-range", "bad-model", "negative-cost"],
)
def test_invalid_profiles_are_refused_at_admission(
    kubectl: Kubectl, namespace: str, text: str, message: str
) -> None:
    head = "apiVersion: lemon.ai/v1alpha1\nkind: LemonCapacityProfile\nmetadata: {name: bad}\n"
    proc = kubectl("apply", "-n", namespace, "-f", "-", stdin=head + text, check=False)
    assert proc.returncode != 0, f"accepted:\n{text}"
    assert message in proc.stderr


def test_examples_are_accepted_as_written(kubectl: Kubectl, namespace: str) -> None:
    for path in sorted((ROOT / "examples/k8s").glob("*.yaml")):
        kubectl("apply", "--dry-run=server", "-n", namespace, "-f", str(path))
    kubectl("apply", "--dry-run=server", "-n", namespace, "-f",
            str(ROOT / "examples/specs/04-code-team.lemonspec.yaml"))  # fmt: skip
