"""LemonTraining and LemonPolicy: models, the TrainingConfig a spec renders to, the CRDs, and the
operator's pure builders (golden files) and job-state logic."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from lemon.learning.training_config import TrainingConfig, load_config
from lemon.resources import crd
from lemon.resources.lemon_policy import LemonPolicy, PolicySpec
from lemon.resources.lemon_training import (
    LemonTraining,
    TrainingSpec,
    checkpoint_uri,
    output_dir,
    produced_version,
    training_config,
)
from lemon.spec.mutations import PAPER_KINDS
from lemon_operator import manifests, trainings
from tests.conftest import ROOT
from tests.unit.test_crds import walk

GOLDEN = Path(__file__).parent / "golden"
EXAMPLES = ROOT / "examples" / "training"


def example(name: str) -> dict[str, Any]:
    return dict(yaml.safe_load((EXAMPLES / name).read_text(encoding="utf-8")))


def golden(name: str, built: dict[str, Any]) -> None:
    path = GOLDEN / name
    text = yaml.safe_dump(built, sort_keys=False)
    if os.environ.get("LEMON_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{path.name} differs (LEMON_UPDATE_GOLDEN=1)"


def minimal(**extra: Any) -> dict[str, Any]:
    return {
        "stage": "sft",
        "policy": "router",
        "data": {"path": "/data/rows.jsonl"},
        "output": {"pvc": "out"},
        "image": "lemon-train:1",
        **extra,
    }


@pytest.mark.parametrize("name", ["02-sft.yaml", "03-grpo.yaml"])
def test_examples_are_valid_trainings(name: str) -> None:
    LemonTraining.model_validate(example(name))


def test_example_policy_is_valid() -> None:
    policy = LemonPolicy.model_validate(example("01-policy.yaml"))
    assert policy.spec.served_version == "base"


def test_grpo_example_renders_the_config_lemon_train_reads(tmp_path: Path) -> None:
    spec = TrainingSpec.model_validate(example("03-grpo.yaml")["spec"])
    config = training_config(spec, version="router-grpo-0a1b2c3d")
    assert config.stage == "grpo"
    assert config.output_dir == "/var/lemon/output/policies/router/router-grpo-0a1b2c3d"
    assert str(config.data) == "synthetic:512"
    assert config.hyperparameters.group_size == 8
    assert config.counterfactual.lambda_cf == 0.5
    assert config.counterfactual.kinds == list(PAPER_KINDS)
    assert config.rewards.token_cost == 0.02
    assert config.lora is not None
    assert config.lora.target_modules == "all-linear"
    # The ConfigMap's text is a file `lemon train` accepts and reads back to the same config.
    built = manifests.build_training_config_map(
        "router-grpo", namespace="ns", uid="u", config=config
    )
    path = tmp_path / "train.yaml"
    path.write_text(built["data"]["train.yaml"], encoding="utf-8")
    assert load_config(path) == config


def test_data_on_a_claim_and_explicit_lora_modules() -> None:
    spec = TrainingSpec.model_validate(
        minimal(data={"path": "sft/rows.jsonl", "pvc": "data"}, lora={"targetModules": ["q_proj"]})
    )
    config = training_config(spec, version="v", base_model="/var/lemon/output/policies/x")
    assert str(config.data) == "/var/lemon/data/sft/rows.jsonl"
    assert config.base_model == "/var/lemon/output/policies/x"
    assert config.lora is not None
    assert config.lora.target_modules == ["q_proj"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"stage": "ppo"}, "stage"),
        ({"data": {"path": "rows.jsonl"}}, "absolute"),
        ({"data": {"path": "../x", "pvc": "d"}}, "relative"),
        ({"data": {"path": "synthetic:many"}}, "synthetic:<N>"),
        ({"output": {"pvc": "out", "path": "a/../../etc"}}, "inside the claim"),
        ({"output": {"pvc": "Out"}}, "pattern"),
        ({"replicas": 0}, "replicas"),
        ({"hyperparameters": {"groupSize": 1}}, "groupSize"),
        ({"counterfactual": {"kinds": ["swap_roles"]}}, "kinds"),
        ({"rewards": {"tokenCost": -1}}, "tokenCost"),
        ({"imageName": "x"}, "imageName"),
    ],
)
def test_bad_training_specs_are_refused_with_the_field(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        TrainingSpec.model_validate(minimal(**change))


def test_versions_and_locations_are_derived_from_the_training() -> None:
    spec = TrainingSpec.model_validate(minimal(output={"pvc": "out", "path": "p/q"}))
    version = produced_version("sft-1", "8f2e4c1a-1111-2222-3333-444455556666")
    assert version == "sft-1-8f2e4c1a"
    assert produced_version("sft-1", "00000000-1111") != version  # recreated: a new version
    assert output_dir(spec, version) == "/var/lemon/output/p/q/router/sft-1-8f2e4c1a"
    assert checkpoint_uri(spec, version) == "pvc://out/p/q/router/sft-1-8f2e4c1a"


def test_policy_versions_are_unique_and_served_one_exists() -> None:
    entry = {"name": "v1", "checkpoint": "pvc://out/p/v1"}
    with pytest.raises(ValidationError, match="duplicate versions: v1"):
        PolicySpec.model_validate({"versions": [entry, entry]})
    with pytest.raises(ValidationError, match="servedVersion 'v2' is not one of the versions"):
        PolicySpec.model_validate({"versions": [entry], "servedVersion": "v2"})
    with pytest.raises(ValidationError, match="checkpoint"):
        PolicySpec.model_validate({"versions": [{"name": "v1", "checkpoint": "/abs/path"}]})
    spec = PolicySpec.model_validate({"versions": [entry], "servedVersion": "v1"})
    assert spec.version("v1") is not None
    assert spec.version("v0") is None


@pytest.mark.parametrize("kind", ["LemonTraining", "LemonPolicy"])
def test_crds_are_structural(kind: str) -> None:
    schema = crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in walk(schema):
        assert not {"$ref", "anyOf", "oneOf", "allOf", "$defs", "title", "default"} & set(node), (
            path
        )
        assert "type" in node or node.get("x-kubernetes-int-or-string"), f"{path} has no type"
        if node.get("type") == "string" and "enum" not in node and path.startswith(".spec"):
            assert "maxLength" in node, f"{path}: CEL cost needs maxLength"
        if node.get("type") == "array" and path.startswith(".spec"):
            assert "maxItems" in node, f"{path}: CEL cost needs maxItems"
        for bound in ("exclusiveMinimum", "exclusiveMaximum"):
            assert node.get(bound) in (None, True), f"{path}: OpenAPI v3 wants a boolean {bound}"


def test_crd_columns_and_rules() -> None:
    training = crd("LemonTraining")["spec"]
    assert training["names"]["shortNames"] == ["ltrain"]
    columns = [c["name"] for c in training["versions"][0]["additionalPrinterColumns"]]
    assert columns == ["Stage", "Policy", "Phase", "Version", "Age"]
    spec = training["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["x-kubernetes-validations"][0]["rule"] == "self == oldSelf"
    policy = crd("LemonPolicy")["spec"]
    assert policy["names"]["shortNames"] == ["lpol"]
    columns = [c["name"] for c in policy["versions"][0]["additionalPrinterColumns"]]
    assert columns == ["Default", "Served", "Versions", "Ready", "Age"]
    versions = policy["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"
    ]["versions"]
    assert versions["x-kubernetes-list-map-keys"] == ["name"]


def test_pytorch_job_matches_golden() -> None:
    spec = TrainingSpec.model_validate(example("02-sft.yaml")["spec"])
    built = manifests.build_pytorch_job("router-sft", namespace="team-a", uid="0000-uid", spec=spec)
    golden("pytorchjob-sft.yaml", built)
    master = built["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert master["containers"][0]["command"] == manifests.training_command("sft")
    assert built["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 1


def test_policy_inference_service_matches_golden() -> None:
    policy = PolicySpec.model_validate(example("01-policy.yaml")["spec"])
    version = policy.version("base")
    assert version is not None
    built = manifests.build_policy_inference_service(
        "router", namespace="team-a", uid="0000-uid", version=version, serving=policy.serving
    )
    golden("inferenceservice-policy.yaml", built)
    assert built["spec"]["predictor"]["model"]["storageUri"] == version.checkpoint


def _job(*states: tuple[str, str]) -> list[dict[str, str]]:
    return [{"type": kind, "status": status} for kind, status in states]


@pytest.mark.parametrize(
    ("conditions", "phase"),
    [
        ([], None),
        (_job(("Created", "True")), "Created"),
        (_job(("Created", "True"), ("Running", "True")), "Running"),
        (_job(("Created", "True"), ("Running", "False"), ("Restarting", "True")), "Restarting"),
        (_job(("Created", "True"), ("Running", "False"), ("Succeeded", "True")), "Succeeded"),
        (_job(("Created", "True"), ("Running", "True"), ("Failed", "True")), "Failed"),
        (_job(("Suspended", "True")), None),
    ],
)
def test_phase_of_a_job(conditions: list[dict[str, str]], phase: str | None) -> None:
    assert trainings._phase(conditions) == phase


def test_rendered_config_round_trips_through_the_training_config_model() -> None:
    spec = TrainingSpec.model_validate(example("02-sft.yaml")["spec"])
    config = training_config(spec, version="v")
    built = manifests.build_training_config_map("router-sft", namespace="n", uid="u", config=config)
    assert TrainingConfig.model_validate(yaml.safe_load(built["data"]["train.yaml"])) == config
    assert built["metadata"]["ownerReferences"][0]["kind"] == "LemonTraining"


def test_grpo_generation_through_vllm_renders_into_the_training_config() -> None:
    server = TrainingSpec.model_validate(
        minimal(
            stage="grpo",
            generation={"backend": "vllm", "vllmMode": "server",
                        "vllmServerBaseUrl": "http://policy-vllm:8000"},
        )
    )  # fmt: skip
    gen = training_config(server, version="v1").generation
    assert (gen.backend, gen.vllm_mode, gen.vllm_server_base_url) == (
        "vllm",
        "server",
        "http://policy-vllm:8000",
    )
    colocate = TrainingSpec.model_validate(
        minimal(stage="grpo", generation={"backend": "vllm", "vllmGpuMemoryUtilization": 0.5})
    )
    gen = training_config(colocate, version="v1").generation
    assert (gen.vllm_mode, gen.vllm_gpu_memory_utilization) == ("colocate", 0.5)
    assert (
        training_config(TrainingSpec.model_validate(minimal()), version="v1").generation
        == (
            TrainingConfig.model_validate({"stage": "sft", "data": "x.jsonl", "output_dir": "o"})
        ).generation
    )  # the default: the trainer's own generate
    schema = crd("LemonTraining")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    fields = schema["properties"]["spec"]["properties"]["generation"]["properties"]
    assert fields["vllmMode"]["enum"] == ["colocate", "server"]


@pytest.mark.parametrize(
    ("generation", "stage", "message"),
    [
        ({"backend": "vllm", "vllmMode": "server"}, "grpo", "needs vllm_server_base_url"),
        (
            {"backend": "vllm", "vllmServerBaseUrl": "http://v:8000"},
            "grpo",
            "for vllm_mode server, not colocate",
        ),
        ({"vllmServerBaseUrl": "http://v:8000"}, "grpo", "needs backend: vllm"),
        ({"backend": "vllm", "vllmMode": "server", "vllmServerBaseUrl": "v:8000"}, "grpo", "match"),
        ({"backend": "vllm"}, "sft", "SFT samples nothing"),
        ({"backend": "sglang"}, "grpo", "backend"),
    ],
)
def test_a_generation_that_cannot_work_is_refused_with_its_field(
    generation: dict[str, Any], stage: str, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        training_config(
            TrainingSpec.model_validate(minimal(stage=stage, generation=generation)), version="v1"
        )


@pytest.mark.parametrize(
    ("data", "live", "message"),
    [
        ("table:tables/svamp-train", True, "needs hyperparameters.live_calls"),
        ("benchmark:gsm8k", False, "needs table: or synthetic data"),
    ],
)
def test_paid_mutants_need_calls_known_before_they_run(data: str, live: bool, message: str) -> None:
    from lemon.learning.training_config import TrainingConfig

    config = {
        "stage": "grpo",
        "data": data,
        "output_dir": "out",
        "hyperparameters": {"live_calls": live},
        "counterfactual": {"mutants": "paid"},
    }
    with pytest.raises(ValidationError, match=message):
        TrainingConfig.model_validate(config)
    config["hyperparameters"] = {"live_calls": False}
    config["data"] = "synthetic:4"
    assert TrainingConfig.model_validate(config).counterfactual.mutants == "paid"
