"""The canonical layout: stable, one field per line, and parse(format(spec)) == spec."""

from __future__ import annotations

from pathlib import Path

import pytest

from lemon.spec import format_resource, format_spec, load_spec, parse_spec
from tests.conftest import EXAMPLES


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_round_trip_and_idempotence(path: Path) -> None:
    parsed = load_spec(path)
    if parsed.resource is not None:
        text = format_resource(parsed.resource, output=parsed.output)
        again = parse_spec(text)
        assert again.resource is not None
        assert again.resource.spec.model_copy(
            update={"output": None}
        ) == parsed.resource.spec.model_copy(update={"output": None})
        assert again.resource.metadata == parsed.resource.metadata
        assert format_resource(again.resource) == text
    else:
        text = format_spec(parsed.spec, output=parsed.output)
        again = parse_spec(text)
        assert again.spec == parsed.spec.model_copy(update={"output": parsed.output})
        assert format_spec(again.spec) == text


def test_layout() -> None:
    text = """\
output: b
agents:
  - {depends_on: [a], capacity: large, name: b, role: verifier}
  - capacity: small
    duties: >
      Say "hi" —
      twice.
    role: planner
    name: a
"""
    assert format_spec(parse_spec(text).spec) == (
        "agents:\n"
        "  - name: b\n"
        "    role: verifier\n"
        "    capacity: large\n"
        "    depends_on: [a]\n"
        "  - name: a\n"
        "    role: planner\n"
        '    duties: "Say \\"hi\\" — twice.\\n"\n'
        "    capacity: small\n"
        "output: b\n"
    )


@pytest.mark.parametrize("name", ["123", "1e3", "0x1f", "null", "yes", "on", "true", "0o7", "1-2"])
def test_ambiguous_names_are_quoted(name: str) -> None:
    spec = parse_spec(f'agents:\n  - {{name: "{name}", role: planner, capacity: small}}\n').spec
    text = format_spec(spec)
    assert parse_spec(text).spec.agents[0].name == name
