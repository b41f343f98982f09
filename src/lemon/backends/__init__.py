"""Model backends behind one protocol: openai (HTTP), local (in-process), scripted (test double)."""

from lemon.backends.base import (
    Backend,
    BackendError,
    Decoding,
    Generation,
    GenerationRequest,
    Message,
)

__all__ = ["Backend", "BackendError", "Decoding", "Generation", "GenerationRequest", "Message"]
