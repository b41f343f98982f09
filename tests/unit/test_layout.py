"""The project's layering, checked on the real modules."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

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
