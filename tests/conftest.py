"""Shared fixtures: paths to the repository's example specs and a CLI runner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# The persistent call cache stays off in tests unless a test turns it on (with its own file):
# a cache shared across test runs would answer calls whose counts the tests check.
os.environ.setdefault("LEMON_CALL_CACHE", "off")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples" / "specs").glob("*.yaml"))
LEMON = Path(sys.executable).with_name("lemon")


def run_lemon(
    *args: str, stdin: str | None = None, cwd: Path | None = None
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
        timeout=120,
        check=False,
    )


@pytest.fixture
def lemon():
    return run_lemon
