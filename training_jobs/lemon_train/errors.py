"""The training job's one error: a run that cannot proceed, saying where."""

from __future__ import annotations

__all__ = ["TrainingError"]


class TrainingError(RuntimeError):
    """A training run that cannot proceed (bad data, unusable base model); says where."""
