"""Shared fixtures: paths to the repository's example specs and a CLI runner."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# The persistent call cache stays off in tests unless a test turns it on (with its own file):
# a cache shared across test runs would answer calls whose counts the tests check.
os.environ.setdefault("LEMON_CALL_CACHE", "off")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples" / "specs").glob("*.yaml"))
LEMON = Path(sys.executable).with_name("lemon")


def require_extra(extra: str, *modules: str) -> None:
    """Fail, never skip, when a tier's modules are missing, naming the extra that installs them
    (call at a test module's top, before importing them)."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        pytest.fail(
            f"these tests need the `{extra}` extra ({', '.join(missing)} not installed): "
            f".venv/bin/python -m pip install -e '.[{extra}]' (scripts/test installs it)",
            pytrace=False,
        )


def run_lemon(
    *args: str,
    stdin: str | None = None,
    cwd: Path | None = None,
    timeout: float = 120,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the installed ``lemon`` console script, as a user would (``env``: variables set on
    top of this process's). ``timeout`` stops a hang; it is no speed check (runs on real models
    take minutes on a loaded machine)."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})}
    return subprocess.run(
        [str(LEMON), *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        env=env,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def lemon():
    return run_lemon


def write_one_spec(
    policy: Any, task: str = "A pen costs 3 dollars. How much do 4 pens cost?"
) -> Any:
    """The policy's decision for one task, the policy closed after it."""
    import asyncio

    async def go() -> Any:
        try:
            return await policy.write_spec(task)
        finally:
            await policy.aclose()

    return asyncio.run(go())


def _cuda_here() -> bool:
    try:
        import torch
    except ImportError:  # no torch, no GPU tier (the `model` extra brings it)
        return False
    return bool(torch.cuda.is_available())


_NO_GPU: list[str] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The ``gpu`` tier runs only where torch sees a CUDA device: elsewhere its tests are
    deselected (not skipped, and not silently: the summary says how many and why)."""
    gpu = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu or _cuda_here():
        return
    _NO_GPU.extend(item.nodeid for item in gpu)
    config.hook.pytest_deselected(items=gpu)
    items[:] = [item for item in items if not item.get_closest_marker("gpu")]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _NO_GPU:
        terminalreporter.write_line(
            f"gpu tier: {len(_NO_GPU)} test(s) deselected, torch sees no CUDA device here"
        )
