"""The generated CRDs are structural and carry what kubectl and the API server need."""

from __future__ import annotations

from typing import Any

import pytest

from lemon.resources import crd

KINDS = ["LemonSpec", "LemonCapacityProfile"]


def walk(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = []
    if isinstance(node, dict):
        found.append((path, node))
        for key, value in node.get("properties", {}).items():
            found += walk(value, f"{path}.{key}")
        if isinstance(node.get("items"), dict):
            found += walk(node["items"], f"{path}[]")
        if isinstance(node.get("additionalProperties"), dict):
            found += walk(node["additionalProperties"], f"{path}{{}}")
    return found


@pytest.mark.parametrize("kind", KINDS)
def test_schema_is_structural(kind: str) -> None:
    schema = crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in walk(schema):
        assert not {"$ref", "anyOf", "oneOf", "allOf", "$defs", "title", "default"} & set(node), (
            path
        )
        assert "type" in node or node.get("x-kubernetes-int-or-string"), f"{path} has no type"
        if node.get("type") == "string" and "enum" not in node and path.startswith(".spec"):
            assert "maxLength" in node, f"{path}: CEL cost needs maxLength"
        if node.get("type") == "array" and path.startswith(".spec"):
            assert "maxItems" in node, f"{path}: CEL cost needs maxItems"


def test_spec_fields_are_described_and_optional_ones_nullable() -> None:
    spec = crd("LemonSpec")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    agents = spec["spec"]["properties"]["agents"]
    assert "description" in agents
    assert agents["items"]["properties"]["duties"]["nullable"] is True
    assert agents["x-kubernetes-list-map-keys"] == ["name"]
    assert spec["spec"]["properties"]["output"]["nullable"] is True


@pytest.mark.parametrize(
    ("kind", "short"), [("LemonSpec", "lspec"), ("LemonCapacityProfile", "lcap")]
)
def test_names_status_and_columns(kind: str, short: str) -> None:
    definition = crd(kind)
    assert definition["spec"]["names"]["shortNames"] == [short]
    version = definition["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    assert any(column["name"] == "Ready" for column in version["additionalPrinterColumns"])
