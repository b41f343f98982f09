"""The charts, rendered by the real ``helm``: lint, Kubernetes schemas, RBAC, pods, values.

No cluster needed: ``helm lint --strict`` and ``helm template`` for every values file under
``values/``, each rendered object validated offline by ``kubernetes-validate`` (the Kubernetes
OpenAPI schemas of the test control plane's minor version) and LemonCapacityProfiles by the
generated CRD's schema. Bad values files (``bad_values/``, each naming the error it expects in
``# expect:`` lines) must fail lint and template with that error.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from lemon.policy.defaults import BUILTIN_DEFAULT, BUILTIN_POLICIES
from lemon.resources.lemon_policy import LemonPolicy
from tests.conftest import ROOT
from tests.helm.charts import (
    APP,
    BAD_VALUES,
    BIN,
    CRDS,
    NAMESPACE,
    VALUES,
    by_kind,
    crd_schema,
    helm,
    one,
    operator_rules,
    package_version,
    render,
    values_args,
)
from tests.k8s.controlplane import KUBE_VERSION

VALIDATE_VERSION = KUBE_VERSION.lstrip("v")
WITH_SERVICE = [path for path in VALUES if "operator-only" not in path.name]
# What each values file turns on: its Deployments (release "r") and its LemonCapacityProfile.
RENDERED = {
    "10-defaults.yaml": (["r-lemon-operator", "r-lemon-service"], ["default"]),
    "20-secure.yaml": (["r-lemon-operator", "r-lemon-service"], ["gpu-pool"]),
    "30-operator-only.yaml": (["r-lemon-operator"], []),
    "40-service-only.yaml": (["r-lemon-service"], ["single"]),
    "50-observability.yaml": (["r-lemon-operator", "r-lemon-service"], ["default"]),
}


def _ids(paths: list[Path]) -> list[str]:
    return [path.stem for path in paths]


def _containers(deployment: dict[str, Any]) -> list[dict[str, Any]]:
    return list(deployment["spec"]["template"]["spec"]["containers"])


@pytest.mark.parametrize("chart", [APP, CRDS], ids=["lemon", "lemon-crds"])
def test_charts_lint_strict_with_defaults(chart: Path) -> None:
    out = helm("lint", "--strict", str(chart), f"--kube-version={KUBE_VERSION}").stdout
    assert "0 chart(s) failed" in out


@pytest.mark.parametrize("values", VALUES, ids=_ids(VALUES))
def test_values_file_lints_and_renders_valid_kubernetes_objects(values: Path) -> None:
    lint = helm("lint", "--strict", str(APP), *values_args([values]))
    assert "0 chart(s) failed" in lint.stdout
    objects = render(APP, [values])
    deployments = sorted(d["metadata"]["name"] for d in by_kind(objects, "Deployment"))
    profiles = [p["metadata"]["name"] for p in by_kind(objects, "LemonCapacityProfile")]
    assert (deployments, profiles) == RENDERED[values.name]
    for obj in objects:
        where = f"{values.name}: {obj['kind']} {obj['metadata']['name']}"
        if obj["apiVersion"].startswith("lemon.ai/"):
            try:
                jsonschema.validate(obj, crd_schema(obj["kind"]))
            except jsonschema.ValidationError as error:
                pytest.fail(f"{where} fails its CRD schema: {error.message}")
            continue
        if obj["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # the Prometheus Operator's CRD: test_metrics_... checks its fields
        try:
            kubernetes_validate.validate(obj, VALIDATE_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{where} fails the Kubernetes {VALIDATE_VERSION} schema: {error}")


def test_the_default_lemon_policy_serves_a_builtin_policy_as_the_namespaces_default() -> None:
    policy = one(render(APP), "LemonPolicy", "lemon-default")
    jsonschema.validate(policy, crd_schema("LemonPolicy"))
    spec = LemonPolicy.model_validate(policy).spec  # the operator's own model accepts it
    assert spec.default
    assert spec.served_version == "best-fixed-team"
    served = spec.version("best-fixed-team")
    assert served is not None
    assert served.builtin == BUILTIN_DEFAULT  # LEMON's built-in default, as `lemon run`'s
    assert {v.builtin for v in spec.versions} == set(BUILTIN_POLICIES)
    learned = one(
        render(APP, sets=["defaultPolicy.served=learned"]), "LemonPolicy", "lemon-default"
    )
    assert learned["spec"]["servedVersion"] == "learned"
    assert not by_kind(render(APP, sets=["defaultPolicy.create=false"]), "LemonPolicy")
    refused = helm("template", "r", str(APP), "--set", "defaultPolicy.served=best", check=False)
    assert refused.returncode != 0
    assert "/defaultPolicy/served" in refused.stderr


def test_crd_chart_renders_every_generated_crd_valid_and_kept_on_uninstall() -> None:
    objects = render(CRDS)
    sources = {
        yaml.safe_load(path.read_text(encoding="utf-8"))["metadata"]["name"]: path
        for path in (ROOT / "crds").glob("*.yaml")
    }
    assert {crd["metadata"]["name"] for crd in objects} == set(sources)
    for crd in objects:
        kubernetes_validate.validate(crd, VALIDATE_VERSION, strict=True)
        assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
        source = yaml.safe_load(sources[crd["metadata"]["name"]].read_text(encoding="utf-8"))
        assert crd["spec"] == source["spec"]


@pytest.mark.parametrize("bad", BAD_VALUES, ids=_ids(BAD_VALUES))
def test_bad_values_fail_lint_and_template_with_a_located_error(bad: Path) -> None:
    expected = re.findall(r"^# expect: (.+)$", bad.read_text(encoding="utf-8"), re.MULTILINE)
    assert expected, f"{bad.name} names no expected error"
    template = helm("template", "r", str(APP), *values_args([bad]), check=False)
    lint = helm("lint", "--strict", str(APP), *values_args([bad]), check=False)
    for proc in (template, lint):
        assert proc.returncode != 0, f"{bad.name} was accepted"
        output = proc.stdout + proc.stderr
        assert "values don't meet the specifications of the schema" in output
        for message in expected:
            assert message in output, f"{bad.name}: {message!r} not in:\n{output}"


def test_crd_chart_takes_no_values() -> None:
    proc = helm("template", "r", str(CRDS), "--set", "replicas=2", check=False)
    assert proc.returncode != 0
    assert "additional properties 'replicas' not allowed" in proc.stderr


def test_profile_rules_only_the_api_server_checks_pass_the_values_schema() -> None:
    """The values schema holds the CRD's structural schema; CEL rules (maxReplicas at least
    minReplicas) are the API server's: such a profile renders, and test_install sees it refused."""
    sets = ["capacityProfile.spec.small.minReplicas=3", "capacityProfile.spec.small.maxReplicas=1"]
    profile = one(render(APP, sets=sets), "LemonCapacityProfile", "default")
    assert (profile["spec"]["small"]["minReplicas"], profile["spec"]["small"]["maxReplicas"]) == (
        3,
        1,
    )
    jsonschema.validate(profile, crd_schema("LemonCapacityProfile"))  # no CEL in jsonschema


