"""Edge packages add `lemon` commands through the `lemon.commands` entry points; the core CLI
never imports them by name, and a package that cannot be imported makes its command say why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import LEMON, ROOT, run_lemon


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


def test_every_command_is_an_entry_point() -> None:
    from importlib.metadata import entry_points

    from lemon.cli import COMMAND_GROUP

    names = {entry.name for entry in entry_points(group=COMMAND_GROUP)}
    core = {"validate", "compile", "mutate", "fmt", "schema", "roles", "bench", "run", "trace"}
    assert core | {"serve-model", "eval", "report", "score", "data", "teacher"} <= names
    assert {"train", "serve", "client"} <= names
    extras = {e.name: e.extras for e in entry_points(group=COMMAND_GROUP) if e.extras}
    assert extras == {
        "client": ["service"],
        "cluster": ["cluster"],
        "serve": ["service"],
        "serve-model": ["serve"],
        "train": ["train"],
    }


def test_a_missing_extra_makes_its_command_explain(tmp_path: Path) -> None:
    """A distribution whose `train` extra needs a package that is not installed: `lemon train`
    names it and the extra to install; the other commands still run."""
    info = tmp_path / "lemon_orchestration-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: lemon-orchestration\nVersion: 0.1.0\n"
        "Provides-Extra: train\n"
        'Requires-Dist: no-such-package-lemon-test>=1; extra == "train"\n'
    )
    (info / "entry_points.txt").write_text(
        "[lemon.commands]\ntrain = lemon_train.cli:register [train]\n"
        "validate = lemon.cli.validate:register\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONWARNINGS": "ignore"}
    code = "import sys; from lemon.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", code, "train", "sft", "--config", "x.yaml"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert (
        "'lemon train' is unavailable: no-such-package-lemon-test not installed "
        "(pip install 'lemon-orchestration[train]')"
    ) in done.stderr
    example = str(ROOT / "examples/specs/01-single-solver.yaml")
    ok = subprocess.run(
        [sys.executable, "-c", code, "validate", example],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr


def test_bench_finds_the_checkout_from_the_install_record(tmp_path: Path) -> None:
    from importlib.metadata import distributions

    from lemon.cli import DISTRIBUTION
    from lemon.cli.bench import checkout_of

    records = [d.read_text("direct_url.json") for d in distributions(name=DISTRIBUTION)]
    assert (
        checkout_of(next(r for r in records if r)) == ROOT
    )  # this suite runs on an editable install
    wheel = '{"url": "https://example.org/lemon.whl", "archive_info": {}}'
    assert checkout_of(wheel) is None
    assert checkout_of(None) is None
    env_free = {k: v for k, v in os.environ.items() if k != "LEMON_BENCHMARKS_DIR"}
    done = subprocess.run(
        [str(LEMON), "bench", "no-such-benchmark"],
        capture_output=True, text=True, cwd=tmp_path, env=env_free, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "unknown benchmark 'no-such-benchmark' (known: " in done.stderr  # found from tmp_path


def test_command_one_needs_no_extra_but_llama(tmp_path: Path) -> None:
    """scripts/setup installs the `llama` extra only: with the other extras' packages unimportable
    (as on that install), every command still registers, the extras' commands say what to
    install, and the README's first command's `validate` runs (CI once failed here: `serve`
    imported grpc while registering, which took the whole CLI down)."""
    blocked = ["grpc", "kopf", "kubernetes", "torch", "trl", "peft", "fastapi", "uvicorn"]
    code = (
        f"import sys; sys.modules.update(dict.fromkeys({blocked!r}));"
        "from lemon.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}

    def lemon(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", code, *argv],
            capture_output=True, text=True, cwd=ROOT, env=env, timeout=120, check=False,
        )  # fmt: skip

    help_ = lemon("--help")
    assert help_.returncode == 0, help_.stderr
    for command in ("serve", "client", "train"):
        assert f"    {command} " in help_.stdout, command
    served = lemon("serve")
    assert served.returncode == 2
    assert "'lemon serve' is unavailable" in served.stderr
    assert "pip install 'lemon-orchestration[service]'" in served.stderr
    ok = lemon("validate", "examples/specs/01-single-solver.yaml")
    assert ok.returncode == 0, ok.stderr
