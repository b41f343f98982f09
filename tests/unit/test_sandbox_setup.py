"""What the sandbox says when it cannot run, and its public surface."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import lemon.data
import lemon.sandbox
import lemon.scoring
from lemon.data import load_items
from lemon.sandbox import SandboxConfig, SandboxUnavailable, probe
from tests.conftest import run_lemon


def test_missing_bubblewrap_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no bwrap, no setpriv
    with pytest.raises(SandboxUnavailable, match=r"bubblewrap is not installed \(apt-get"):
        probe()


def test_missing_prlimit_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for tool in ("bwrap", "setpriv"):  # everything the sandbox needs but prlimit
        found = shutil.which(tool)
        assert found is not None, f"{tool} is not installed here"
        (tmp_path / tool).symlink_to(found)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(
        SandboxUnavailable, match=r"prlimit is missing \(apt-get install -y util-linux"
    ):
        probe()


def test_missing_interpreter_is_named() -> None:
    with pytest.raises(SandboxUnavailable, match="no Python interpreter for the sandbox"):
        probe(SandboxConfig(python="/nonexistent/python3"))


def test_lemon_score_explains_a_missing_sandbox(tmp_path: Path) -> None:
    item = load_items("humaneval")[0]
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"id": item.id, "output": "    return True\n"}) + "\n")
    env = {**os.environ, "PATH": str(tmp_path)}
    lemon = Path(sys.executable).with_name("lemon")
    result = subprocess.run(
        [str(lemon), "score", "--benchmark", "humaneval", "--predictions", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert "the code sandbox cannot run here: bubblewrap is not installed" in result.stderr
    assert "Traceback" not in result.stderr


def test_public_surface_is_pinned() -> None:
    assert sorted(lemon.sandbox.__all__) == [
        "GiB",
        "MiB",
        "ProgramResult",
        "ProgramStatus",
        "SandboxConfig",
        "SandboxUnavailable",
        "probe",
        "run_program",
        "run_programs",
        "run_programs_async",
    ]
    assert "split_items" in lemon.data.__all__
    assert "score_predictions" in lemon.scoring.__all__
    for module in (lemon.sandbox, lemon.data, lemon.scoring):
        for name in module.__all__:
            assert getattr(module, name) is not None


def test_bench_entry_point_is_reachable() -> None:
    result = run_lemon("bench", "sandbox", "--help")
    assert result.returncode == 0
    assert "--rounds" in result.stdout
