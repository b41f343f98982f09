"""Tool roles: agents whose work is done by a tool instead of a model.

No tool makes a model call: zero tokens; the time is counted. Each is deterministic, so a team
that ends in one is answered the same way every time its inputs are the same.

- ``python`` (the ``python_executor`` role) takes the code written by the agents it depends on
  (the last fenced code block of the last dependency that wrote one, else that dependency's
  whole output), runs it in the same sandbox HumanEval uses, and returns what it printed, or
  the error. A program that defines ``answer`` but prints nothing gets ``print(answer)``
  appended, which is what a prefilled ``answer = `` from a small model usually needs.
The other tools live beside this module and :mod:`lemon.engine.toolbox` dispatches by name:

- ``vote`` (the ``voter`` role): :mod:`lemon.engine.voting`, the majority over the answers its
  dependencies state, ties to the first-named.
- ``nearest_option`` (the ``option_picker`` role): :mod:`lemon.engine.voting`, the option whose
  number is nearest the number its dependency computed (program of thought on multiple choice).
- ``examples`` (the ``example_runner`` role): :mod:`lemon.engine.examples`, runs its
  dependency's code on the examples the task's own docstring gives, and reports each failure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ToolResult", "extract_code", "run_python_tool"]

_PRINT_ANSWER = "\n\ntry:\n    answer\nexcept NameError:\n    pass\nelse:\n    print(answer)\n"


@dataclass(frozen=True, slots=True)
class ToolResult:
    output: str
    ok: bool
    """The tool ran (a program that raised still ran: its error is the output)."""
    error: str | None = None
    """Why the tool itself could not run (e.g. the sandbox failed to start)."""


def extract_code(texts: Sequence[str]) -> str:
    """The code to run from the dependencies' outputs (in ``depends_on`` order)."""
    from lemon.scoring.code import fenced_blocks

    for text in reversed(texts):
        blocks = fenced_blocks(text)
        if blocks:
            return blocks[-1]
    return texts[-1] if texts else ""


def _program(code: str) -> str:
    if "print(" in code or not re.search(r"^answer\s*=", code, re.MULTILINE):
        return code
    return code + _PRINT_ANSWER


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no error message"


async def run_python_tool(inputs: Sequence[str], *, timeout_s: float = 10.0) -> ToolResult:
    """Run the dependencies' code in the sandbox; the output is stdout or the error."""
    from lemon.sandbox.execution import ProgramStatus, run_program
    from lemon.sandbox.limits import SandboxConfig

    code = extract_code(inputs)
    if not code.strip():
        return ToolResult("Error: no code to run", ok=True)
    from lemon.sandbox.commands import SandboxUnavailable

    config = SandboxConfig(timeout_s=timeout_s, cpu_s=max(1, int(timeout_s)))
    try:
        result = await run_program(_program(code), config=config)
    except SandboxUnavailable as exc:
        return ToolResult("", ok=False, error=f"the sandbox is unavailable: {exc}")
    if result.status is ProgramStatus.SANDBOX_ERROR:
        return ToolResult("", ok=False, error=f"sandbox failed: {_error_line(result.stderr)}")
    if result.status is ProgramStatus.TIMEOUT:
        return ToolResult(f"Error: the program timed out after {timeout_s:g} s", ok=True)
    if result.status is ProgramStatus.OUTPUT_LIMIT:
        return ToolResult("Error: the program printed too much", ok=True)
    stdout = result.stdout.strip()
    if result.passed:
        return ToolResult(stdout or "(the program printed nothing)", ok=True)
    error = (
        _error_line(result.stderr)
        if result.stderr.strip()
        else f"the program ended without finishing (exit status {result.returncode})"
    )
    return ToolResult(f"{stdout}\nError: {error}".strip(), ok=True)
