"""The chart tests' k8s part (test_install.py) starts its own control plane; build its binaries
after collection, outside any test's timeout, as tests/k8s/conftest.py does (a no-op once
cached). Failures surface in the test's fixture, never as a skip."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from tests.k8s.controlplane import ControlPlaneError, ensure_binaries


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    here = Path(__file__).parent
    if not any(
        item.get_closest_marker("k8s") and here in Path(str(item.fspath)).parents
        for item in session.items
    ):
        return
    # On failure the install fixture calls ensure_binaries again and fails with the reason.
    with contextlib.suppress(ControlPlaneError):
        ensure_binaries()
