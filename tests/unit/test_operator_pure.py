"""The operator's pure parts: manifests (golden files), statuses, rendering, RBAC freshness, the
reconcile metrics around handlers."""

from __future__ import annotations

import asyncio
import inspect
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from lemon.resources import CapacityProfileSpec
from lemon.spec import Capacity, SpecError, parse_spec
from lemon_operator import manifests, metrics, rbac, specs, statuses
from tests.conftest import ROOT

GOLDEN = Path(__file__).parent / "golden"
PROFILE = yaml.safe_load((ROOT / "examples/k8s/01-capacity-profile.yaml").read_text())


@pytest.mark.parametrize("tier", list(Capacity), ids=str)
def test_inference_service_matches_golden(tier: Capacity) -> None:
    profile = CapacityProfileSpec.model_validate(PROFILE["spec"])
    built = manifests.build_inference_service(
        "default", namespace="team-a", uid="0000-uid", tier=tier, spec=profile.tiers()[tier]
    )
    path = GOLDEN / f"inferenceservice-{tier.value}.yaml"
    text = yaml.safe_dump(built, sort_keys=False)
    if os.environ.get("LEMON_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{path.name} differs (LEMON_UPDATE_GOLDEN=1)"


def test_long_profile_names_are_shortened_stably() -> None:
    long = "a" * 60
    name = manifests.inference_service_name(long, Capacity.LARGE)
    assert len(name) <= 45
    assert name.endswith("-large")
    assert name == manifests.inference_service_name(long, Capacity.LARGE)
    assert name != manifests.inference_service_name("a" * 59, Capacity.LARGE)


def test_profile_needs_a_tier_and_a_sane_replica_range() -> None:
    with pytest.raises(ValueError, match="at least one tier"):
        CapacityProfileSpec.model_validate({})
    with pytest.raises(ValueError, match="at least minReplicas"):
        CapacityProfileSpec.model_validate(
            {"small": {"model": "a/b", "minReplicas": 2, "maxReplicas": 1}}
        )


def test_merge_conditions_keeps_transition_time_while_status_holds() -> None:
    old = [{"type": "Ready", "status": "False", "lastTransitionTime": "T0"}]
    same = statuses.condition("Ready", False, reason="R", message="m", generation=1, at="T1")
    flipped = statuses.condition("Ready", True, reason="R", message="m", generation=1, at="T2")
    assert statuses.merge_conditions(old, [same])[0]["lastTransitionTime"] == "T0"
    assert statuses.merge_conditions(old, [flipped])[0]["lastTransitionTime"] == "T2"


def test_tier_status_reads_kserve_ready() -> None:
    isvc: dict[str, Any] = {
        "status": {"url": "http://x", "conditions": [{"type": "Ready", "status": "True"}]}
    }
    status = statuses.tier_status(Capacity.SMALL, name="p-small", isvc=isvc)
    assert (status.ready, status.url) == (True, "http://x")
    assert not statuses.tier_status(Capacity.SMALL, name="p-small", isvc=None).ready
    isvc["status"]["address"] = {"url": "http://p-small-predictor.ns.svc.cluster.local"}
    local = statuses.tier_status(Capacity.SMALL, name="p-small", isvc=isvc)
    assert local.url == "http://p-small-predictor.ns.svc.cluster.local"  # in-cluster callers


def test_rendered_resource_locates_errors_in_the_example_file() -> None:
    path = ROOT / "examples/k8s/03-invalid-reference.yaml"
    data = yaml.safe_load(path.read_text())
    text = specs.render_resource(name=data["metadata"]["name"], spec=data["spec"])
    assert text == path.read_text()
    with pytest.raises(SpecError) as caught:
        parse_spec(text)
    assert [(i.line, i.column) for i in caught.value.issues] == [(15, 7)]


def test_rendering_orders_fields_canonically_whatever_the_stored_order() -> None:
    stored = {"output": "a", "agents": [{"role": "planner", "name": "a", "capacity": "small"}]}
    text = specs.render_resource(name="x", spec=stored)
    assert text.index("agents:") < text.index("output:")
    assert text.index("name: a") < text.index("role: planner")


def test_rbac_file_is_fresh() -> None:
    assert (ROOT / rbac.PATH).read_text(encoding="utf-8") == rbac.render(), (
        "run python -m lemon_operator.rbac"
    )


def test_async_handlers_are_counted_by_outcome_and_timed() -> None:
    """A LemonRun's daemon work is a coroutine: ``reconciled`` must await it (kopf sees an async
    handler), and count it succeeded, failed or cancelled."""

    def sample(name: str, **labels: str) -> float:
        return metrics.REGISTRY.get_sample_value(name, {"kind": "LemonRun", **labels}) or 0.0

    outcomes = ("succeeded", "failed", "cancelled")
    before = {o: sample("lemon_operator_reconciles_total", outcome=o) for o in outcomes}
    timed = sample("lemon_operator_reconcile_seconds_count")

    @metrics.reconciled("LemonRun")
    async def handler(*, how: str) -> str:
        await asyncio.sleep(0)
        if how == "fail":
            raise RuntimeError("boom")
        if how == "hang":
            await asyncio.sleep(60)
        return how

    assert inspect.iscoroutinefunction(handler)
    assert handler.__name__ == "handler"

    async def scenario() -> None:
        assert await handler(how="ok") == "ok"
        with pytest.raises(RuntimeError):
            await handler(how="fail")
        hanging = asyncio.ensure_future(handler(how="hang"))
        await asyncio.sleep(0.01)
        hanging.cancel()
        with pytest.raises(asyncio.CancelledError):
            await hanging

    asyncio.run(scenario())
    moved = {o: sample("lemon_operator_reconciles_total", outcome=o) - before[o] for o in outcomes}
    assert moved == {"succeeded": 1, "failed": 1, "cancelled": 1}
    assert sample("lemon_operator_reconcile_seconds_count") - timed == 3
