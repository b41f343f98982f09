"""The operator against a real API server: the test stands in for KServe's controller."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import ROOT
from tests.k8s.conftest import Kubectl, Operator, wait_for

TIERS = ("small", "medium", "large")


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    for entry in ((obj or {}).get("status") or {}).get("conditions") or []:
        if entry["type"] == kind:
            return dict(entry)
    return {}


def get(kubectl: Kubectl, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
    proc = kubectl("get", kind, name, "-n", namespace, "-o", "json", check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def set_ready(kubectl: Kubectl, namespace: str, name: str, *, ready: bool = True) -> None:
    status = {
        "url": f"http://{name}.{namespace}.example.com",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    kubectl("patch", "isvc", name, "-n", namespace, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": status}))  # fmt: skip


def waiter(kubectl: Kubectl, operator: Operator, namespace: str):  # type: ignore[no-untyped-def]
    def diagnose() -> str:
        objects = kubectl("get", "lspec,lcap,isvc", "-n", namespace, "-o", "yaml", check=False)
        return f"{objects.stdout[-6000:]}\n--- operator log\n{operator.tail()}"

    def wait(check, *, what: str, timeout: float = 60.0):  # type: ignore[no-untyped-def]
        return wait_for(check, what=what, timeout=timeout, diagnose=diagnose)

    return wait


def test_profile_and_spec_lifecycle(
    kubectl: Kubectl, operator_process: Operator, namespace: str
) -> None:
    wait = waiter(kubectl, operator_process, namespace)
    kubectl("apply", "-n", namespace, "-f", str(ROOT / "examples/k8s/01-capacity-profile.yaml"))
    kubectl("apply", "-n", namespace, "-f", str(ROOT / "examples/k8s/02-code-team.yaml"))
    profile = get(kubectl, namespace, "lcap", "default")
    assert profile is not None

    def isvcs() -> list[dict[str, Any]]:
        return list(kubectl.json("get", "isvc", "-n", namespace)["items"])

    wait(lambda: len(isvcs()) == 3, what="three InferenceServices")
    by_name = {item["metadata"]["name"]: item for item in isvcs()}
    assert sorted(by_name) == sorted(f"default-{tier}" for tier in TIERS)
    small = by_name["default-small"]
    assert small["metadata"]["ownerReferences"][0]["uid"] == profile["metadata"]["uid"]
    model = small["spec"]["predictor"]["model"]
    assert model["modelFormat"] == {"name": "huggingface"}
    assert "--model_id=HuggingFaceTB/SmolLM2-135M-Instruct" in model["args"]
    assert "--max-model-len=4096" in model["args"]
    assert by_name["default-large"]["spec"]["predictor"]["model"]["storageUri"] == (
        "hf://Qwen/Qwen2.5-Coder-1.5B-Instruct"
    )

    def spec() -> dict[str, Any] | None:
        return get(kubectl, namespace, "lspec", "code-team")

    wait(lambda: condition(spec(), "Validated").get("status") == "True", what="Validated")
    status = wait(lambda: (spec() or {}).get("status", {}).get("tiers") and spec()["status"],
                  what="tiers in status")  # fmt: skip
    assert status["order"] == ["coder", "tests", "reviewer"]
    assert status["levels"] == [["coder"], ["tests"], ["reviewer"]]
    assert status["output"] == "reviewer"
    assert status["observedGeneration"] == 1
    assert condition(spec(), "TiersReady")["status"] == "False"
    assert condition(spec(), "Ready")["status"] == "False"

    for tier in TIERS:
        set_ready(kubectl, namespace, f"default-{tier}")
    wait(lambda: condition(spec(), "Ready").get("status") == "True", what="Ready")
    tiers = {entry["tier"]: entry for entry in spec()["status"]["tiers"]}  # type: ignore[index]
    assert tiers["small"]["url"] == f"http://default-small.{namespace}.example.com"
    assert all(entry["ready"] for entry in tiers.values())
    wait(lambda: condition(get(kubectl, namespace, "lcap", "default"), "Ready").get("status")
         == "True", what="profile Ready")  # fmt: skip
    profile_tiers = get(kubectl, namespace, "lcap", "default")["status"]["tiers"]  # type: ignore[index]
    assert [entry["tier"] for entry in profile_tiers] == list(TIERS)

    events = kubectl.json("get", "events", "-n", namespace,
                          "--field-selector=involvedObject.name=code-team")["items"]  # fmt: skip
    assert {"Validated", "Ready"} <= {event["reason"] for event in events}

    # Readiness is followed both ways.
    set_ready(kubectl, namespace, "default-medium", ready=False)
    wait(lambda: condition(spec(), "Ready").get("status") == "False", what="Ready=False")
    assert "medium" in condition(spec(), "TiersReady")["message"]
    set_ready(kubectl, namespace, "default-medium")
    wait(lambda: condition(spec(), "Ready").get("status") == "True", what="Ready again")

    # An edit is reconciled and observed.
    edit = '[{"op": "replace", "path": "/spec/agents/1/capacity", "value": "medium"}]'
    kubectl("patch", "lspec", "code-team", "-n", namespace, "--type=json", "-p", edit)
    wait(lambda: (spec() or {}).get("status", {}).get("observedGeneration") == 2,
         what="observedGeneration 2")  # fmt: skip

    # Deleting cleans up: no finalizer left behind, the InferenceServices go with the profile.
    kubectl("delete", "lspec", "code-team", "-n", namespace, "--timeout=30s")
    assert spec() is None
    kubectl("delete", "lcap", "default", "-n", namespace, "--timeout=30s")
    wait(lambda: not isvcs(), what="InferenceServices deleted")
    assert get(kubectl, namespace, "lcap", "default") is None


def test_invalid_spec_is_not_validated_with_line_and_message(
    kubectl: Kubectl, operator_process: Operator, namespace: str
) -> None:
    wait = waiter(kubectl, operator_process, namespace)
    path = ROOT / "examples/k8s/03-invalid-reference.yaml"
    kubectl("apply", "-n", namespace, "-f", str(path))

    def validated() -> dict[str, Any]:
        return condition(get(kubectl, namespace, "lspec", "invalid-reference"), "Validated")

    wait(lambda: validated().get("status") == "False", what="Validated=False")
    # The position is that of the dangling name in the example file (written in canonical layout).
    line = path.read_text().splitlines().index("    - ghost") + 1
    assert validated()["message"] == f"{line}:7: 'solver' depends on unknown agent 'ghost'"
    assert validated()["reason"] == "Invalid"
    status = get(kubectl, namespace, "lspec", "invalid-reference")["status"]  # type: ignore[index]
    assert status["errors"] == [validated()["message"]]
    assert "order" not in status
    selector = "--field-selector=involvedObject.name=invalid-reference"
    events = kubectl.json("get", "events", "-n", namespace, selector)["items"]
    assert any(e["reason"] == "Invalid" and e["type"] == "Warning" for e in events)

    fix = '[{"op": "replace", "path": "/spec/agents/1/depends_on/0", "value": "planner"}]'
    kubectl("patch", "lspec", "invalid-reference", "-n", namespace, "--type=json", "-p", fix)
    wait(lambda: validated().get("status") == "True", what="Validated after the fix")
    status = get(kubectl, namespace, "lspec", "invalid-reference")["status"]  # type: ignore[index]
    assert "errors" not in status
    assert condition({"status": status}, "TiersReady")["reason"] == "ProfileNotFound"


def test_a_profile_created_later_brings_the_spec_along(
    kubectl: Kubectl, operator_process: Operator, namespace: str
) -> None:
    wait = waiter(kubectl, operator_process, namespace)
    kubectl("apply", "-n", namespace, "-f", str(ROOT / "examples/k8s/02-code-team.yaml"))

    def tiers_ready() -> dict[str, Any]:
        return condition(get(kubectl, namespace, "lspec", "code-team"), "TiersReady")

    wait(lambda: tiers_ready().get("reason") == "ProfileNotFound", what="ProfileNotFound")
    kubectl("apply", "-n", namespace, "-f", str(ROOT / "examples/k8s/01-capacity-profile.yaml"))
    wait(lambda: tiers_ready().get("reason") == "TiersNotReady", what="TiersNotReady")
    for tier in TIERS:
        set_ready(kubectl, namespace, f"default-{tier}")
    wait(lambda: tiers_ready().get("status") == "True", what="TiersReady")


def test_profile_edits_reach_the_inference_services(
    kubectl: Kubectl, operator_process: Operator, namespace: str
) -> None:
    wait = waiter(kubectl, operator_process, namespace)
    kubectl("apply", "-n", namespace, "-f", str(ROOT / "examples/k8s/01-capacity-profile.yaml"))
    kubectl("apply", "-n", namespace, "-f", str(ROOT / "examples/k8s/02-code-team.yaml"))

    def model(tier: str) -> dict[str, Any]:
        isvc = get(kubectl, namespace, "isvc", f"default-{tier}") or {}
        return dict(isvc.get("spec", {}).get("predictor", {}).get("model", {}))

    wait(lambda: model("large"), what="the large tier")
    assert model("large")["storageUri"] == "hf://Qwen/Qwen2.5-Coder-1.5B-Instruct"
    # From a storage URI to a Hugging Face id: the old storageUri must go, not linger.
    edit = {"spec": {"large": {"model": "Qwen/Qwen2.5-14B-Instruct", "runtimeArgs": []}}}
    kubectl("patch", "lcap", "default", "-n", namespace, "--type=merge", "-p", json.dumps(edit))
    wait(lambda: "--model_id=Qwen/Qwen2.5-14B-Instruct" in model("large").get("args", []),
         what="the new large model")  # fmt: skip
    assert "storageUri" not in model("large")
    assert model("large")["args"] == ["--model_name=large", "--model_id=Qwen/Qwen2.5-14B-Instruct"]

    # Removing a tier the spec uses deletes its InferenceService and the spec says why.
    kubectl("patch", "lcap", "default", "-n", namespace, "--type=json",
            "-p", '[{"op": "remove", "path": "/spec/medium"}]')  # fmt: skip
    wait(lambda: get(kubectl, namespace, "isvc", "default-medium") is None, what="medium gone")

    def tiers_ready() -> dict[str, Any]:
        return condition(get(kubectl, namespace, "lspec", "code-team"), "TiersReady")

    wait(lambda: tiers_ready().get("reason") == "TierNotInProfile", what="TierNotInProfile")
    assert tiers_ready()["message"] == "profile default has no medium tier"
