"""Model backends behind one protocol: openai (HTTP), local (in-process), scripted (test double),
and the packaged model the in-process backend runs by default."""

from lemon.backends.base import (
    Backend,
    BackendError,
    Decoding,
    Generation,
    GenerationRequest,
    Message,
)

__all__ = ["Backend", "BackendError", "Decoding", "Generation", "GenerationRequest", "Message"]
