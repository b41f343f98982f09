"""Helpers of the chart tests: run the real ``helm`` (installed into ``.venv/bin`` by
``scripts/test``) and read what it renders."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import ROOT
from tests.k8s.controlplane import KUBE_VERSION

BIN = Path(sys.executable).parent
HELM = BIN / "helm"
CHARTS = ROOT / "helm"
APP, CRDS = CHARTS / "lemon", CHARTS / "lemon-crds"
VALUES = sorted((Path(__file__).parent / "values").glob("*.yaml"))
BAD_VALUES = sorted((Path(__file__).parent / "bad_values").glob("*.yaml"))
NAMESPACE = "lemon"


class Yaml12Loader(yaml.SafeLoader):
    """SafeLoader reading floats as Kubernetes (YAML 1.2) does: ``2e-08`` is a float, which
    helm's ``toYaml`` writes and PyYAML's YAML 1.1 rules would read as a string."""


Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)"
        r"|\.[0-9_]+(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)


def package_version() -> str:
    with (ROOT / "pyproject.toml").open("rb") as file:
        return str(tomllib.load(file)["project"]["version"])


def helm(
    *args: str, kubeconfig: Path | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """``helm ARGS``; fails the test with helm's stderr when ``check`` and it fails."""
    if not HELM.is_file():
        raise AssertionError(f"{HELM} is missing; run scripts/test (it installs helm)")
    command = [str(HELM), *args]
    if kubeconfig is not None:
        command.append(f"--kubeconfig={kubeconfig}")
    proc = subprocess.run(
        command, capture_output=True, text=True, cwd=ROOT, timeout=180, check=False
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{proc.stderr}")
    return proc


def values_args(values: Iterable[Path]) -> list[str]:
    return [arg for path in values for arg in ("--values", str(path))]


def render(
    chart: Path = APP, values: Iterable[Path] = (), *, sets: Iterable[str] = ()
) -> list[dict[str, Any]]:
    """The objects ``helm template`` renders for ``chart`` (for the test cluster's version)."""
    out = helm(
        "template", "r", str(chart), f"--namespace={NAMESPACE}",
        f"--kube-version={KUBE_VERSION}", *values_args(values),
        *(arg for item in sets for arg in ("--set", item)),
    ).stdout  # fmt: skip
    return [doc for doc in yaml.load_all(out, Loader=Yaml12Loader) if doc]


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


def one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [obj for obj in by_kind(objects, kind) if obj["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, rendered {len(found)}"
    return found[0]


def crd_schema(kind: str) -> dict[str, Any]:
    """The openAPIV3Schema of the generated CRD of ``kind`` (from ``crds/``)."""
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        if crd["spec"]["names"]["kind"] == kind:
            version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
            return dict(version["schema"]["openAPIV3Schema"])
    raise AssertionError(f"no CRD of kind {kind} in crds/")


def operator_rules() -> list[dict[str, Any]]:
    """The rules of the generated ``operator/rbac/clusterrole.yaml``."""
    role = yaml.safe_load((ROOT / "operator/rbac/clusterrole.yaml").read_text(encoding="utf-8"))
    return list(role["rules"])
