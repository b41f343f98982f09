"""The role library: base roles with default duties, a prompt template and an output format."""

from __future__ import annotations

import os
import string
from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from lemon.spec.issues import SpecError

__all__ = [
    "ROLE_NAME_PATTERN",
    "TEMPLATE_FIELDS",
    "Role",
    "RoleLibrary",
    "builtin_roles",
    "default_roles",
    "load_roles",
]

ROLE_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,62}$"
TEMPLATE_FIELDS = frozenset({"task", "duties", "inputs", "output_format"})
"""Placeholders a role template may use."""

_Text = Annotated[str, StringConstraints(min_length=1, pattern=r"\S")]


class Role(BaseModel):
    """A base role an agent can take."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, StringConstraints(pattern=ROLE_NAME_PATTERN)] = Field(
        description="Role identifier used in specs (lowercase, digits and underscores)."
    )
    description: _Text = Field(description="One line on what the role is for.")
    duties: _Text = Field(description="Default duties when a spec's agent gives none.")
    output_format: _Text = Field(description="The shape of output the role must produce.")
    template: _Text = Field(
        description="Prompt template; placeholders: {task}, {duties}, {inputs}, {output_format}."
    )
    tool: Literal["python", "vote", "nearest_option", "examples"] | None = Field(
        default=None,
        description="A tool that does this role's work instead of a model: 'python' runs the "
        "code its dependencies wrote in the sandbox; 'vote' answers with the majority of the "
        "answers its dependencies state (ties to the first-named); 'nearest_option' picks the "
        "option nearest the number its dependency computed; 'examples' runs its dependency's "
        "code on the task's own examples and reports the failures. Tool agents make no model "
        "call; their capacity is ignored (and never downgraded by a mutation).",
    )

    @property
    def is_tool(self) -> bool:
        return self.tool is not None

    @field_validator("template")
    @classmethod
    def _known_placeholders(cls, template: str) -> str:
        try:
            parsed = list(string.Formatter().parse(template))
        except ValueError as exc:
            raise ValueError(f"template is not a valid format string: {exc}") from None
        unknown = {field for _, field, _, _ in parsed if field is not None} - TEMPLATE_FIELDS
        if unknown:
            allowed = ", ".join("{" + f + "}" for f in sorted(TEMPLATE_FIELDS))
            raise ValueError(f"unknown placeholders {sorted(unknown)}; allowed: {allowed}")
        return template

    def render(self, *, task: str, duties: str | None = None, inputs: str = "") -> str:
        """The prompt for one agent of this role."""
        return self.template.format(
            task=task,
            duties=duties if duties is not None else self.duties,
            inputs=inputs,
            output_format=self.output_format,
        )


class _RoleFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    roles: list[Role] = Field(min_length=1)


class RoleLibrary(Mapping[str, Role]):
    """An immutable name → role mapping; later sources override earlier ones by name."""

    def __init__(self, roles: Iterable[Role] = ()) -> None:
        self._roles: dict[str, Role] = {role.name: role for role in roles}

    def __getitem__(self, name: str) -> Role:
        return self._roles[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._roles)

    def __len__(self) -> int:
        return len(self._roles)

    def __repr__(self) -> str:
        return f"RoleLibrary({sorted(self._roles)})"

    def merged(self, other: Iterable[Role]) -> RoleLibrary:
        return RoleLibrary([*self._roles.values(), *other])


def _parse_roles(text: str, *, source: str) -> list[Role]:
    from lemon.spec.shape_issues import pydantic_issues
    from lemon.spec.source import load_document

    data, source_map = load_document(text, source=source)
    try:
        return _RoleFile.model_validate(data).roles
    except ValidationError as exc:
        raise SpecError(pydantic_issues(exc, source_map), source=source) from None


def load_roles(path: str | os.PathLike[str]) -> list[Role]:
    """Read a role file (``roles: [...]``, the shape of the built-in library)."""
    text = Path(path).read_text(encoding="utf-8")
    return _parse_roles(text, source=os.fspath(path))


@cache
def builtin_roles() -> RoleLibrary:
    """The roles shipped with LEMON."""
    text = resources.files("lemon.spec").joinpath("roles/builtin.yaml").read_text("utf-8")
    return RoleLibrary(_parse_roles(text, source="<builtin roles>"))


def default_roles(extra_files: Iterable[str | os.PathLike[str]] = ()) -> RoleLibrary:
    """Built-in roles, then those of ``$LEMON_ROLES`` (path-separated), then ``extra_files``."""
    env = os.environ.get("LEMON_ROLES", "")
    files = [*(p for p in env.split(os.pathsep) if p), *extra_files]
    library = builtin_roles()
    for path in files:
        library = library.merged(load_roles(path))
    return library
