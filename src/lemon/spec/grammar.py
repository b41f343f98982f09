"""The spec grammar: what a constrained policy may write, one line at a time.

A context-free grammar of the canonical layout (:mod:`lemon.spec.formatting`) cannot say that
agent names are unique, that ``depends_on`` names only agents written before, or that the spec
closes before the token budget runs out: those need state. So the grammar is rebuilt at every
line the policy completes, from what it has written so far:

- ``agents:``, then per agent ``  - name: N`` / ``    role: R`` / optional
  ``    duties: "..."`` / ``    capacity: C`` / optional ``    depends_on: [..]``, then
  ``output: N``, each line ending in a newline, nothing else (no blank lines, no comments);
- a new name is a DNS label that starts with a letter, is not a name already written and is not
  a word YAML reads as a boolean or null; ``depends_on`` lists a non-empty subsequence of the
  names written before, in the order they were written (so every spec is acyclic), and
  ``output`` names a written agent;
- roles come from the role library, tiers are ``small``/``medium``/``large``, duties are one
  double-quoted line of printable ASCII (escapes ``\\"`` and ``\\\\`` only) of at most
  :attr:`GrammarLimits.max_duties_chars` bytes;
- at most :attr:`GrammarLimits.max_agents` agents, and a line is offered only when the spec can
  still close after it within the token budget. Every token spells at least one byte, so a
  line of at most W bytes costs at most W tokens: a line type is allowed next only if
  ``used + W(current line) + W(next line) + C(next line) <= budget``, where C is the fewest
  tokens that close the spec from there (the shortest way to ``output: N`` plus the end token).
  Decisions are taken one line ahead, and each keeps the next one possible, so every spec the
  grammar lets start also closes.

Each step's grammar (:meth:`LineState.lark`) covers the rest of the current line, its newline
and the first characters of every line allowed after it; the decoding side
(:mod:`lemon.backends.guided`) rebuilds it at each newline. The grammars are written in the Lark
dialect of llguidance (``&`` and ``~`` on terminals); this module is pure and needs no library.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from lemon.spec.formatting import quote
from lemon.spec.models import Capacity
from lemon.spec.roles import RoleLibrary, builtin_roles

__all__ = [
    "YAML_RESERVED_WORDS",
    "GrammarLimits",
    "LineKind",
    "LineState",
    "SpecGrammar",
    "SpecGrammarError",
]

YAML_RESERVED_WORDS = ("yes", "no", "on", "off", "true", "false", "null", "y", "n")
"""Lowercase plain words a YAML loader may read as something other than a string."""


@functools.cache
def grammar_code() -> str:
    """A hash of this module's source: the version of the code the grammar's constraints come
    from (part of :meth:`SpecGrammar.key`)."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


class SpecGrammarError(ValueError):
    """The grammar cannot be built (e.g. a budget too small for any spec) or was not followed."""


class GrammarLimits(BaseModel):
    """Bounds that keep every constrained spec short enough to close within its budget."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_agents: int = Field(default=8, ge=1, le=64, description="most agents in one spec")
    max_name_chars: int = Field(default=24, ge=1, le=63, description="longest agent name")
    max_duties_chars: int = Field(
        default=160, ge=1, le=4096, description="longest duties text, in bytes, escapes included"
    )
    allow_duties: bool = Field(default=True, description="false: duties lines are never offered")


class LineKind(StrEnum):
    HEADER = "header"
    AGENT = "agent"
    ROLE = "role"
    DUTIES = "duties"
    CAPACITY = "capacity"
    DEPENDS = "depends_on"
    OUTPUT = "output"


_STARTS: dict[LineKind, str] = {
    LineKind.HEADER: "agents:",
    LineKind.AGENT: "  - name: ",
    LineKind.ROLE: "    role: ",
    LineKind.DUTIES: '    duties: "',
    LineKind.CAPACITY: "    capacity: ",
    LineKind.DEPENDS: "    depends_on: [",
    LineKind.OUTPUT: "output: ",
}
"""Each line's fixed beginning (its indentation and key)."""

