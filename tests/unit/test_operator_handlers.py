"""The operator's handlers on the in-memory client (lemon_testing.fake_kube): the reconcile
logic without an API server. The k8s tier runs the same handlers, through kopf, against a real
kube-apiserver."""

from __future__ import annotations

import json
from typing import Any

import yaml

from lemon.resources.lemon_training import produced_version
from lemon_operator import capacity_profiles, kube, manifests, policies, specs, trainings
from lemon_testing.fake_kube import FakeClient, merge_patch
from tests.conftest import ROOT

NS = "team-a"


def load(example: str) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((ROOT / "examples/k8s" / example).read_text())
    body["metadata"]["namespace"] = NS
    return body


def condition(body: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    for entry in ((body or {}).get("status") or {}).get("conditions") or []:
        if entry["type"] == kind:
            return dict(entry)
    return {}


def reconcile_profile(client: FakeClient, name: str = "default") -> None:
    capacity_profiles.reconcile_profile(client, namespace=NS, name=name)


def ready(client: FakeClient, name: str) -> None:
    """Be KServe: the InferenceService serves."""
    client.set_status(
        kube.ISVC,
        namespace=NS,
        name=name,
        status={
            "url": f"http://{name}.example",
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    )


def test_merge_patch_follows_rfc_7386() -> None:
    target = {"a": "b", "c": {"d": "e", "f": "g"}}
    assert merge_patch(target, {"a": "z", "c": {"f": None}}) == {"a": "z", "c": {"d": "e"}}
    assert merge_patch({"a": [1, 2]}, {"a": [3]}) == {"a": [3]}


def test_fake_client_keeps_the_api_servers_bookkeeping() -> None:
    client = FakeClient()
    body = {"metadata": {"name": "p", "namespace": NS}, "spec": {"x": 1}, "status": {"s": 1}}
    assert client.create(kube.POLICIES, body=body)
    assert not client.create(kube.POLICIES, body=body)  # 409
    found = client.get(kube.POLICIES, namespace=NS, name="p")
    assert found is not None
    assert "status" not in found  # created through the main resource: no status
    version = found["metadata"]["resourceVersion"]
    assert client.patch(kube.POLICIES, namespace=NS, name="p", patch={"status": {"s": 2}})
    assert client.get(kube.POLICIES, namespace=NS, name="p") == found  # status ignored
    assert client.patch(kube.POLICIES, namespace=NS, name="p", patch={"spec": {"x": 2}})
    assert client.stored(kube.POLICIES, namespace=NS, name="p")["metadata"]["generation"] == 2  # type: ignore[index]
    stale = client.patch_unless_changed(
        kube.POLICIES, namespace=NS, name="p", resource_version=version, patch={"spec": {}}
    )
    assert stale == "conflict"
    assert client.patch(kube.POLICIES, namespace=NS, name="gone", patch={}) is False
    assert client.delete(kube.POLICIES, namespace=NS, name="p")
    assert client.get(kube.POLICIES, namespace=NS, name="p") is None


def test_profile_owns_one_inference_service_per_tier() -> None:
    client = FakeClient()
    client.put(kube.PROFILES, load("01-capacity-profile.yaml"))
    reconcile_profile(client)
    names = sorted(isvc["metadata"]["name"] for isvc in client.all(kube.ISVC, namespace=NS))
    assert names == ["default-large", "default-medium", "default-small"]
    assert client.event_reasons() == ["Created"] * 3
    profile = client.get(kube.PROFILES, namespace=NS, name="default")
    assert condition(profile, "Ready")["reason"] == "TiersNotReady"
    for name in names:
        ready(client, name)
    capacity_profiles.refresh_profile(client, namespace=NS, name="default")
    profile = client.get(kube.PROFILES, namespace=NS, name="default")
    assert condition(profile, "Ready")["status"] == "True"
    assert [t["url"] for t in profile["status"]["tiers"]] == [  # type: ignore[index]
        "http://default-small.example",
        "http://default-medium.example",
        "http://default-large.example",
    ]
    writes = client.writes
    reconcile_profile(client)  # nothing changed: nothing written
    assert client.writes == writes
    client.patch(kube.PROFILES, namespace=NS, name="default", patch={"spec": {"large": None}})
    reconcile_profile(client)
    assert client.get(kube.ISVC, namespace=NS, name="default-large") is None


def test_a_changed_tier_converges_its_inference_service_in_place() -> None:
    client = FakeClient()
    client.put(kube.PROFILES, load("01-capacity-profile.yaml"))
    reconcile_profile(client)
    before = client.get(kube.ISVC, namespace=NS, name="default-medium")
    assert before is not None
    client.patch(kube.ISVC, namespace=NS, name="default-medium",
                 patch={"metadata": {"labels": {"team": "keeps-this"}}})  # fmt: skip
    client.patch(kube.PROFILES, namespace=NS, name="default",
                 patch={"spec": {"medium": {"runtimeArgs": ["--max-model-len=2048"]}}})  # fmt: skip
    reconcile_profile(client)
    after = client.get(kube.ISVC, namespace=NS, name="default-medium")
    assert after is not None
    assert after["metadata"]["uid"] == before["metadata"]["uid"]  # updated, not recreated
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
    assert after["spec"] != before["spec"]
    assert "--max-model-len=2048" in json.dumps(after["spec"])
    assert after["metadata"]["labels"]["team"] == "keeps-this"  # not the operator's: kept
    assert client.event_reasons() == ["Created"] * 3  # nothing created the second time


def test_an_invalid_profile_says_why() -> None:
    client = FakeClient()
    body = load("01-capacity-profile.yaml")
    body["spec"]["small"]["replicas"] = "many"
    client.put(kube.PROFILES, body)
    reconcile_profile(client)
    profile = client.get(kube.PROFILES, namespace=NS, name="default")
    assert condition(profile, "Ready")["reason"] == "Invalid"
    assert "small.replicas" in condition(profile, "Ready")["message"]
    assert client.events[-1].warning
    assert client.all(kube.ISVC, namespace=NS) == []


def test_spec_waits_for_its_profile_then_its_tiers() -> None:
    client = FakeClient()
    client.put(kube.SPECS, load("02-code-team.yaml"))
    specs.reconcile_spec(client, namespace=NS, name="code-team")
    spec = client.get(kube.SPECS, namespace=NS, name="code-team")
    assert condition(spec, "Validated")["status"] == "True"
    assert condition(spec, "TiersReady")["reason"] == "ProfileNotFound"
    assert spec["status"]["levels"] == [["coder"], ["tests"], ["reviewer"]]  # type: ignore[index]
    client.put(kube.PROFILES, load("01-capacity-profile.yaml"))
    specs.reconcile_spec(client, namespace=NS, name="code-team")  # creates the tiers it needs
    assert len(client.all(kube.ISVC, namespace=NS)) == 3
    assert (
        condition(client.get(kube.SPECS, namespace=NS, name="code-team"), "Ready")["reason"]
        == "TiersNotReady"
    )
    for tier in ("small", "medium", "large"):
        ready(client, f"default-{tier}")
    specs.reconcile_specs_of_profile(client, namespace=NS, profile="default")
    spec = client.get(kube.SPECS, namespace=NS, name="code-team")
    assert condition(spec, "Ready")["status"] == "True"
    assert "Ready" in client.event_reasons()


def test_an_invalid_spec_reports_located_errors_once() -> None:
    client = FakeClient()
    client.put(kube.SPECS, load("03-invalid-reference.yaml"))
    specs.reconcile_spec(client, namespace=NS, name="invalid-reference")
    spec = client.get(kube.SPECS, namespace=NS, name="invalid-reference")
    validated = condition(spec, "Validated")
    assert validated["status"] == "False"
    assert validated["message"].split(":")[0].isdigit()  # LINE:COL: message
    assert [e.reason for e in client.events] == ["Invalid"]
    specs.reconcile_spec(client, namespace=NS, name="invalid-reference")
    assert [e.reason for e in client.events] == ["Invalid"]  # unchanged status: no new event


def test_a_spec_task_runs_as_an_owned_lemonrun_per_generation() -> None:
    client = FakeClient()
    body = load("02-code-team.yaml")
    body["spec"]["task"] = "Write is_prime(n)."
    uid = client.put(kube.SPECS, body)["metadata"]["uid"]

    def spec_status() -> dict[str, Any]:
        specs.reconcile_spec(client, namespace=NS, name="code-team")
        found = client.get(kube.SPECS, namespace=NS, name="code-team")
        return dict((found or {}).get("status") or {})

    assert spec_status()["run"] == {"name": "code-team-task-1"}
    (run,) = client.all(kube.RUNS, namespace=NS)
    assert run["metadata"]["name"] == "code-team-task-1"
    assert [ref["uid"] for ref in run["metadata"]["ownerReferences"]] == [uid]
    assert run["spec"]["task"] == "Write is_prime(n)."
    assert [agent["name"] for agent in run["spec"]["spec"]["agents"]] == ["coder", "tests",
                                                                          "reviewer"]  # fmt: skip
    done = {"phase": "Succeeded", "answer": "def is_prime", "tokens": {"total": 9}}
    client.set_status(kube.RUNS, namespace=NS, name="code-team-task-1", status=done)
    assert spec_status()["run"] == {
        "name": "code-team-task-1", "phase": "Succeeded", "answer": "def is_prime", "tokens": 9,
    }  # fmt: skip

    spec = {**body["spec"], "task": "Write is_even(n)."}  # a new generation: a new run
    client.replace_spec(kube.SPECS, namespace=NS, name="code-team", spec=spec)
    assert spec_status()["run"] == {"name": "code-team-task-2"}  # nothing of the earlier run
    writes = client.writes
    assert spec_status()["run"] == {"name": "code-team-task-2"}
    assert client.writes == writes  # unchanged: nothing written
    assert [r["metadata"]["name"] for r in client.all(kube.RUNS, namespace=NS)] == [
        "code-team-task-2"
    ]
    del spec["task"]  # no task: its run goes, and so does status.run
    client.replace_spec(kube.SPECS, namespace=NS, name="code-team", spec=spec)
    assert "run" not in spec_status()
    assert client.all(kube.RUNS, namespace=NS) == []

    spec["task"] = "Write is_odd(n)."  # a run of that name that is not the spec's: said so
    other = {"apiVersion": kube.RUNS.api_version, "kind": "LemonRun",
             "metadata": {"name": "code-team-task-4", "namespace": NS}, "spec": {}}  # fmt: skip
    client.put(kube.RUNS, other)
    client.replace_spec(kube.SPECS, namespace=NS, name="code-team", spec=spec)
    assert spec_status()["run"] == {"name": "code-team-task-4", "phase": "NameTaken"}
    assert client.get(kube.RUNS, namespace=NS, name="code-team-task-4") is not None


def test_an_object_being_deleted_is_left_alone() -> None:
    client = FakeClient()
    body = load("02-code-team.yaml")
    body["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    client.put(kube.SPECS, body)
    specs.reconcile_spec(client, namespace=NS, name="code-team")
    assert client.writes == 0
    specs.reconcile_spec(client, namespace=NS, name="no-such-spec")
    assert client.writes == 0


def policy(name: str = "planner", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "lemon.ai/v1alpha1",
        "kind": "LemonPolicy",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"autoPromote": True, "versions": [], **spec},
    }


def training(name: str = "sft-1", *, policy_name: str = "planner") -> dict[str, Any]:
    return {
        "apiVersion": "lemon.ai/v1alpha1",
        "kind": "LemonTraining",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "stage": "sft",
            "policy": policy_name,
            "data": {"path": "train.jsonl", "pvc": "lemon-data"},
            "output": {"pvc": "lemon-output", "path": "policies"},
            "image": "ghcr.io/example/lemon-train:0.1.0",
        },
    }


def job_done(client: FakeClient, name: str, *, outcome: str, result: dict[str, Any]) -> None:
    """Be the training operator and the kubelet: the job ends, its Master pod terminated."""
    client.set_status(
        kube.PYTORCHJOBS,
        namespace=NS,
        name=name,
        status={"conditions": [{"type": outcome, "status": "True", "reason": f"Job{outcome}"}]},
    )
    client.add_pod(
        {
            "metadata": {
                "name": f"{name}-master-0",
                "namespace": NS,
                "labels": {manifests.JOB_NAME_LABEL: name, manifests.REPLICA_TYPE_LABEL: "master"},
            },
            "status": {
                "containerStatuses": [
                    {
                        "name": manifests.CONTAINER,
                        "state": {"terminated": {"exitCode": 0, "message": json.dumps(result)}},
                    }
                ]
            },
        }
    )


def test_training_runs_as_a_job_and_publishes_its_version_once() -> None:
    client = FakeClient()
    client.put(kube.POLICIES, policy())
    created = client.put(kube.TRAININGS, training())
    trainings.reconcile_training(client, namespace=NS, name="sft-1")
    assert client.get(kube.PYTORCHJOBS, namespace=NS, name="sft-1") is not None
    assert client.list(kube.Resource("", "v1", "configmaps", "ConfigMap"), namespace=NS)
    version = produced_version("sft-1", created["metadata"]["uid"])
    path = f"/var/lemon/output/policies/planner/{version}"
    job_done(client, "sft-1", outcome="Succeeded", result={"policy": path, "metrics": {"loss": 1}})
    trainings.reconcile_training(client, namespace=NS, name="sft-1")
    status = client.get(kube.TRAININGS, namespace=NS, name="sft-1")["status"]  # type: ignore[index]
    assert status["phase"] == "Succeeded"
    assert status["producedVersion"] == version
    assert status["checkpoint"] == f"pvc://lemon-output/policies/planner/{version}"
    assert status["metrics"] == {"loss": 1}
    assert condition({"status": status}, "Published")["status"] == "True"
    served = client.get(kube.POLICIES, namespace=NS, name="planner")["spec"]  # type: ignore[index]
    assert [v["name"] for v in served["versions"]] == [version]
    assert served["servedVersion"] == version  # autoPromote
    trainings.reconcile_training(client, namespace=NS, name="sft-1")
    trainings.reconcile_trainings_of_policy(client, namespace=NS, policy="planner")
    again = client.get(kube.POLICIES, namespace=NS, name="planner")["spec"]  # type: ignore[index]
    assert len(again["versions"]) == 1


def test_a_failed_job_publishes_nothing() -> None:
    client = FakeClient()
    client.put(kube.POLICIES, policy())
    client.put(kube.TRAININGS, training())
    trainings.reconcile_training(client, namespace=NS, name="sft-1")
    job_done(client, "sft-1", outcome="Failed", result={})
    trainings.reconcile_training(client, namespace=NS, name="sft-1")
    found = client.get(kube.TRAININGS, namespace=NS, name="sft-1")
    assert found["status"]["phase"] == "Failed"  # type: ignore[index]
    assert condition(found, "Published")["reason"] == "JobFailed"
    assert client.get(kube.POLICIES, namespace=NS, name="planner")["spec"]["versions"] == []  # type: ignore[index]


class RacingClient(FakeClient):
    """Another writer adds a version between the publisher's read and its write, once."""

    raced = False

    def patch_unless_changed(self, resource: kube.Resource, **kwargs: Any) -> kube.PatchOutcome:
        if not self.raced:
            self.raced = True
            other = {"name": "other", "checkpoint": "pvc://x/y", "stage": "sft"}
            self.patch(
                resource,
                namespace=kwargs["namespace"],
                name=kwargs["name"],
                patch={"spec": {"versions": [other]}},
            )
        return super().patch_unless_changed(resource, **kwargs)


def test_publishing_rereads_after_a_conflict() -> None:
    client = RacingClient()
    client.put(kube.POLICIES, policy(autoPromote=False))
    outcome = policies.publish(
        client,
        namespace=NS,
        policy="planner",
        version="v2",
        checkpoint="pvc://out/v2",
        stage="sft",
        training="sft-2",
        metrics={},
    )
    assert outcome.published
    spec = client.get(kube.POLICIES, namespace=NS, name="planner")["spec"]  # type: ignore[index]
    assert [v["name"] for v in spec["versions"]] == ["other", "v2"]  # neither write was lost


def test_policy_serves_and_rolls_its_version() -> None:
    client = FakeClient()
    versions = [
        {"name": "v1", "checkpoint": "pvc://out/v1", "stage": "sft"},
        {"name": "v2", "checkpoint": "pvc://out/v2", "stage": "grpo"},
    ]
    client.put(kube.POLICIES, policy(versions=versions, servedVersion="v1"))
    policies.reconcile_policy(client, namespace=NS, name="planner")
    isvc_name = manifests.policy_inference_service_name("planner")
    isvc = client.get(kube.ISVC, namespace=NS, name=isvc_name)
    assert isvc is not None
    assert isvc["metadata"]["annotations"][manifests.POLICY_VERSION_ANNOTATION] == "v1"
    client.patch(
        kube.POLICIES, namespace=NS, name="planner", patch={"spec": {"servedVersion": "v2"}}
    )
    policies.reconcile_policy(client, namespace=NS, name="planner")
    isvc = client.get(kube.ISVC, namespace=NS, name=isvc_name)
    assert isvc["spec"]["predictor"]["model"]["storageUri"] == "pvc://out/v2"  # type: ignore[index]
    assert "Rolled" in client.event_reasons()
    client.patch(
        kube.POLICIES, namespace=NS, name="planner", patch={"spec": {"servedVersion": None}}
    )
    policies.reconcile_policy(client, namespace=NS, name="planner")
    assert client.get(kube.ISVC, namespace=NS, name=isvc_name) is None
