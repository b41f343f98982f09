"""Shared fixtures: paths to the repository's example specs and a CLI runner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples" / "specs").glob("*.yaml"))
LEMON = Path(sys.executable).with_name("lemon")


def run_lemon(
    *args: str, stdin: str | None = None, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run the installed ``lemon`` console script, as a user would."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
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
