"""Checking that the sandbox works here, with the reason when it does not."""

from __future__ import annotations

from lemon.sandbox.commands import SandboxUnavailable
from lemon.sandbox.execution import ProgramStatus, run_programs
from lemon.sandbox.limits import SandboxConfig

__all__ = ["probe"]


def probe(config: SandboxConfig | None = None) -> None:
    """Run a trivial program; raise :class:`SandboxUnavailable` saying why it did not pass."""
    config = config or SandboxConfig()
    try:
        [result] = run_programs(["print('ok')"], config=config)
    except OSError as exc:
        raise SandboxUnavailable(f"cannot start the sandbox: {exc}") from exc
    if result.status is not ProgramStatus.PASSED or result.stdout.strip() != "ok":
        detail = (result.stderr or result.stdout).strip()[-500:]
        raise SandboxUnavailable(
            f"a trivial program did not pass ({result.status.value}, exit {result.returncode}): "
            f"{detail or 'no output'} (bubblewrap needs unprivileged user namespaces; as root the "
            "sandbox user must be able to execute the interpreter)"
        )
