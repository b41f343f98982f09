"""The project's layering, checked on the real modules."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import lemon
import lemon.spec

FORBIDDEN = (
    "kopf",
    "kubernetes",
    "grpc",
    "torch",
    "trl",
    "transformers",
    "lemon_cluster",
    "lemon_operator",
    "lemon_service",
    "lemon_train",
    "opentelemetry",  # lemon.telemetry imports it only when tracing is on
    "prometheus_client",
)


def test_core_imports_nothing_heavy_at_import_time() -> None:
    modules = [m.name for m in pkgutil.walk_packages(lemon.__path__, "lemon.")]
    assert "lemon.spec.validation" in modules
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = json.loads(result.stdout)
    leaked = [m for m in loaded if m.split(".")[0] in FORBIDDEN]
    assert leaked == []


def test_operator_is_not_shadowed() -> None:
    import operator

    assert operator.__file__ is None or "lemon" not in operator.__file__
    assert hasattr(operator, "itemgetter")


def test_public_surface_is_pinned() -> None:
    assert sorted(lemon.spec.__all__) == [
        "Agent",
        "Capacity",
        "CompiledDag",
        "DEFAULT_MAX_AGENTS",
        "Issue",
        "LemonSpec",
        "LemonSpecBody",
        "Mutation",
        "MutationKind",
        "ObjectMeta",
        "ParsedSpec",
        "Role",
        "RoleLibrary",
        "Spec",
        "SpecError",
        "ValidationOptions",
        "builtin_roles",
        "compile_spec",
        "default_roles",
        "format_resource",
        "format_spec",
        "json_schema",
        "load_roles",
        "load_spec",
        "mutate",
        "mutations",
        "parse_spec",
        "span_to_token_indices",
    ]
    for name in lemon.spec.__all__:
        assert getattr(lemon.spec, name) is not None


def test_names_do_not_mislead() -> None:
    """No two modules of the core share a name (its `cli/` modules are named after their
    commands, and `__init__.py` aside), none of the project's packages has two modules called
    `orchestration.py`, `runs.py` or `spans.py`, and one class each is called `RunResult` and
    `RunStatus` (the engine's; the sandbox's are `ProgramResult` and `ProgramStatus`)."""
    import ast
    from collections import Counter
    from pathlib import Path

    root = Path(lemon.__file__).parents[2]
    core = [
        p
        for p in (root / "src/lemon").rglob("*.py")
        if "cli" not in p.parts and p.stem != "__init__"
    ]
    twice = [name for name, n in Counter(p.name for p in core).items() if n > 1]
    assert twice == []
    project = [
        p
        for d in ("src", "operator", "services", "training_jobs")
        for p in (root / d).rglob("*.py")
    ]
    for name in ("orchestration.py", "runs.py", "spans.py"):
        assert len([p for p in project if p.name == name]) <= 1, name
    classes = Counter(
        (node.name, str(path.relative_to(root)))
        for path in project
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and node.name in ("RunResult", "RunStatus")
    )
    assert sorted(classes) == [
        ("RunResult", "src/lemon/engine/results.py"),
        ("RunStatus", "src/lemon/engine/results.py"),
    ]


PRODUCT = ("src/lemon", "operator/lemon_operator", "services", "training_jobs/lemon_train")


def test_product_code_names_no_benchmarks_or_experiments_path() -> None:
    """What ships never reads the lab: no product module names a ``benchmarks/`` or
    ``experiments/`` path (``lemon bench``, which runs a checkout's harnesses, aside; the
    packaged data folder ``lemon/data/benchmarks`` is the product's own)."""
    import re
    from pathlib import Path

    root = Path(lemon.__file__).parents[2]
    path_like = re.compile(r"(?<![\w/.])(?:benchmarks|experiments)/")
    named = sorted(
        f"{path.relative_to(root)}:{number}"
        for folder in PRODUCT
        for path in (root / folder).rglob("*.py")
        if path.relative_to(root).as_posix() != "src/lemon/cli/bench.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if path_like.search(line)
    )
    assert named == []


def _project_modules() -> dict[str, Path]:
    root = Path(lemon.__file__).parents[2]
    found = {}
    for base, packages in (
        ("src", ("lemon",)),
        ("operator", ("lemon_operator",)),
        ("services", ("lemon_service", "lemon_api", "lemon_cluster")),
        ("training_jobs", ("lemon_train",)),
    ):
        for package in packages:
            for path in (root / base / package).rglob("*.py"):
                parts = path.relative_to(root / base).with_suffix("").parts
                found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the project modules it imports, read from its AST: every ``import`` and
    ``from ... import`` anywhere in the file (inside functions and ``if TYPE_CHECKING:`` too),
    ``from package import name`` counted as the submodule where ``name`` is one."""
    import ast

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the module's package, up level - 1
                    anchor = package
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                imported = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    for alias in node.names
                ]
            else:
                continue
            targets.update(t for t in map(owner, imported) if t and t != name)
        graph[name] = targets
    return graph


def test_the_import_graph_sees_deferred_and_type_checking_imports(tmp_path: Path) -> None:
    """A circle hidden by an import inside a function and one under ``TYPE_CHECKING`` is still
    a circle to the walk."""
    (tmp_path / "pkg").mkdir()
    files = {
        "pkg": "",
        "pkg.a": "def load():\n    from pkg import b\n    return b\n",
        "pkg.b": "import typing\nif typing.TYPE_CHECKING:\n    from pkg.a import load\n",
        "pkg.c": "from . import a\n",
    }
    modules = {}
    for name, text in files.items():
        path = tmp_path / ("pkg/__init__.py" if name == "pkg" else f"{name.replace('.', '/')}.py")
        path.write_text(text)
        modules[name] = path
    assert import_graph(modules) == {
        "pkg": set(),
        "pkg.a": {"pkg.b"},
        "pkg.b": {"pkg.a"},
        "pkg.c": {"pkg.a"},
    }


def test_no_import_cycles_among_modules() -> None:
    """No circle among the project's modules, deferred imports included: a module that needs
    another's types or code at run time sits below it, never beside it both ways (the GGUF
    conversion in lemon.backends.converting, the web view's reference types in
    lemon.ui.sources, pydantic's located errors in lemon.spec.shape_issues)."""
    import networkx as nx

    graph = nx.DiGraph(import_graph(_project_modules()))
    cycles = sorted(sorted(cycle) for cycle in nx.simple_cycles(graph))
    assert cycles == []
