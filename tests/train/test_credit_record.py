"""``record_credit``: the per-batch record of where counterfactual credit landed, in characters."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from lemon_train.credit import SpanCredit
from lemon_train.grpo import record_credit

SPEC = (
    "agents:\n"
    "  - name: solver\n"
    "    role: math_solver\n"
    "    capacity: large\n"
    "  - name: checker\n"
    "    role: verifier\n"
    "    capacity: small\n"
    "    depends_on: [solver]\n"
    "output: checker\n"
)


def _decode(ids: Sequence[int]) -> str:
    """One character per token: token positions and character positions coincide."""
    return "".join(map(chr, ids))


def test_credit_lands_on_the_characters_of_its_tokens_and_names_the_agent(tmp_path: Path) -> None:
    ids = [ord(c) for c in SPEC]
    large = SPEC.index("large")
    dep = SPEC.index("[solver]") + 1
    credits = [
        SpanCredit("capacity", tuple(range(large, large + 5)), 0.25),
        SpanCredit("drop_dependency", (dep, dep + 1, dep + 2, dep + 3, dep + 4, dep + 5), -0.5),
    ]
    path = tmp_path / "credit.jsonl"
    record_credit(
        path,
        step=3,
        completions=[ids, ids[:10]],
        decode=_decode,
        rewards=[0.4, -1.0],
        credits=[credits, []],
    )
    (line,) = path.read_text().splitlines()
    row = json.loads(line)
    assert row["step"] == 3
    first, second = row["samples"]
    assert first["completion"] == SPEC
    assert first["reward"] == 0.4
    capacity, dependency = first["credit"]
    assert capacity == {
        "kind": "capacity",
        "agent": "solver",
        "delta": 0.25,
        "spans": [[large, large + 5]],
    }
    assert SPEC[slice(*capacity["spans"][0])] == "large"
    assert dependency["agent"] == "checker"
    assert dependency["delta"] == -0.5
    assert SPEC[slice(*dependency["spans"][0])] == "solver"
    assert second == {"completion": SPEC[:10], "reward": -1.0, "credit": []}


def test_tokens_that_add_no_characters_are_left_out(tmp_path: Path) -> None:
    ids = [ord(c) for c in SPEC]
    path = tmp_path / "credit.jsonl"
    record_credit(
        path,
        step=1,
        completions=[ids],
        decode=_decode,
        rewards=None,
        credits=[[SpanCredit("rollback_role", (len(ids) + 3,), 1.0)]],
    )
    (sample,) = json.loads(path.read_text())["samples"]
    assert sample["reward"] is None
    assert sample["credit"] == [{"kind": "rollback_role", "agent": "", "delta": 1.0, "spans": []}]
