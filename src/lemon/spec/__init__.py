"""The spec language: models, located validation, the DAG compiler and mutations."""

from lemon.spec.dag import CompiledDag, compile_spec
from lemon.spec.formatting import format_resource, format_spec
from lemon.spec.issues import Issue, SpecError
from lemon.spec.models import Agent, Capacity, LemonSpec, LemonSpecBody, ObjectMeta, Spec
from lemon.spec.mutations import Mutation, MutationKind, mutate, mutations
from lemon.spec.roles import Role, RoleLibrary, builtin_roles, default_roles, load_roles
from lemon.spec.schema import json_schema
from lemon.spec.spans import span_to_token_indices
from lemon.spec.validation import (
    DEFAULT_MAX_AGENTS,
    ParsedSpec,
    ValidationOptions,
    load_spec,
    parse_spec,
)

__all__ = [
    "DEFAULT_MAX_AGENTS",
    "Agent",
    "Capacity",
    "CompiledDag",
    "Issue",
    "LemonSpec",
    "LemonSpecBody",
    "Mutation",
    "MutationKind",
    "ObjectMeta",
    "ParsedSpec",
    "Role",
    "RoleLibrary",
    "Spec",
    "SpecError",
    "ValidationOptions",
    "builtin_roles",
    "compile_spec",
    "default_roles",
    "format_resource",
    "format_spec",
    "json_schema",
    "load_roles",
    "load_spec",
    "mutate",
    "mutations",
    "parse_spec",
    "span_to_token_indices",
]
