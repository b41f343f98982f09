"""Why a sandbox cannot run here."""

from __future__ import annotations

__all__ = ["SandboxUnavailable"]


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot be set up on this machine; the message says what is missing."""