_NEXT: dict[LineKind, tuple[LineKind, ...]] = {
    LineKind.HEADER: (LineKind.AGENT,),
    LineKind.AGENT: (LineKind.ROLE,),
    LineKind.ROLE: (LineKind.DUTIES, LineKind.CAPACITY),
    LineKind.DUTIES: (LineKind.CAPACITY,),
    LineKind.CAPACITY: (LineKind.DEPENDS, LineKind.AGENT, LineKind.OUTPUT),
    LineKind.DEPENDS: (LineKind.AGENT, LineKind.OUTPUT),
    LineKind.OUTPUT: (),
}
"""Which lines the canonical layout lets follow each line."""

_SHORTEST: dict[LineKind, LineKind] = {
    LineKind.HEADER: LineKind.AGENT,
    LineKind.AGENT: LineKind.ROLE,
    LineKind.ROLE: LineKind.CAPACITY,
    LineKind.DUTIES: LineKind.CAPACITY,
    LineKind.CAPACITY: LineKind.OUTPUT,
    LineKind.DEPENDS: LineKind.OUTPUT,
}
"""The next line on the shortest way to close the spec."""

_DUTY_CHAR = r"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x22\x5c])"
_DUTY_FIRST = r"(?:[\x21\x23-\x5b\x5d-\x7e]|\\[\x22\x5c])"


