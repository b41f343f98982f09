"""Sandbox settings: limits for one untrusted program, and how many run at once."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["GiB", "MiB", "SandboxConfig"]

MiB = 1 << 20
GiB = 1 << 30


class SandboxConfig(BaseModel):
    """Limits and placement for sandboxed Python programs (defaults suit HumanEval tests)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    timeout_s: float = Field(default=10.0, gt=0, description="wall-clock limit per program")
    cpu_s: int = Field(default=10, ge=1, description="CPU-time limit (RLIMIT_CPU), seconds")
    memory_bytes: int = Field(
        default=2 * GiB, ge=64 * MiB, description="address-space limit (RLIMIT_AS)"
    )
    max_processes: int = Field(
        default=32, ge=2, description="processes of the sandbox user (RLIMIT_NPROC)"
    )
    max_file_bytes: int = Field(
        default=16 * MiB, ge=0, description="largest file it may write (RLIMIT_FSIZE)"
    )
    max_open_files: int = Field(default=256, ge=16, description="RLIMIT_NOFILE")
    workdir_bytes: int = Field(
        default=64 * MiB, ge=MiB, description="size of its fresh tmpfs working directory"
    )
    max_output_bytes: int = Field(
        default=1 * MiB, ge=1024, description="captured stdout + stderr; more kills the program"
    )
    workers: int | None = Field(
        default=None, ge=1, description="programs run at once; default: the number of CPUs"
    )
    python: str | None = Field(
        default=None,
        description="interpreter the sandbox user runs; default /usr/bin/python3 "
        "(the administrator's pyenv under /root is unreadable to it)",
    )
    uid_base: int = Field(
        default=1_700_000_000,
        ge=1000,
        description="when started as root, each program runs as its own uid/gid, taken in turn "
        "from uid_base .. uid_base + uid_count - 1: an account with no files and no groups whose "
        "process count (RLIMIT_NPROC) is that program's alone",
    )
    uid_count: int = Field(default=65536, ge=64, description="size of that uid range")
    extra_ro_binds: tuple[str, ...] = Field(
        default=(), description="host paths made visible read-only at the same place"
    )
