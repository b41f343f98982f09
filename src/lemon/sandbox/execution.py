"""Running untrusted Python programs, each isolated (see :mod:`lemon.sandbox.commands`).

Per program: resource limits set before exec (CPU time, address space, processes, file size,
open files, no core dumps), a wall-clock timeout, a cap on captured output; at the end the whole
process group is killed with SIGKILL, which tears down the program's PID namespace and so every
process it forked. A run *passes* only when the program ran to its end: the wrapper prints a
per-run random marker after the program's last statement, and exit status 0 without the marker
(``sys.exit(0)``, ``os._exit(0)``) is a failure. Programs run in parallel, ``workers`` at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import tempfile
import time
from collections.abc import Sequence
from enum import StrEnum
from typing import IO, Any

from pydantic import BaseModel, ConfigDict

from lemon.sandbox.commands import SandboxUnavailable, build_command
from lemon.sandbox.limits import SandboxConfig

__all__ = ["ProgramResult", "ProgramStatus", "run_program", "run_programs", "run_programs_async"]


class ProgramStatus(StrEnum):
    PASSED = "passed"
    FAILED = "failed"  # ended without the marker: an exception, a non-zero exit, an early exit
    TIMEOUT = "timeout"
    OUTPUT_LIMIT = "output_limit"
    SANDBOX_ERROR = "sandbox_error"  # the isolation itself failed to start (bwrap or setpriv)


class ProgramResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    status: ProgramStatus
    returncode: int | None
    completed: bool
    """The program ran to its last statement (the marker was printed)."""
    stdout: str
    stderr: str
    wall_s: float

    @property
    def passed(self) -> bool:
        return self.status is ProgramStatus.PASSED


def _user_processes(uid: int) -> int:
    """How many processes ``uid`` runs now (RLIMIT_NPROC counts them all)."""
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                count += os.stat(entry.path).st_uid == uid
    return count


def _limits(config: SandboxConfig) -> list[str]:
    """The argv prefix that sets the run's resource limits: ``prlimit`` (util-linux) sets them
    on itself and execs the rest, which inherits them. Not a ``preexec_fn``: that forces
    Python to fork (not vfork) and run code in the child, where a process holding gRPC
    channels (``lemon serve``) has gRPC's fork handlers restart a poller that crashes the child
    before it execs (grpc/grpc#43055: about one run in a hundred died silent, by SIGSEGV or
    SIGABRT, and the tool answered 'Error: no error message')."""
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        raise SandboxUnavailable("prlimit is missing (apt-get install -y util-linux)")
    processes = config.max_processes
    if os.geteuid() != 0:  # the sandbox shares our uid: its cap comes on top of what we run
        processes += _user_processes(os.geteuid())
    return [
        prlimit,
        f"--cpu={config.cpu_s}",
        f"--as={config.memory_bytes}",
        f"--nproc={processes}",
        f"--fsize={config.max_file_bytes}",
        f"--nofile={config.max_open_files}",
        "--core=0",
        "--",
    ]


async def _read_capped(
    stream: asyncio.StreamReader, sink: bytearray, budget: list[int], overflow: asyncio.Event
) -> None:
    while chunk := await stream.read(65536):  # drain to EOF: a full pipe never closes
        take = min(len(chunk), budget[0])
        sink += chunk[:take]
        budget[0] -= take
        if take < len(chunk):
            overflow.set()


def _input_file(payload: bytes) -> IO[bytes]:
    """The program's input as an unlinked temporary file, positioned at its start: the child
    reads it as its stdin, so no byte of it passes through the event loop. (Fed through a
    pipe, about one run in a dozen under ``lemon serve``'s uvloop got an empty stdin.)"""
    handle = tempfile.TemporaryFile()  # noqa: SIM115 (the caller closes it: a with block)
    try:
        handle.write(payload)
        handle.flush()
        handle.seek(0)
    except BaseException:
        handle.close()
        raise
    return handle


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _next_uid(config: SandboxConfig) -> int:
    """The next uid of the range, starting at a random place: a uid is reused only after
    ``uid_count`` runs, long after the kernel has released its previous processes (their
    accounting can outlive them briefly, and a shared uid would share RLIMIT_NPROC)."""
    global _uid_counter
    if _uid_counter < 0:
        _uid_counter = secrets.randbelow(config.uid_count)
    _uid_counter += 1
    return config.uid_base + _uid_counter % config.uid_count


_uid_counter = -1


async def run_program(source: str, *, config: SandboxConfig) -> ProgramResult:
    """Run one program in the sandbox and wait for it (at most ``config.timeout_s``).

    A run that ends with no output at all, not even an error, is run once more: a program that
    exits early without a word does so again, and keeps its result; a transient fault does
    not. A run whose input never reached the sandbox (the wrapper read an empty stdin and
    printed an empty marker) twice is the machine's fault, ``SANDBOX_ERROR``, never the
    program's output. (Both guarded a fault seen when the input went through a pipe under
    ``lemon serve``'s uvloop, about one run in a dozen; the input is a file now,
    :func:`_input_file`.)"""
    result, silent = await _run_once(source, config=config)
    if silent:
        result, silent = await _run_once(source, config=config)
    if silent and result.stdout == "\n\n":
        return result.model_copy(
            update={
                "status": ProgramStatus.SANDBOX_ERROR,
                "stderr": "the program's input never reached the sandbox (twice)",
            }
        )
    return result


async def _run_once(source: str, *, config: SandboxConfig) -> tuple[ProgramResult, bool]:
    """One run, and whether it ended silent: not run to its end, nothing on stdout or stderr
    (see :func:`run_program`)."""
    marker = f"LEMON-DONE-{secrets.token_hex(16)}"
    command = build_command(config, uid=_next_uid(config))  # names a missing bwrap first
    argv = [*_limits(config), *command]
    payload = marker.encode() + b"\n" + source.encode("utf-8", "surrogatepass")
    started = time.monotonic()
    with _input_file(payload) as stdin:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=stdin,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    assert process.stdout is not None
    assert process.stderr is not None
    stdout, stderr = bytearray(), bytearray()
    budget, overflow = [config.max_output_bytes], asyncio.Event()
    readers = asyncio.gather(
        _read_capped(process.stdout, stdout, budget, overflow),
        _read_capped(process.stderr, stderr, budget, overflow),
    )
    overflowed = asyncio.ensure_future(overflow.wait())
    deadline = started + config.timeout_s
    timed_out = False
    try:
        waiters: set[asyncio.Future[Any]] = {readers, overflowed}
        done, _ = await asyncio.wait(
            waiters, timeout=_left(deadline), return_when=asyncio.FIRST_COMPLETED
        )
        timed_out = not done
        if readers in done:
            try:
                await asyncio.wait_for(process.wait(), timeout=_left(deadline))
            except TimeoutError:
                timed_out = True
    finally:
        _kill_group(process.pid)
        await process.wait()
        overflowed.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await overflowed
        readers.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await readers
    wall = time.monotonic() - started
    out = stdout.decode("utf-8", "replace")
    completed = out.rstrip("\n").endswith("\n" + marker) or out.rstrip("\n") == marker
    if completed:
        out = out.rstrip("\n").removesuffix(marker).removesuffix("\n")
    err = stderr.decode("utf-8", "replace")
    # the wrapper prints the marker it read after running the program: exactly an empty one
    # (ours is never empty) means it read no input at all
    silent = not completed and not err and out.strip("\n") == ""
    if overflow.is_set():
        status = ProgramStatus.OUTPUT_LIMIT
    elif not completed and err.startswith(("bwrap: ", "setpriv: ")) and not out:
        status = ProgramStatus.SANDBOX_ERROR
    elif timed_out:
        status = ProgramStatus.TIMEOUT
    elif completed and process.returncode == 0:
        status = ProgramStatus.PASSED
    else:
        status = ProgramStatus.FAILED
    result = ProgramResult(
        status=status,
        returncode=process.returncode,
        completed=completed,
        stdout=out,
        stderr=err,
        wall_s=wall,
    )
    return result, silent


async def run_programs_async(
    sources: Sequence[str], *, config: SandboxConfig | None = None
) -> list[ProgramResult]:
    """Run every program, ``config.workers`` (default: CPU count) at a time; input order kept."""
    config = config or SandboxConfig()
    limit = asyncio.Semaphore(config.workers or os.cpu_count() or 1)

    async def one(source: str) -> ProgramResult:
        async with limit:
            return await run_program(source, config=config)

    return list(await asyncio.gather(*(one(source) for source in sources)))


def run_programs(
    sources: Sequence[str], *, config: SandboxConfig | None = None
) -> list[ProgramResult]:
    """Synchronous :func:`run_programs_async` (not from inside a running event loop)."""
    return asyncio.run(run_programs_async(sources, config=config))
