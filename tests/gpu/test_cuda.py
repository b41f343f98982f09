"""The gpu tier: what only runs on a CUDA device (deselected elsewhere, see tests/conftest.py).

The packaged policy on the GPU (bfloat16, the ``auto`` choice there) writes a valid spec under
the spec grammar. GPU figures beside it are recorded runs (``experiments/fixed-teams/*-h200/``).
"""

from __future__ import annotations

import pytest

from tests.conftest import write_one_spec

pytestmark = [pytest.mark.gpu, pytest.mark.model]


def test_the_packaged_policy_writes_a_valid_spec_on_the_gpu() -> None:
    from lemon.backends.local import PACKAGED, ModelSource
    from lemon.policy.inference import load_policy

    source = ModelSource(PACKAGED)
    assert source.resolved_device() == "cuda"
    assert source.resolved_dtype() == "bfloat16"
    policy = load_policy("packaged", constrained=True)
    decision = write_one_spec(policy)
    assert not decision.fallback
    assert decision.attempts[0].valid
