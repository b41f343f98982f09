"""The canonical layout of a spec: what ``lemon fmt`` writes and the policy learns to produce.

One field per line, keys in a fixed order (name, role, duties, capacity, depends_on), duties
double-quoted on one line, dependencies as a flow list, ``output`` always explicit. For a
``LemonSpec`` resource the same layout sits under ``spec:``; ``status`` is dropped (the
operator owns it). Comments are not kept. ``parse(format(spec)) == spec`` holds for every spec.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

from lemon.spec.models import API_VERSION, KIND, Agent, LemonSpec, Spec

__all__ = ["format_agent", "format_resource", "format_spec", "quote"]

_RESOLVER = Resolver()
_STR_TAG = "tag:yaml.org,2002:str"
_Dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _plain_ok(text: str) -> bool:
    return (
        text.replace("-", "").replace("_", "").isalnum()
        and text.isascii()
        and not text.startswith("-")
        and _RESOLVER.resolve(ScalarNode, text, (True, False)) == _STR_TAG  # type: ignore[no-untyped-call]
    )


def quote(text: str) -> str:
    """A YAML scalar for ``text``: plain when unambiguous, else one double-quoted line."""
    if _plain_ok(text):
        return text
    dumped: str = yaml.dump(
        text, Dumper=_Dumper, default_style='"', width=1 << 30, allow_unicode=True
    )
    return dumped.removesuffix("\n").removesuffix("\n...")


def format_agent(agent: Agent, indent: str = "") -> list[str]:
    lines = [f"{indent}- name: {quote(agent.name)}", f"{indent}  role: {quote(agent.role)}"]
    if agent.duties is not None:
        lines.append(f"{indent}  duties: {quote(agent.duties)}")
    lines.append(f"{indent}  capacity: {agent.capacity.value}")
    if agent.depends_on:
        lines.append(f"{indent}  depends_on: [{', '.join(map(quote, agent.depends_on))}]")
    return lines


def _spec_lines(spec: Spec, output: str, indent: str = "") -> list[str]:
    lines = [f"{indent}agents:"]
    for agent in spec.agents:
        lines += format_agent(agent, indent + "  ")
    lines.append(f"{indent}output: {quote(output)}")
    return lines


def _resolved_output(spec: Spec, output: str | None) -> str:
    if output is not None:
        return output
    if spec.output is not None:
        return spec.output
    from lemon.spec.dag import compile_spec

    return compile_spec(spec).output


def format_spec(spec: Spec, *, output: str | None = None) -> str:
    """The canonical text of a bare spec (``output`` made explicit)."""
    return "\n".join(_spec_lines(spec, _resolved_output(spec, output))) + "\n"


def _block(key: str, value: Any, indent: str) -> list[str]:
    dumped = yaml.dump(
        {key: value}, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1 << 30
    )
    return [indent + line for line in dumped.splitlines()]


def format_resource(resource: LemonSpec, *, output: str | None = None) -> str:
    """The canonical text of a ``LemonSpec`` resource."""
    body = resource.spec
    lines = [f"apiVersion: {API_VERSION}", f"kind: {KIND}"]
    metadata = resource.metadata.model_dump(exclude_none=True)
    if metadata:
        lines += _block("metadata", metadata, "")
    lines.append("spec:")
    if body.profile is not None:
        lines.append(f"  profile: {quote(body.profile)}")
    if body.task is not None:
        lines.append(f"  task: {quote(body.task)}")
    lines += _spec_lines(body, _resolved_output(body, output), "  ")
    return "\n".join(lines) + "\n"
