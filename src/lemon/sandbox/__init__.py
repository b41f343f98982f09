"""A sandbox for untrusted Python programs (generated code and its tests).

Each program runs as an unprivileged user (its own uid when started as root, dropped with
``setpriv``) inside bubblewrap: its own namespaces (no network), a fresh tmpfs working
directory, resource limits, a wall-clock timeout, the process group killed at the end; a pass
needs a per-run marker printed after the program's last statement.
"""

from lemon.sandbox.commands import SandboxUnavailable
from lemon.sandbox.execution import (
    ProgramResult,
    ProgramStatus,
    run_program,
    run_programs,
    run_programs_async,
)
from lemon.sandbox.limits import GiB, MiB, SandboxConfig
from lemon.sandbox.probe import probe

__all__ = [
    "GiB",
    "MiB",
    "ProgramResult",
    "ProgramStatus",
    "SandboxConfig",
    "SandboxUnavailable",
    "probe",
    "run_program",
    "run_programs",
    "run_programs_async",
]
