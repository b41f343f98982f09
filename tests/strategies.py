"""Hypothesis strategies: random valid specs, rendered in several YAML styles."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import strategies as st

from lemon.spec import builtin_roles

ROLES = sorted(builtin_roles())
TIERS = ["small", "medium", "large"]
NAMES = st.from_regex(r"[a-z]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True)
DUTIES = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\ufeff"),
    min_size=1,
    max_size=60,
).filter(lambda s: s.strip() != "")


@st.composite
def spec_data(draw: st.DrawFn, max_agents: int = 12) -> dict[str, Any]:
    """A valid bare spec as plain data: a random DAG over unique names."""
    names = draw(st.lists(NAMES, min_size=1, max_size=max_agents, unique=True))
    agents = []
    for i, name in enumerate(names):
        agent: dict[str, Any] = {
            "name": name,
            "role": draw(st.sampled_from(ROLES)),
            "capacity": draw(st.sampled_from(TIERS)),
        }
        if draw(st.booleans()):
            agent["duties"] = draw(DUTIES)
        earlier = names[:i]
        if earlier:
            deps = draw(st.lists(st.sampled_from(earlier), unique=True, max_size=4))
            if deps:
                agent["depends_on"] = deps
        agents.append(agent)
    order = draw(st.permutations(agents))  # file order need not be topological
    data: dict[str, Any] = {"agents": list(order)}
    data["output"] = draw(st.sampled_from(names))
    return data


def render(data: dict[str, Any], style: str) -> str:
    if style == "block":
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1 << 20)
    if style == "flow":
        return yaml.safe_dump(data, sort_keys=False, default_flow_style=True, width=60)
    if style == "resource":
        resource = {
            "apiVersion": "lemon.ai/v1alpha1",
            "kind": "LemonSpec",
            "metadata": {"name": "random"},
            "spec": data,
        }
        return yaml.safe_dump(resource, sort_keys=False, allow_unicode=False, width=40)
    raise ValueError(style)


STYLES = st.sampled_from(["block", "flow", "resource"])
