"""The spec grammar's line states, without a tokenizer: budgets, names, references."""

from __future__ import annotations

import pytest

from lemon.spec.grammar import GrammarLimits, LineKind, SpecGrammar, SpecGrammarError


def _walk(grammar: SpecGrammar, lines: list[str]) -> None:
    state = grammar.start()
    used = 0
    for line in lines:
        used += len(line) + 1
        state = state.advance(line, used=used)
    assert state.done


def test_a_canonical_spec_walks_to_the_end() -> None:
    grammar = SpecGrammar.build(budget=384)
    _walk(
        grammar,
        [
            "agents:",
            "  - name: planner",
            "    role: planner",
            "    capacity: small",
            "  - name: solver",
            "    role: math_solver",
            '    duties: "Follow the plan and end with \\"The answer is N.\\""',
            "    capacity: medium",
            "    depends_on: [planner]",
            "output: solver",
        ],
    )


def test_lines_out_of_place_are_refused() -> None:
    state = SpecGrammar.build(budget=384).start().advance("agents:", used=3)
    with pytest.raises(SpecGrammarError, match="none of"):
        state.advance("output: x", used=6)


def test_a_budget_too_small_for_any_spec_is_refused() -> None:
    with pytest.raises(SpecGrammarError, match="cannot hold even a one-agent spec"):
        SpecGrammar.build(budget=40)


def test_no_new_agent_when_the_budget_could_not_close_it() -> None:
    grammar = SpecGrammar.build(budget=160)
    state = grammar.start()
    for line in ["agents:", "  - name: a", "    role: planner"]:
        state = state.advance(line, used=state.used + len(line) + 1)
    # 160 tokens: after a capacity line only output fits, no second agent (which could take
    # up to 35 + 82 more tokens in the worst case)
    after = state.plan[LineKind.CAPACITY]
    assert LineKind.AGENT not in after
    assert LineKind.OUTPUT in after


def test_the_agent_limit_holds() -> None:
    grammar = SpecGrammar.build(budget=4096, limits=GrammarLimits(max_agents=2))
    state = grammar.start()
    lines = ["agents:"]
    for name in ("a", "b"):
        lines += [f"  - name: {name}", "    role: planner", "    capacity: small"]
    for line in lines:
        state = state.advance(line, used=state.used + len(line) + 1)
    assert state.kind_options == (LineKind.DEPENDS, LineKind.OUTPUT)
    for kind in state.plan.values():
        assert LineKind.AGENT not in kind


def test_names_taken_and_earlier_references_are_in_the_grammar() -> None:
    state = SpecGrammar.build(budget=1024).start()
    for line in [
        "agents:",
        "  - name: planner",
        "    role: planner",
        "    capacity: small",
        "  - name: solver",
        "    role: math_solver",
        "    capacity: small",
    ]:
        state = state.advance(line, used=state.used + len(line) + 1)
    assert "DEPS: /(?:planner)/" in state.lark()  # only the earlier agent, not solver itself
    state = state.advance("    depends_on: [planner]", used=state.used + 26)
    assert "~/(?:planner|solver|false|" in state.lark()  # a new name may not repeat one
    for line in ["  - name: checker", "    role: verifier", "    capacity: small"]:
        state = state.advance(line, used=state.used + len(line) + 1)
    # both earlier agents, in order, joined by ", ": planner, solver, or both
    assert "DEPS: /(?:planner(?:\\x2c\\x20(?:solver))?|(?:solver))/" in state.lark()


def test_duties_can_be_turned_off() -> None:
    grammar = SpecGrammar.build(budget=384, limits=GrammarLimits(allow_duties=False))
    state = grammar.start()
    for line in ["agents:", "  - name: a"]:
        state = state.advance(line, used=state.used + len(line) + 1)
    assert state.plan[LineKind.ROLE] == (LineKind.CAPACITY,)


def test_the_grammars_key_follows_its_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key covers the code that builds the constraints, not only the settings: a cached
    constrained answer never outlives a change to the grammar's code."""
    from lemon.spec import grammar

    before = grammar.SpecGrammar.build(budget=256).key()
    assert grammar.SpecGrammar.build(budget=256).key() == before
    monkeypatch.setattr(grammar, "grammar_code", lambda: "another version")
    assert grammar.SpecGrammar.build(budget=256).key() != before
