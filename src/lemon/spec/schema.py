"""JSON Schema of the spec, for editors' YAML language servers and other tools."""

from __future__ import annotations

from typing import Any, Literal

from lemon.spec.models import LemonSpec, Spec
from lemon.spec.roles import RoleLibrary

__all__ = ["SchemaForm", "json_schema"]

SchemaForm = Literal["any", "bare", "resource"]

_DRAFT = "https://json-schema.org/draft/2020-12/schema"


def _add_role_examples(schema: dict[str, Any], roles: RoleLibrary) -> None:
    agent = schema.get("$defs", {}).get("Agent")
    if agent is not None:
        agent["properties"]["role"]["examples"] = sorted(roles)


def json_schema(form: SchemaForm = "any", *, roles: RoleLibrary | None = None) -> dict[str, Any]:
    """The schema of a bare spec, a ``LemonSpec`` resource, or either (``any``).

    Cross-field rules (unique names, references, cycles, known roles) are not expressible in
    JSON Schema; ``lemon validate`` checks them. Known roles are listed as ``examples`` so
    editors can complete them.
    """
    if form == "bare":
        schema = Spec.model_json_schema()
    elif form == "resource":
        schema = LemonSpec.model_json_schema()
    else:
        bare = Spec.model_json_schema(ref_template="#/$defs/{model}")
        resource = LemonSpec.model_json_schema(ref_template="#/$defs/{model}")
        defs = {**bare.pop("$defs", {}), **resource.pop("$defs", {})}
        defs["Spec"] = bare
        defs["LemonSpec"] = resource
        schema = {
            "title": "LEMON orchestration spec",
            "description": "A bare spec (agents, output) or a LemonSpec resource.",
            "anyOf": [{"$ref": "#/$defs/Spec"}, {"$ref": "#/$defs/LemonSpec"}],
            "$defs": defs,
        }
    if roles is not None:
        _add_role_examples(schema, roles)
    return {"$schema": _DRAFT, **schema}
