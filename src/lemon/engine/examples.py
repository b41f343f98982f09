"""The ``examples`` tool: run a coder's function on the examples the task's own docstring gives.

Self-repair from executed feedback is the structure known to pay for small coders: the coder
writes, this tool runs the code on the prompt's examples in the sandbox, and a repairer reads
which examples failed and how. Only the task's own examples are run (``>>> f(1)`` followed by
the expected line, or ``f(1) == 2`` / ``=> 2`` / ``➞ 2`` / ``-> 2`` / ``returns 2`` /
``should return 2`` on one line); a benchmark's hidden tests are never seen. An example whose
expected value is not a Python literal or expression (``=> true``, ``19 - 5 - 6 = 8``) is
skipped, not guessed.

The output is a short report: how many examples ran and passed, then one line per failure
(what the call returned or raised, and what was expected), or why nothing ran.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from lemon.engine.tools import ToolResult, extract_code

__all__ = ["Example", "examples_program", "parse_examples", "run_examples", "task_function"]

_DEF = re.compile(r"^(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\(", re.MULTILINE)
_AFTER = re.compile(
    r"^\s*(?:==>|=>|==|➞|->|=(?!=)|\#?\s*returns?|should\s+return|,?\s*the\s+output\s+should\s+be)"
    r"\s*(?P<want>.+?)\s*$",
    re.IGNORECASE,
)
_MAX_EXAMPLES = 12


@dataclass(frozen=True, slots=True)
class Example:
    call: str
    expected: str


def task_function(task: str) -> tuple[str, str] | None:
    """The code a code task gives (its first fenced block) and the function to complete (the
    last ``def`` in it); None when the task holds no function."""
    from lemon.scoring.code import fenced_blocks

    blocks = fenced_blocks(task)
    code = blocks[0] if blocks else task
    names = _DEF.findall(code)
    return (code, names[-1]) if names else None


def _call_end(text: str, start: int) -> int | None:
    """The index just past the parenthesis that closes the one opening at ``start``."""
    depth, quote = 0, ""
    for index in range(start, len(text)):
        char = text[index]
        if quote:
            if char == quote and text[index - 1] != "\\":
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return index + 1
        elif char == "\n" and depth == 0:
            return None
    return None


def _clean(expected: str) -> str:
    expected = re.split(r"\s+#", expected, maxsplit=1)[0].strip()
    return expected[:-1] if expected.endswith(".") and not expected[:-1].endswith(".") else expected


def parse_examples(code: str, entry_point: str) -> list[Example]:
    """The examples of ``entry_point`` that ``code`` (the task's code) states, in order."""
    found: list[Example] = []
    seen: set[str] = set()
    for match in re.finditer(rf"(?<![\w.]){re.escape(entry_point)}\s*\(", code):
        if code.rfind("def ", 0, match.start()) == match.start() - 4:
            continue  # the definition itself
        end = _call_end(code, match.end() - 1)
        if end is None:
            continue
        call = code[match.start() : end]
        line_end = code.find("\n", end)
        rest = code[end : line_end if line_end >= 0 else len(code)]
        after = _AFTER.match(rest)
        expected = after.group("want") if after else ""
        line_start = code.rfind("\n", 0, match.start()) + 1
        if not expected and code[line_start : match.start()].strip() == ">>>" and line_end >= 0:
            following = code[line_end + 1 :].split("\n", 1)[0].strip()
            expected = "" if following.startswith(">>>") else following
        expected = _clean(expected)
        if expected and call not in seen:
            seen.add(call)
            found.append(Example(call, expected))
    return found[:_MAX_EXAMPLES]


_RUNNER = """

def __lemon_examples():
    import math
    ran = passed = 0
    for call, expected in __EXAMPLES:
        try:
            want = eval(expected)
        except Exception:
            continue
        ran += 1
        try:
            got = eval(call)
        except Exception as exc:
            print(f"FAILED {call}: raised {type(exc).__name__}: {exc}"[:300])
            continue
        same = got == want or (
            isinstance(got, (int, float)) and isinstance(want, (int, float))
            and math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-6)
        )
        if same:
            passed += 1
        else:
            print(f"FAILED {call}: returned {got!r}, expected {want!r}"[:300])
    print(f"RAN {ran} PASSED {passed}")


__lemon_examples()
"""


def examples_program(
    task_code: str, entry_point: str, solution: str, examples: Sequence[Example]
) -> str:
    """The sandbox program: the task's code, the solution (a full definition replaces the stub;
    anything else continues the prompt), then every example checked and reported."""
    from lemon.scoring.code import code_body, solution_program

    body = solution_program(task_code, entry_point, code_body(solution))
    pairs = json.dumps([[e.call, e.expected] for e in examples])
    return f"{body}\n\n__EXAMPLES = {pairs}\n{_RUNNER}"


async def run_examples(inputs: Sequence[str], *, task: str, timeout_s: float = 10.0) -> ToolResult:
    """Run the last dependency's code on the task's examples; the report is the output."""
    from lemon.sandbox.commands import SandboxUnavailable
    from lemon.sandbox.execution import ProgramStatus, run_program
    from lemon.sandbox.limits import SandboxConfig

    function = task_function(task)
    if function is None:
        return ToolResult("The task defines no function to run examples on.", ok=True)
    task_code, entry_point = function
    examples = parse_examples(task_code, entry_point)
    if not examples:
        return ToolResult(f"The task gives no examples of {entry_point} to run.", ok=True)
    code = extract_code(inputs)
    if not code.strip():
        return ToolResult("Error: no code to run", ok=True)
    program = examples_program(task_code, entry_point, code, examples)
    config = SandboxConfig(timeout_s=timeout_s, cpu_s=max(1, int(timeout_s)))
    try:
        result = await run_program(program, config=config)
    except SandboxUnavailable as exc:
        return ToolResult("", ok=False, error=f"the sandbox is unavailable: {exc}")
    if result.status is ProgramStatus.SANDBOX_ERROR:
        return ToolResult("", ok=False, error="sandbox failed to run the examples")
    if result.status is ProgramStatus.TIMEOUT:
        return ToolResult(f"The examples timed out after {timeout_s:g} s.", ok=True)
    lines = result.stdout.strip().splitlines()
    summary = next((line for line in reversed(lines) if line.startswith("RAN ")), None)
    if summary is None:
        error = [line for line in result.stderr.strip().splitlines() if line.strip()]
        return ToolResult(f"The code does not run: {error[-1] if error else 'no output'}", ok=True)
    ran, passed = (int(n) for n in re.findall(r"\d+", summary)[:2])
    failures = [line[len("FAILED ") :] for line in lines if line.startswith("FAILED ")]
    head = f"Ran {ran} of the task's examples: {passed} passed, {ran - passed} failed."
    return ToolResult("\n".join([head, *failures]), ok=True)
