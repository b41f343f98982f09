"""The command line that isolates one program: setpriv (when root) + bubblewrap + Python.

Inside: a fresh user, PID, network, IPC, UTS and cgroup namespace (``--unshare-all``), a new
session, ``/usr`` read-only and nothing else of the host's file system, ``/proc`` and a
minimal ``/dev``, a fresh size-limited tmpfs at ``/sandbox`` as working directory and
``$TMPDIR``, an empty environment. ``--die-with-parent`` plus the PID namespace mean that
killing the outer process kills every process the program started.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from lemon.sandbox.limits import SandboxConfig

__all__ = ["WORKDIR", "WRAPPER", "SandboxUnavailable", "build_command", "resolve_python"]


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot be set up on this machine; the message says what is missing."""


WORKDIR = "/sandbox"

WRAPPER = """\
import sys
def _lemon_run():
    data = sys.stdin.buffer.read()
    marker, _, source = data.partition(b"\\n")
    out = sys.stdout  # the program may rebind sys.stdout; the marker goes to the real one
    code = compile(source, "<program>", "exec")
    exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
    out.flush()
    out.write("\\n" + marker.decode() + "\\n")
    out.flush()
_lemon_run()
"""
"""Runs the program read from stdin after a first line holding the run's random marker, and
prints the marker only when the program ran to its end (``sys.exit``, ``os._exit``, an
exception or a signal all skip it). The program never sees the marker in its source."""

_PYTHON_CANDIDATES = ("/usr/bin/python3", "/usr/local/bin/python3")


def resolve_python(config: SandboxConfig) -> str:
    """The interpreter to run inside the sandbox (an absolute path that exists)."""
    candidates = (config.python,) if config.python else _PYTHON_CANDIDATES
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise SandboxUnavailable(
        f"no Python interpreter for the sandbox (tried {', '.join(c for c in candidates if c)}); "
        "install Debian's python3-minimal (apt-get install -y python3-minimal) or set "
        "SandboxConfig.python"
    )


def _root_mounts(python: str, extra: tuple[str, ...]) -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    prefix = Path(python).resolve().parent.parent
    if not str(prefix).startswith("/usr"):
        args += ["--ro-bind", str(prefix), str(prefix)]
    for visible in extra:
        args += ["--ro-bind", visible, visible]
    return args


def build_command(config: SandboxConfig, *, uid: int) -> list[str]:
    """argv for one program; ``uid`` is the account it runs as when started as root."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(
            "bubblewrap is not installed (apt-get install -y bubblewrap; scripts/setup does it "
            "when run as root)"
        )
    python = resolve_python(config)
    argv: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise SandboxUnavailable("setpriv is missing (apt-get install -y util-linux)")
        argv += [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    argv += [
        bwrap,
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
        *_root_mounts(python, config.extra_ro_binds),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(config.workdir_bytes),
        "--tmpfs",
        WORKDIR,
        "--chdir",
        WORKDIR,
        "--clearenv",
        "--setenv",
        "HOME",
        WORKDIR,
        "--setenv",
        "TMPDIR",
        WORKDIR,
        "--setenv",
        "PATH",
        "/usr/bin:/bin",
        "--setenv",
        "LANG",
        "C.UTF-8",
        python,
        "-I",
        "-S",
        "-B",
        "-c",
        WRAPPER,
    ]
    return argv
