"""Orchestration policies: what writes the spec for a task."""

from lemon.policy.template import TaskKind, classify_task, template_spec

__all__ = ["TaskKind", "classify_task", "template_spec"]