def test_operator_cluster_role_has_exactly_the_generated_rules() -> None:
    objects = render(APP)
    role = one(objects, "ClusterRole", "r-lemon-operator")
    assert role["rules"] == operator_rules()
    binding = one(objects, "ClusterRoleBinding", "r-lemon-operator")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "r-lemon-operator",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "r-lemon-operator", "namespace": NAMESPACE}
    ]


def test_service_account_may_only_read_capacity_profiles_in_its_namespace() -> None:
    objects = render(APP)
    roles = by_kind(objects, "Role")
    assert [role["metadata"]["name"] for role in roles] == ["r-lemon-service"]
    assert roles[0]["metadata"]["namespace"] == NAMESPACE
    assert roles[0]["rules"] == [
        {
            "apiGroups": ["lemon.ai"],
            "resources": ["lemoncapacityprofiles"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    binding = one(objects, "RoleBinding", "r-lemon-service")
    assert binding["subjects"][0]["name"] == "r-lemon-service"
    assert [r["metadata"]["name"] for r in by_kind(objects, "ClusterRole")] == ["r-lemon-operator"]


@pytest.mark.parametrize("values", VALUES, ids=_ids(VALUES))
def test_every_pod_runs_non_root_read_only_with_probes_and_resources(values: Path) -> None:
    for deployment in by_kind(render(APP, [values]), "Deployment"):
        name = deployment["metadata"]["name"]
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["runAsUser"] != 0, name
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        volumes = {volume["name"]: volume for volume in pod["volumes"]}
        assert "emptyDir" in volumes["tmp"], name
        for container in _containers(deployment):
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, name
            assert context["allowPrivilegeEscalation"] is False, name
            assert context["capabilities"] == {"drop": ["ALL"]}, name
            mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
            assert mounts["/tmp"] == "tmp", name
            for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                assert probe in container, f"{name}: no {probe}"
            assert container["resources"]["requests"]["memory"], name
            assert container["resources"]["limits"]["memory"], name


def test_operator_runs_kopf_with_its_liveness_endpoint_and_namespaces() -> None:
    everywhere = one(render(APP), "Deployment", "r-lemon-operator")
    (container,) = _containers(everywhere)
    assert container["command"][:2] == ["kopf", "run"]
    assert "--module=lemon_operator.main" in container["command"]
    assert container["args"] == ["--liveness=http://0.0.0.0:8080/healthz", "--all-namespaces"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["ports"] == [
        {"name": "health", "containerPort": 8080, "protocol": "TCP"},
        {"name": "metrics", "containerPort": 8081, "protocol": "TCP"},
    ]
    assert everywhere["spec"]["strategy"] == {"type": "Recreate"}

    secure = render(APP, [VALUES[1]])
    (container,) = _containers(one(secure, "Deployment", "r-lemon-operator"))
    assert container["args"] == [
        "--liveness=http://0.0.0.0:9090/healthz",
        "--debug",
        "--namespace=team-a",
        "--namespace=team-b",
    ]
    assert container["ports"][0]["containerPort"] == 9090


def test_service_probes_the_grpc_health_service_and_exposes_its_port() -> None:
    objects = render(APP)
    (container,) = _containers(one(objects, "Deployment", "r-lemon-service"))
    assert container["command"] == ["lemon", "serve"]
    assert "--port=50051" in container["args"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["grpc"] == {"port": 50051}
    service = one(objects, "Service", "r-lemon-service")
    assert service["spec"]["ports"] == [
        {"name": "grpc", "port": 50051, "targetPort": "grpc", "protocol": "TCP",
         "appProtocol": "grpc"},
        {"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP",
         "appProtocol": "http"},
    ]  # fmt: skip
    pod_labels = one(objects, "Deployment", "r-lemon-service")["spec"]["template"]["metadata"]
    assert service["spec"]["selector"].items() <= pod_labels["labels"].items()
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "service"


def test_service_with_token_and_tls_mounts_its_secrets_and_probes_tcp() -> None:
    objects = render(APP, [VALUES[1]])
    deployment = one(objects, "Deployment", "r-lemon-service")
    (container,) = _containers(deployment)
    assert {
        "--port=8443",
        "--max-concurrency=128",
        "--token-file=/var/run/lemon/token/token",
        "--tls-cert=/var/run/lemon/tls/tls.crt",
        "--tls-key=/var/run/lemon/tls/tls.key",
        "--tls-client-ca=/var/run/lemon/client-ca/ca.crt",
    } <= set(container["args"])
    # Kubernetes' gRPC probe speaks plaintext only: with TLS the port is probed over TCP.
    assert container["livenessProbe"]["tcpSocket"] == {"port": "grpc"}
    secrets = {
        volume["name"]: volume["secret"]["secretName"]
        for volume in deployment["spec"]["template"]["spec"]["volumes"]
        if "secret" in volume
    }
    assert secrets == {"token": "lemon-token", "tls": "lemon-tls", "client-ca": "lemon-client-ca"}
    mounts = {mount["name"]: mount for mount in container["volumeMounts"]}
    assert all(mounts[name]["readOnly"] for name in secrets)
    assert one(objects, "Service", "r-lemon-service")["spec"]["type"] == "LoadBalancer"


def test_service_journals_its_runs_on_a_volume_that_outlives_the_container() -> None:
    def service(*sets: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        deployment = one(render(APP, sets=sets), "Deployment", "r-lemon-service")
        (container,) = _containers(deployment)
        volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
        return deployment, container, volumes

    journal = "--run-journal=/var/lib/lemon/runs/runs.sqlite"
    deployment, container, volumes = service()  # default: an emptyDir (container restarts)
    assert journal in container["args"]
    assert {m["name"]: m["mountPath"] for m in container["volumeMounts"]}["runs"] == (
        "/var/lib/lemon/runs"
    )
    assert volumes["runs"] == {"name": "runs", "emptyDir": {"sizeLimit": "1Gi"}}
    assert "strategy" not in deployment["spec"]
    deployment, container, volumes = service("service.runJournal.existingClaim=lemon-runs")
    assert volumes["runs"]["persistentVolumeClaim"] == {"claimName": "lemon-runs"}
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}  # one process per journal
    deployment, container, volumes = service("service.runJournal.enabled=false")
    assert journal not in container["args"]
    assert "runs" not in volumes


def test_service_endpoints_point_at_the_profiles_inference_services() -> None:
    def env(objects: list[dict[str, Any]]) -> dict[str, str]:
        (container,) = _containers(one(objects, "Deployment", "r-lemon-service"))
        return {item["name"]: item.get("value", "") for item in container["env"]}

    derived = env(render(APP))
    for tier in ("small", "medium", "large"):
        assert derived[f"LEMON_{tier.upper()}_URL"] == (
            f"http://default-{tier}-predictor.{NAMESPACE}.svc/openai/v1"
        )
        assert derived[f"LEMON_{tier.upper()}_MODEL"] == tier  # the operator's --model_name
    mixed = env(render(APP, [VALUES[1]]))
    assert mixed["LEMON_SMALL_URL"] == "http://vllm-small.models:8000/v1"
    assert mixed["LEMON_SMALL_MODEL"] == "smollm2"
    assert (
        mixed["LEMON_MEDIUM_URL"] == f"http://gpu-pool-medium-predictor.{NAMESPACE}.svc/openai/v1"
    )
    assert mixed["LEMON_LOG"] == "debug"


def test_disabled_components_render_nothing() -> None:
    operator_only = render(APP, [VALUES[2]])
    assert {obj["metadata"]["name"] for obj in by_kind(operator_only, "Deployment")} == {
        "r-lemon-operator"
    }
    assert not by_kind(operator_only, "LemonCapacityProfile")
    assert not by_kind(operator_only, "Service")
    account = one(operator_only, "ServiceAccount", "lemon-operator-sa")
    assert account["metadata"]["annotations"] == {"example.com/role": "operator"}

    service_only = render(APP, [VALUES[3]])
    assert not by_kind(service_only, "ClusterRole")
    assert not by_kind(service_only, "ServiceAccount")  # an existing one is named instead
    pod = one(service_only, "Deployment", "r-lemon-service")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "existing-sa"
    profile = one(service_only, "LemonCapacityProfile", "single")
    assert set(profile["spec"]) == {"small"}


def test_image_tags_default_to_the_package_version() -> None:
    version = package_version()
    for chart in (APP, CRDS):
        meta = yaml.safe_load((chart / "Chart.yaml").read_text(encoding="utf-8"))
        assert (meta["version"], meta["appVersion"]) == (version, version), chart.name
    images = {
        container["image"]
        for deployment in by_kind(render(APP), "Deployment")
        for container in _containers(deployment)
    }
    assert images == {
        f"ghcr.io/lemon-ai/lemon-operator:{version}",
        f"ghcr.io/lemon-ai/lemon-service:{version}",
    }
    (container,) = _containers(one(render(APP, [VALUES[1]]), "Deployment", "r-lemon-operator"))
    assert container["image"] == "registry.example.com/lemon/operator:0.1.0-rc1"


def test_the_chart_passes_flags_its_programs_accept() -> None:
    """Every flag the Deployments pass exists in the installed ``lemon serve`` and ``kopf run``."""
    objects = render(APP, [VALUES[1]]) + render(APP, [VALUES[2]])
    helps = {}
    for program in (("lemon", "serve"), ("kopf", "run")):
        proc = subprocess.run(
            [str(BIN / program[0]), program[1], "--help"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, f"{' '.join(program)} --help failed:\n{proc.stderr}"
        helps[program] = proc.stdout
    for deployment in by_kind(objects, "Deployment"):
        for container in _containers(deployment):
            program = tuple(container["command"][:2])
            flags = [arg.split("=")[0] for arg in container["command"][2:] + container["args"]]
            for flag in flags:
                listed = rf"(^|[\s,]){re.escape(flag)}(?=[\s,=\]]|$)"
                assert re.search(listed, helps[program], re.MULTILINE), (
                    f"{' '.join(program)} has no {flag}"
                )


@pytest.mark.parametrize("values", WITH_SERVICE, ids=_ids(WITH_SERVICE))
def test_service_profile_resolves_as_lemon_serve_would(
    values: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The profile the service Deployment names resolves with the core's resolver, from the
    environment and the profiles ConfigMap the chart gives the pod: every tier has a backend."""
    from lemon.capacity import resolve_profile

    objects = render(APP, [values])
    (container,) = _containers(one(objects, "Deployment", "r-lemon-service"))
    args = dict(arg.split("=", 1) for arg in container["args"])
    files = []
    if "--profiles" in args:
        (config_map,) = by_kind(objects, "ConfigMap")
        path = tmp_path / "profiles.yaml"
        path.write_text(config_map["data"]["profiles.yaml"], encoding="utf-8")
        files.append(path)
        assert args["--profiles"] == "/etc/lemon/profiles/profiles.yaml"
    for variable in (
        "LEMON_PROFILES",
        *(f"LEMON_{t}_{k}" for t in ("SMALL", "MEDIUM", "LARGE") for k in ("URL", "MODEL")),
    ):
        monkeypatch.delenv(variable, raising=False)
    for item in container["env"]:
        if "value" in item:
            monkeypatch.setenv(item["name"], item["value"])
    profile = resolve_profile(args["--profile"], files=files)
    assert {tier.value for tier in profile.tiers} == {"small", "medium", "large"}
    for backend in profile.tiers.values():
        assert backend.type == "openai"
        assert backend.url


def test_packaged_charts_carry_the_generated_files_not_their_sources(tmp_path: Path) -> None:
    import tarfile

    helm("package", str(APP), str(CRDS), f"--destination={tmp_path}")
    version = package_version()
    with tarfile.open(tmp_path / f"lemon-{version}.tgz") as archive:
        app = set(archive.getnames())
    assert {"lemon/values.schema.json", "lemon/files/operator-rules.yaml"} <= app
    assert "lemon/values.schema.in.json" not in app
    with tarfile.open(tmp_path / f"lemon-crds-{version}.tgz") as archive:
        crds = {Path(name).name for name in archive.getnames() if "/templates/" in name}
    assert crds == {path.name for path in (ROOT / "crds").glob("*.yaml")}


def test_operator_knows_the_service_and_how_to_reach_it() -> None:
    """LemonRuns go to this release's service (or ``operator.serviceTarget``), with the
    service's bearer token and, under TLS, a CA and the operator's client certificate."""

    def operator(objects: list[dict[str, Any]]) -> tuple[dict[str, str], dict[str, Any]]:
        deployment = one(objects, "Deployment", "r-lemon-operator")
        (container,) = _containers(deployment)
        env = {item["name"]: item["value"] for item in container["env"]}
        volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
        return env, volumes

    env, volumes = operator(render(APP))
    assert env["LEMON_SERVICE_TARGET"] == f"r-lemon-service.{NAMESPACE}.svc:50051"
    assert not {"LEMON_SERVICE_TOKEN_FILE", "LEMON_SERVICE_TLS_CA"} & set(env)
    assert set(volumes) == {"tmp"}

    env, volumes = operator(render(APP, [VALUES[1]]))
    assert env["LEMON_SERVICE_TARGET"] == f"r-lemon-service.{NAMESPACE}.svc:8443"
    assert env["LEMON_SERVICE_TOKEN_FILE"] == "/var/run/lemon/token/token"
    assert env["LEMON_SERVICE_TLS_CA"] == "/var/run/lemon/service-ca/ca.crt"
    assert env["LEMON_SERVICE_TLS_CERT"] == "/var/run/lemon/client-tls/tls.crt"
    assert env["LEMON_SERVICE_SERVER_NAME"] == "lemon-service.internal"
    secrets = {name: v["secret"]["secretName"] for name, v in volumes.items() if "secret" in v}
    assert secrets == {
        "token": "lemon-token", "service-ca": "lemon-ca", "client-tls": "lemon-operator-tls",
    }  # fmt: skip

    alone = render(APP, [VALUES[2]])  # no service in this release, no target given
    env, _ = operator(alone)
    assert "LEMON_SERVICE_TARGET" not in env
    elsewhere = render(APP, [VALUES[2]], sets=["operator.serviceTarget=lemon.other.svc:50051"])
    assert operator(elsewhere)[0]["LEMON_SERVICE_TARGET"] == "lemon.other.svc:50051"


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item.get("value", "") for item in container.get("env", [])}


def test_metrics_ports_annotations_and_service_monitors() -> None:
    objects = render(APP)
    for component, port in (("operator", 8081), ("service", 9090)):
        deployment = one(objects, "Deployment", f"r-lemon-{component}")
        annotations = deployment["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
        assert annotations["prometheus.io/port"] == str(port)
        assert annotations["prometheus.io/path"] == "/metrics"
        (container,) = _containers(deployment)
        assert {"name": "metrics", "containerPort": port, "protocol": "TCP"} in container["ports"]
    (operator,) = _containers(one(objects, "Deployment", "r-lemon-operator"))
    assert _env(operator)["LEMON_OPERATOR_METRICS_PORT"] == "8081"
    (service,) = _containers(one(objects, "Deployment", "r-lemon-service"))
    assert "--metrics-port=9090" in service["args"]
    assert not [name for name in _env(service) if name.startswith("OTEL_")]  # tracing off
    assert not by_kind(objects, "ServiceMonitor")

    monitored = render(APP, [ROOT / "tests/helm/values/50-observability.yaml"])
    monitors = {m["metadata"]["name"]: m for m in by_kind(monitored, "ServiceMonitor")}
    assert sorted(monitors) == ["r-lemon-operator", "r-lemon-service"]
    for component, monitor in (("operator", monitors["r-lemon-operator"]),
                               ("service", monitors["r-lemon-service"])):  # fmt: skip
        assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
        assert monitor["metadata"]["labels"]["release"] == "prometheus"
        assert monitor["spec"]["endpoints"] == [
            {"port": "metrics", "path": "/metrics", "interval": "15s"}
        ]
        selector = monitor["spec"]["selector"]["matchLabels"]
        services = [
            s for s in by_kind(monitored, "Service")
            if selector.items() <= s["metadata"]["labels"].items()
            and any(p["name"] == "metrics" for p in s["spec"]["ports"])
        ]  # fmt: skip
        assert len(services) == 1, component
        pods = one(monitored, "Deployment", f"r-lemon-{component}")["spec"]["template"]
        assert services[0]["spec"]["selector"].items() <= pods["metadata"]["labels"].items()
    (traced,) = _containers(one(monitored, "Deployment", "r-lemon-service"))
    assert {k: v for k, v in _env(traced).items() if k.startswith("OTEL_")} == {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector.observability:4318",
        "OTEL_SERVICE_NAME": "r-lemon-service",
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "0.1",
    }

    off = render(APP, sets=["metrics.enabled=false"])
    for component in ("operator", "service"):
        deployment = one(off, "Deployment", f"r-lemon-{component}")
        assert "prometheus.io/scrape" not in (
            deployment["spec"]["template"]["metadata"].get("annotations") or {}
        )
        (container,) = _containers(deployment)
        assert all(p["name"] != "metrics" for p in container["ports"])
        assert not [a for a in container.get("args", []) if a.startswith("--metrics-port")]
