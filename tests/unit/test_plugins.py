"""Edge packages add `lemon` commands through the `lemon.commands` entry points; the core CLI
never imports them by name, and a package that cannot be imported makes its command say why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, run_lemon


def test_edge_commands_are_registered() -> None:
    done = run_lemon("--help")
    assert done.returncode == 0
    for command in ("train", "serve", "client", "teacher"):
        assert f"    {command} " in done.stdout, command
    assert run_lemon("train", "--help").returncode == 0


def test_a_broken_edge_package_makes_its_command_explain(tmp_path: Path) -> None:
    shadow = tmp_path / "lemon_train"
    shadow.mkdir()
    (shadow / "__init__.py").write_text('raise ImportError("no module named torch (simulated)")\n')
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONWARNINGS": "ignore"}
    code = "import sys; from lemon.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", code, "train", "sft", "--config", "x.yaml"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "'lemon train' is unavailable: no module named torch (simulated)" in done.stderr
    ok = subprocess.run(
        [sys.executable, "-c", code, "validate", "examples/specs/01-single-solver.yaml"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr  # the other commands are unaffected
