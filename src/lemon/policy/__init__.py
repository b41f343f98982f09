"""Orchestration policies: what writes the spec for a task (the template policy, a learned
policy behind any backend), the fixed teams, the prompt format and policy versions."""

from lemon.policy.inference import LearnedPolicy, PolicyDecision, SpecPolicy, TemplatePolicy
from lemon.policy.template import TemplateVariant, template_spec

__all__ = [
    "LearnedPolicy",
    "PolicyDecision",
    "SpecPolicy",
    "TemplatePolicy",
    "TemplateVariant",
    "template_spec",
]
