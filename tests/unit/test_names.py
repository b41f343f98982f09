"""One name per concept: no two public classes of the product packages share a name.

A reader who meets ``RunPhase`` or ``Source`` should not have to ask which one. The generated
gRPC package (``lemon_api``) is left out: protoc names its messages.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.conftest import ROOT

PRODUCT = [
    ROOT / "src" / "lemon",
    ROOT / "operator" / "lemon_operator",
    ROOT / "services" / "lemon_service",
    ROOT / "services" / "lemon_cluster",
    ROOT / "training_jobs" / "lemon_train",
]


def public_classes(path: Path) -> list[tuple[str, int]]:
    """Every class defined in the module (nested ones too) whose name has no leading ``_``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        (node.name, node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_")
    ]


def test_public_class_names_are_unique_across_the_product_packages() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    modules = [path for package in PRODUCT for path in sorted(package.rglob("*.py"))]
    assert len(modules) > 100  # the walk found the packages
    for path in modules:
        for name, line in public_classes(path):
            where[name].append(f"{path.relative_to(ROOT)}:{line}")
    shared = {name: places for name, places in sorted(where.items()) if len(places) > 1}
    assert shared == {}


def test_public_classes_sees_nested_and_skips_private(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "class A:\n    class Inner: ...\nclass _Hidden: ...\ndef f():\n    class Local: ...\n",
        encoding="utf-8",
    )
    assert public_classes(module) == [("A", 1), ("Inner", 2), ("Local", 5)]
