"""The operator's ``/metrics`` against a real API server: scraped over HTTP from the running
operator process, parsed with prometheus_client's own parser, moving as it reconciles."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT
from tests.k8s.conftest import Kubectl, Operator
from tests.k8s.test_operator import TIERS, set_ready, waiter

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(operator: Operator) -> Samples:
    response = httpx.get(f"http://127.0.0.1:{operator.metrics_port}/metrics", timeout=10)
    response.raise_for_status()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_operator_metrics_parse_and_move_with_reconciles(
    kubectl: Kubectl, operator_process: Operator, namespace: str
) -> None:
    wait = waiter(kubectl, operator_process, namespace)
    before: Samples = wait(lambda: _try_scrape(operator_process), what="the metrics endpoint")

    def moved(now: Samples, name: str, **labels: str) -> float:
        return value(now, name, **labels) - value(before, name, **labels)

    kubectl("apply", "-n", namespace, "-f", str(ROOT / "examples/k8s/01-capacity-profile.yaml"))
    kubectl("apply", "-n", namespace, "-f", str(ROOT / "examples/k8s/02-code-team.yaml"))
    kubectl("apply", "-n", namespace, "-f", str(ROOT / "examples/k8s/03-invalid-reference.yaml"))
    ours = {"namespace": namespace}
    managed = {"namespace": namespace, "owner": "LemonCapacityProfile"}
    wait(
        lambda: (
            moved(
                scrape(operator_process),
                "lemon_operator_inference_services",
                **managed,
                ready="false",
            )
            == 3
        ),
        what="three managed InferenceServices, not ready",
    )
    for tier in TIERS:
        set_ready(kubectl, namespace, f"default-{tier}")

    def settled() -> Samples | None:
        now = scrape(operator_process)
        ready = moved(now, "lemon_operator_specs", **ours, condition="Ready", status="True") == 1
        invalid = (
            moved(now, "lemon_operator_specs", **ours, condition="Validated", status="False") == 1
        )
        serving = moved(now, "lemon_operator_inference_services", **managed, ready="true") == 3
        return now if ready and invalid and serving else None

    after: Samples = wait(settled, what="metrics of a Ready spec, an invalid one, ready tiers")
    assert moved(after, "lemon_operator_specs_watched", **ours) == 2
    assert moved(after, "lemon_operator_specs", **ours, condition="Validated", status="True") == 1
    assert moved(after, "lemon_operator_inference_services", **managed, ready="false") == 0
    for kind in ("LemonSpec", "LemonCapacityProfile", "InferenceService"):
        assert moved(after, "lemon_operator_reconciles_total", kind=kind, outcome="succeeded") >= 1
        assert moved(after, "lemon_operator_reconcile_seconds_count", kind=kind) >= 1
    assert (
        moved(after, "lemon_operator_reconciles_total", kind="LemonSpec", outcome="succeeded") >= 2
    )
    assert value(after, "process_resident_memory_bytes") > 0

    kubectl("delete", "lspec", "--all", "-n", namespace, "--timeout=30s")
    wait(
        lambda: moved(scrape(operator_process), "lemon_operator_specs_watched", **ours) == 0,
        what="deleted specs leave the gauge",
    )


def _try_scrape(operator: Operator) -> Samples | None:
    try:
        return scrape(operator)
    except httpx.HTTPError:
        return None
