"""Which tool does a tool role's work: one dispatch by the role's ``tool`` name."""

from __future__ import annotations

from collections.abc import Sequence

from lemon.engine.examples import run_examples
from lemon.engine.tools import ToolResult, run_python_tool
from lemon.engine.voting import nearest_option, vote

__all__ = ["run_tool"]


async def run_tool(tool: str, inputs: Sequence[str], *, task: str) -> ToolResult:
    """Do a tool role's work on its dependencies' outputs (in ``depends_on`` order)."""
    if tool == "python":
        return await run_python_tool(inputs)
    if tool == "vote":
        return ToolResult(vote(inputs, task=task), ok=True)
    if tool == "nearest_option":
        return ToolResult(nearest_option(inputs, task=task), ok=True)
    if tool == "examples":
        return await run_examples(inputs, task=task)
    raise ValueError(f"unknown tool {tool!r}")
