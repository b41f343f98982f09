"""The real CRDs of the systems the operator writes to (and KServe's huggingface runtime),
vendored at pinned releases.

The operator creates KServe ``InferenceService`` objects and Kubeflow ``PyTorchJob`` objects; a
real install of either refuses what its CRD's schema does not allow. The tests install those
CRDs, byte for byte as the projects release them, into the test API server, so it refuses the
same. They live in ``tests/k8s/fixtures/`` with ``SOURCES.json`` naming, for each file, the Go
module and release it comes from, its path inside the module and its sha256.

``python -m tests.k8s.vendored_crds vendor`` downloads the pinned modules through the Go module
proxy (``go mod download``; a module zip holds the repository's whole tree), copies the files
and their licences and rewrites ``SOURCES.json``; ``check`` verifies the files against it.
To move to another release, change the versions in ``PINNED`` and run ``vendor``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "FIXTURES",
    "HUGGINGFACE_RUNTIME",
    "INFERENCESERVICE_CRD",
    "PINNED",
    "PYTORCHJOB_CRD",
    "SOURCES",
    "Pinned",
    "check",
    "main",
    "vendor",
]

FIXTURES = Path(__file__).parent / "fixtures"
SOURCES = FIXTURES / "SOURCES.json"
_COMMAND = "python -m tests.k8s.vendored_crds"


@dataclass(frozen=True, slots=True)
class Pinned:
    """One file taken from one Go module release."""

    module: str
    version: str
    path: str  # inside the module's tree
    licence: str  # the module's licence file, copied beside the CRD

    @property
    def file(self) -> Path:
        return FIXTURES / Path(self.path).name

    @property
    def licence_file(self) -> Path:
        return FIXTURES / f"LICENSE.{self.module.rsplit('/', 1)[-1]}"

    @property
    def url(self) -> str:
        repo = self.module.removeprefix("github.com/")
        return f"https://github.com/{repo}/blob/{self.version}/{self.path}"


# KServe 0.20.0 (the newest release the Go module proxy serves here; it refuses 0.21.0) has
# serving.kserve.io/v1beta1, the version the operator writes, as its only version; its install
# applies config/crd/full unchanged (the kustomize patches there target the removed
# apiextensions v1beta1, or add a cert-manager annotation for its webhooks). training-operator
# 1.9.4 is the newest release of the kubeflow.org/v1 PyTorchJob API the proxy serves (Kubeflow
# Trainer 2 replaces PyTorchJob with TrainJob); its manifests apply manifests/base/crds
# unchanged. KServe's and the training operator's admission webhooks check more than the
# schemas; they do not run here.
PINNED = (
    Pinned(
        module="github.com/kserve/kserve",
        version="v0.20.0",
        path="config/crd/full/serving.kserve.io_inferenceservices.yaml",
        licence="LICENSE",
    ),
    # Not a CRD: the ClusterServingRuntime KServe installs for `modelFormat: huggingface`, the
    # runtime the operator's InferenceServices select (they name a format, not a runtime).
    Pinned(
        module="github.com/kserve/kserve",
        version="v0.20.0",
        path="config/runtimes/kserve-huggingfaceserver.yaml",
        licence="LICENSE",
    ),
    Pinned(
        module="github.com/kubeflow/training-operator",
        version="v1.9.4",
        path="manifests/base/crds/kubeflow.org_pytorchjobs.yaml",
        licence="LICENSE",
    ),
)
INFERENCESERVICE_CRD = PINNED[0].file
HUGGINGFACE_RUNTIME = PINNED[1].file
PYTORCHJOB_CRD = PINNED[2].file


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _download(module: str, version: str) -> dict[str, Any]:
    """``go mod download -json``: the module's directory in the module cache and its go.sum
    hash."""
    if shutil.which("go") is None:
        raise SystemExit("vendored_crds: the Go toolchain (`go`) is needed to download modules")
    with tempfile.TemporaryDirectory() as work:
        Path(work, "go.mod").write_text("module lemon.local/vendor\n\ngo 1.22\n")
        proc = subprocess.run(
            ["go", "mod", "download", "-json", f"{module}@{version}"],
            cwd=work,
            env={**os.environ, "GOFLAGS": "-mod=mod"},
            capture_output=True,
            text=True,
            check=False,
        )
    info: dict[str, Any] = json.loads(proc.stdout) if proc.stdout.strip() else {}
    if proc.returncode != 0 or "Dir" not in info:
        reason = info.get("Error") or proc.stderr.strip()
        raise SystemExit(f"vendored_crds: go mod download {module}@{version} failed: {reason}")
    return info


def vendor() -> list[dict[str, str]]:
    """Copy every pinned file (and its module's licence) into ``FIXTURES``; write SOURCES.json."""
    records = []
    for pinned in PINNED:
        info = _download(pinned.module, pinned.version)
        root = Path(info["Dir"])
        shutil.copyfile(root / pinned.path, pinned.file)
        shutil.copyfile(root / pinned.licence, pinned.licence_file)
        pinned.file.chmod(0o644)
        pinned.licence_file.chmod(0o644)
        records.append(
            {
                "file": pinned.file.name,
                "module": pinned.module,
                "version": pinned.version,
                "path": pinned.path,
                "url": pinned.url,
                "sha256": _sha256(pinned.file),
                "module_sum": str(info.get("Sum", "")),  # go.sum's h1: hash of the module zip
                "licence": pinned.licence_file.name,
            }
        )
    SOURCES.write_text(json.dumps(records, indent=2) + "\n", encoding="utf-8")
    return records


def check() -> list[str]:
    """Problems with the vendored files: missing, not matching SOURCES.json or ``PINNED``."""
    problems = []
    records = {r["file"]: r for r in json.loads(SOURCES.read_text(encoding="utf-8"))}
    for pinned in PINNED:
        record = records.get(pinned.file.name)
        if record is None:
            problems.append(f"{pinned.file.name}: not in {SOURCES.name}")
            continue
        wanted = (pinned.module, pinned.version, pinned.path)
        if (record["module"], record["version"], record["path"]) != wanted:
            problems.append(f"{pinned.file.name}: {SOURCES.name} records another source")
        if not pinned.file.is_file():
            problems.append(f"{pinned.file.name}: missing (run: {_COMMAND} vendor)")
        elif _sha256(pinned.file) != record["sha256"]:
            problems.append(f"{pinned.file.name}: sha256 differs from {SOURCES.name}")
        if not pinned.licence_file.is_file():
            problems.append(f"{pinned.licence_file.name}: missing")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=_COMMAND, description=__doc__)
    parser.add_argument("command", choices=["vendor", "check"])
    args = parser.parse_args(argv)
    if args.command == "vendor":
        for record in vendor():
            print(f"{record['file']}: {record['module']}@{record['version']} {record['sha256']}")
    problems = check()
    for problem in problems:
        print(f"vendored_crds: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