def _lark_string(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid Lark string literal


def _regex_literal(text: str) -> str:
    """``text`` as a regex matching exactly it (hex escapes for anything but [a-z0-9_])."""
    return "".join(
        c if c.isascii() and (c.isalnum() or c == "_") else f"\\x{ord(c):02x}" for c in text
    )


@dataclass(frozen=True, slots=True)
class SpecGrammar:
    """The grammar's fixed inputs: role library, limits and the token budget of one spec."""

    roles: tuple[str, ...]
    """Role names as they are written (canonical quoting)."""
    budget: int
    """Tokens the policy may write, the end token included."""
    limits: GrammarLimits = field(default_factory=GrammarLimits)
    tiers: tuple[str, ...] = tuple(t.value for t in Capacity)

    @classmethod
    def build(
        cls,
        *,
        budget: int,
        roles: RoleLibrary | None = None,
        limits: GrammarLimits | None = None,
    ) -> SpecGrammar:
        library = roles if roles is not None else builtin_roles()
        grammar = cls(
            roles=tuple(quote(name) for name in library),
            budget=budget,
            limits=limits or GrammarLimits(),
        )
        grammar.start()  # raises when the budget cannot hold the smallest spec
        return grammar

    def key(self) -> str:
        """A stable identity (cache keys, server requests): the grammar's settings and the
        code that turns them into constraints (a hash of this module's source), so a change
        to how the grammar constrains never serves an answer decoded under the old one."""
        payload = json.dumps(
            [self.roles, self.budget, self.limits.model_dump(), self.tiers, grammar_code()],
            sort_keys=True,
        )
        return "spec-grammar/v1:" + hashlib.sha256(payload.encode()).hexdigest()[:16]

    # -- worst-case sizes, in bytes (= an upper bound in tokens) -----------------------------
    def worst(self, kind: LineKind, names: Sequence[str], *, new_agent: bool = False) -> int:
        """Most bytes a line of ``kind`` can take, newline included, given the names so far
        (``new_agent``: the line belongs to an agent whose name is not written yet)."""
        n = self.limits.max_name_chars
        if kind is LineKind.HEADER:
            return len("agents:\n")
        if kind is LineKind.AGENT:
            return len(_STARTS[kind]) + n + 1
        if kind is LineKind.ROLE:
            return len(_STARTS[kind]) + max(map(len, self.roles)) + 1
        if kind is LineKind.DUTIES:
            return len(_STARTS[kind]) + self.limits.max_duties_chars + 2
        if kind is LineKind.CAPACITY:
            return len(_STARTS[kind]) + max(map(len, self.tiers)) + 1
        if kind is LineKind.DEPENDS:
            earlier = names if new_agent else names[:-1]
            refs = sum(len(x) + 2 for x in earlier) - 2
            return len(_STARTS[kind]) + max(refs, 1) + 2
        longest = max([*map(len, names), n if new_agent else 0])
        return len(_STARTS[LineKind.OUTPUT]) + longest + 1

    def closing(self, kind: LineKind, names: Sequence[str], *, new_agent: bool = False) -> int:
        """Fewest tokens (by the worst-case line sizes) that close the spec after a line of
        ``kind``: the shortest path to ``output`` plus the end token."""
        if kind is LineKind.OUTPUT:
            return 1
        fresh = new_agent or kind is LineKind.AGENT
        nxt = _SHORTEST[kind]
        return self.worst(nxt, names, new_agent=fresh) + self.closing(nxt, names, new_agent=fresh)

    def start(self) -> LineState:
        """The state before the first token."""
        state = LineState(self, names=(), kind_options=(LineKind.HEADER,), used=0)
        state = state.with_plan()
        if not state.plan.get(LineKind.HEADER):
            need = (
                self.worst(LineKind.HEADER, ())
                + self.worst(LineKind.AGENT, (), new_agent=True)
                + self.closing(LineKind.AGENT, (), new_agent=True)
            )
            raise SpecGrammarError(
                f"a token budget of {self.budget} cannot hold even a one-agent spec under these "
                f"limits (worst case {need} tokens); raise the budget or lower the limits"
            )
        return state


_LINE_PATTERNS: dict[LineKind, re.Pattern[str]] = {
    LineKind.HEADER: re.compile(r"agents:"),
    LineKind.AGENT: re.compile(r"  - name: ([a-z][a-z0-9-]*)"),
    LineKind.ROLE: re.compile(r"    role: (\S+)"),
    LineKind.DUTIES: re.compile(r'    duties: ".*"'),
    LineKind.CAPACITY: re.compile(r"    capacity: (small|medium|large)"),
    LineKind.DEPENDS: re.compile(r"    depends_on: \[.*\]"),
    LineKind.OUTPUT: re.compile(r"output: ([a-z][a-z0-9-]*)"),
}


@dataclass(frozen=True, slots=True)
class LineState:
    """Where a constrained spec stands at the start of a line."""

    grammar: SpecGrammar
    names: tuple[str, ...]
    """Agent names written so far, in order (the last is the agent being written)."""
    kind_options: tuple[LineKind, ...]
    """What the current line may be (decided one line ahead)."""
    used: int
    """Tokens written so far, including the one that ended the previous line."""
    spaces: int = 0
    """Leading spaces of this line already written (by the token that ended the last)."""
    plan: dict[LineKind, tuple[LineKind, ...]] = field(default_factory=dict)
    """For each option of the current line, the lines allowed after it (by the budget)."""

    @property
    def done(self) -> bool:
        return not self.kind_options

    def with_plan(self) -> LineState:
        """Decide, for each option of this line, which lines may follow it."""
        g, limits = self.grammar, self.grammar.limits
        plan: dict[LineKind, tuple[LineKind, ...]] = {}
        for kind in self.kind_options:
            new_agent = kind is LineKind.AGENT
            if not _STARTS[kind].startswith(" " * self.spaces):
                continue
            cost = self.used - self.spaces + g.worst(kind, self.names, new_agent=new_agent)
            names = self.names
            allowed = []
            for nxt in _NEXT[kind]:
                count = len(names) + (1 if new_agent else 0)
                if nxt is LineKind.AGENT and count >= limits.max_agents:
                    continue
                if nxt is LineKind.DEPENDS and count < 2:
                    continue
                if nxt is LineKind.DUTIES and not limits.allow_duties:
                    continue
                line = g.worst(nxt, names, new_agent=new_agent or nxt is LineKind.AGENT)
                rest = g.closing(nxt, names, new_agent=new_agent or nxt is LineKind.AGENT)
                if cost + line + rest <= g.budget:
                    allowed.append(nxt)
            if kind is LineKind.OUTPUT or allowed:
                plan[kind] = tuple(allowed)
        options = tuple(k for k in self.kind_options if k in plan)
        return replace(self, kind_options=options, plan=plan)

    # -- the grammar of this line -----------------------------------------------------------
    def _body(self, kind: LineKind) -> str:
        """The Lark expression for the line's variable part."""
        if kind is LineKind.HEADER:
            return ""
        if kind is LineKind.AGENT:
            return "NAME"
        if kind is LineKind.ROLE:
            return "(" + " | ".join(_lark_string(r) for r in self.grammar.roles) + ")"
        if kind is LineKind.DUTIES:
            return 'DUTIES "\\""'
        if kind is LineKind.CAPACITY:
            return "(" + " | ".join(_lark_string(t) for t in self.grammar.tiers) + ")"
        if kind is LineKind.DEPENDS:
            return 'DEPS "]"'
        return "(" + " | ".join(_lark_string(n) for n in self.names) + ")"

    def _terminals(self) -> list[str]:
        limits = self.grammar.limits
        out = []
        if LineKind.AGENT in self.kind_options:
            n = limits.max_name_chars
            label = "[a-z]" if n == 1 else f"[a-z](?:[a-z0-9-]{{0,{n - 2}}}[a-z0-9])?"
            taken = sorted({*self.names, *YAML_RESERVED_WORDS}, key=lambda s: (-len(s), s))
            excluded = "|".join(_regex_literal(x) for x in taken)
            out.append(f"NAME: /{label}/ & ~/(?:{excluded})/")
        if LineKind.DUTIES in self.kind_options:
            d = limits.max_duties_chars
            out.append(f"DUTIES: /{_DUTY_FIRST}{_DUTY_CHAR}*/ & /[^\\x0a]{{1,{d}}}/")
        if LineKind.DEPENDS in self.kind_options:
            earlier = self.names[:-1]
            out.append(f"DEPS: /{_subsequences(earlier)}/")
        return out

    def lark(self, *, lookahead: bool = True) -> str:
        """The grammar of the rest of this line (after the :attr:`spaces` already written),
        its newline, and (``lookahead``) the beginning of each line allowed next; without
        ``lookahead`` the grammar ends at the newline (one request per line to a server)."""
        spaces = self.spaces
        alternatives = []
        for kind in self.kind_options:
            head = _STARTS[kind]
            if not head.startswith(" " * spaces):
                continue
            parts = [_lark_string(head[spaces:])] if head[spaces:] else []
            body = self._body(kind)
            if body:
                parts.append(body)
            parts.append(_lark_string("\n"))
            following = self.plan.get(kind, ())
            if lookahead and following:
                parts.append("(" + " | ".join(_lark_string(_STARTS[k]) for k in following) + ")")
            alternatives.append(" ".join(parts))
        if not alternatives:
            raise SpecGrammarError(f"no line of {self.kind_options} starts with {spaces} spaces")
        rules = ["start: " + "\n     | ".join(alternatives), *self._terminals()]
        return "\n".join(rules) + "\n"

    def advance(self, line: str, *, used: int, spaces: int = 0) -> LineState:
        """The state after the complete ``line`` (no newline): ``used`` tokens written by then,
        the last of which also wrote ``spaces`` spaces of the next line.
        Raises :class:`SpecGrammarError` when the line is not one this state allowed."""
        for kind in self.kind_options:
            match = _LINE_PATTERNS[kind].fullmatch(line)
            if match is None:
                continue
            names = self.names
            if kind is LineKind.AGENT:
                names = (*names, match.group(1))
            state = LineState(
                self.grammar, names=names, kind_options=self.plan[kind], used=used, spaces=spaces
            )
            return state.with_plan()
        raise SpecGrammarError(f"line {line!r} is none of {[k.value for k in self.kind_options]}")


def _subsequences(names: Sequence[str]) -> str:
    """A regex for every non-empty subsequence of ``names`` joined by ", " (order kept)."""
    if not names:
        return "(?!)"
    # from_i: some subsequence whose first element has index >= i
    from_next = ""
    for i in range(len(names) - 1, -1, -1):
        item = _regex_literal(names[i])
        with_tail = f"{item}(?:\\x2c\\x20{from_next})?" if from_next else item
        from_next = f"(?:{with_tail}|{from_next})" if from_next else f"(?:{with_tail})"
    return from_next
