"""The vendored KServe and Kubeflow CRDs are the released files, type their whole ``spec``, and
the operator's manifests fit them (an offline check; ``tests/k8s/test_real_schemas.py`` asks the
real API server)."""

from __future__ import annotations

import copy
import functools
from typing import Any

import jsonschema
import pytest
import yaml

from tests.k8s import vendored_crds
from tests.k8s.manifest_cases import REFUSED, operator_manifests
from tests.unit.test_crds import walk

CRDS = {"InferenceService": vendored_crds.INFERENCESERVICE_CRD,
        "PyTorchJob": vendored_crds.PYTORCHJOB_CRD}  # fmt: skip


def test_vendored_files_are_the_recorded_releases() -> None:
    assert vendored_crds.check() == []


@functools.cache
def _schema(kind: str) -> dict[str, Any]:
    document = yaml.load(CRDS[kind].read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
    assert document["spec"]["names"]["kind"] == kind
    (version,) = document["spec"]["versions"]  # one served version: v1beta1 / v1
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_the_whole_spec_is_typed(kind: str) -> None:
    """No ``x-kubernetes-preserve-unknown-fields`` anywhere under ``spec``: the API server
    knows every field an object may have, so it can refuse the rest."""
    spec = _schema(kind)["properties"]["spec"]
    nodes = walk(spec, ".spec")
    assert len(nodes) > 1000, "a trimmed schema, not the released one"
    kept = [path for path, node in nodes if node.get("x-kubernetes-preserve-unknown-fields")]
    assert kept == []


def _closed(node: Any) -> Any:
    """The schema as JSON Schema that refuses unknown fields, as the API server's strict field
    validation does (structural schemas prune unknown fields; JSON Schema ignores them)."""
    if isinstance(node, list):
        return [_closed(item) for item in node]
    if not isinstance(node, dict):
        return node
    closed = {key: _closed(value) for key, value in node.items()}
    if "properties" in node and "additionalProperties" not in node:
        closed["additionalProperties"] = False
    return closed


@functools.cache
def _validator(kind: str) -> jsonschema.Draft4Validator:
    return jsonschema.Draft4Validator(_closed(copy.deepcopy(_schema(kind))))


def _path(error: jsonschema.ValidationError) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)


def _errors(manifest: dict[str, Any]) -> list[str]:
    errors = _validator(manifest["kind"]).iter_errors(manifest)
    return sorted(f"{_path(error).lstrip('.')}: {error.message}" for error in errors)


@pytest.mark.parametrize("case", sorted(operator_manifests("ns")))
def test_operator_manifests_fit_the_real_schemas(case: str) -> None:
    assert _errors(operator_manifests("ns")[case]) == []


@pytest.mark.parametrize("refused", REFUSED, ids=lambda refused: refused.case)
def test_the_real_schemas_refuse_what_they_do_not_allow(refused: Any) -> None:
    errors = _errors(refused.manifest("ns"))
    assert errors, f"{refused.case}: accepted"
    assert any(refused.field.rsplit(".", 1)[-1] in error for error in errors), errors


def test_the_model_format_selects_kserves_huggingface_runtime() -> None:
    """The operator names a model format, not a runtime: KServe picks the ClusterServingRuntime
    that auto-selects it. KServe's own runtime for `huggingface` must be that one, and the
    `--model_name` the operator passes overrides the runtime's (KServe appends a model's args
    after the runtime container's, and the server's argument parser keeps the last)."""
    runtime = yaml.safe_load(vendored_crds.HUGGINGFACE_RUNTIME.read_text(encoding="utf-8"))
    assert runtime["kind"] == "ClusterServingRuntime"
    formats = runtime["spec"]["supportedModelFormats"]
    (container,) = runtime["spec"]["containers"]
    assert "--model_name={{.Name}}" in container["args"]
    services = [m for m in operator_manifests("ns").values() if m["kind"] == "InferenceService"]
    assert services
    for service in services:
        model = service["spec"]["predictor"]["model"]
        wanted = model["modelFormat"]
        assert "runtime" not in model  # selected by format
        assert any(
            f["name"] == wanted["name"]
            and f.get("autoSelect") is True
            and wanted.get("version", f.get("version")) == f.get("version")
            for f in formats
        ), (wanted, formats)
        assert model["args"][0].startswith("--model_name=")
