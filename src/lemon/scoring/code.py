"""HumanEval scoring: build the test program from an output and run it in the sandbox.

An output is either a *completion* that continues the prompt (the official format) or a *full
definition* of the entry point (``def <entry_point>(`` at the start of a line), possibly inside
a Markdown code fence. A full definition is appended after the prompt, so the prompt's imports
and helper functions stay available and the new definition replaces the stub. The program is
``prompt + body + test + check(entry_point)``; it passes only when the sandbox run reaches its
end (the per-run marker, see :mod:`lemon.sandbox.execution`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from lemon.data.items import CodeItem
from lemon.sandbox.execution import ProgramResult, run_programs
from lemon.sandbox.limits import SandboxConfig

__all__ = ["build_program", "code_body", "fenced_blocks", "score_code", "solution_program"]

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


def fenced_blocks(text: str) -> list[str]:
    """The non-empty fenced code blocks of ``text`` (an unclosed last fence counts)."""
    return [str(block) for block in _FENCE.findall(text) if block.strip()]


def code_body(output: str) -> str:
    """The code in an output: the first fenced block holding code, else the output itself."""
    blocks = fenced_blocks(output)
    return blocks[0] if blocks else output


def _is_full_definition(code: str, entry_point: str) -> bool:
    return re.search(rf"^(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(", code, re.M) is not None


def solution_program(prompt: str, entry_point: str, code: str) -> str:
    """The prompt with ``code`` in place: a full definition of ``entry_point`` is appended after
    the stub (which it replaces); anything else continues the prompt."""
    if _is_full_definition(code, entry_point):
        return prompt + "\n    pass\n\n" + code
    return prompt + code


def build_program(item: CodeItem, output: str) -> str:
    """The whole test program for ``output`` on ``item``."""
    solution = solution_program(item.prompt, item.entry_point, code_body(output))
    return f"{solution}\n\n{item.test}\n\ncheck({item.entry_point})\n"


def score_code(
    items: Sequence[CodeItem], outputs: Sequence[str], *, config: SandboxConfig | None = None
) -> list[ProgramResult]:
    """Run every ``(item, output)`` pair's test program in the sandbox, in parallel."""
    programs = [build_program(item, output) for item, output in zip(items, outputs, strict=True)]
    return run_programs(programs, config=config)
