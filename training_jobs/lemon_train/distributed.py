"""Distributed setup from the environment ``torchrun`` (and a PyTorchJob) provides.

``torchrun`` and the Kubeflow PyTorchJob both export ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``,
``MASTER_ADDR`` and ``MASTER_PORT``; an entry point calls :func:`init_from_env` first, so the same
command runs as one process locally or as many in a job. Only rank 0 publishes the policy
version and writes metrics (:attr:`DistInfo.is_main`); the others train and wait.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

__all__ = ["DistInfo", "DistributedError", "barrier", "current", "init_from_env"]


class DistributedError(RuntimeError):
    """The distributed environment variables are inconsistent (the message names them)."""


@dataclass(frozen=True, slots=True)
class DistInfo:
    rank: int
    world_size: int
    local_rank: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise DistributedError(f"${name}={raw!r}: not an integer") from None


def current() -> DistInfo:
    """This process's place in the job, read from the environment (no initialisation)."""
    world = _env_int("WORLD_SIZE", 1)
    rank = _env_int("RANK", 0)
    local = _env_int("LOCAL_RANK", rank)
    if world < 1 or not 0 <= rank < world:
        raise DistributedError(f"$RANK={rank} is not in [0, $WORLD_SIZE={world})")
    return DistInfo(rank=rank, world_size=world, local_rank=local)


def init_from_env() -> DistInfo:
    """Join the process group when ``WORLD_SIZE > 1`` (nccl on CUDA, gloo on CPU); idempotent.

    With ``WORLD_SIZE`` unset or 1 nothing is initialised: a plain local run. ``LOCAL_RANK`` is
    then removed from the environment, because accelerate (under the HF Trainer) takes any
    ``LOCAL_RANK`` as a multi-process launch and wants ``MASTER_ADDR`` even for one process.
    """
    info = current()
    if not info.distributed:
        os.environ.pop("LOCAL_RANK", None)
    if info.distributed and not dist.is_initialized():
        for name in ("MASTER_ADDR", "MASTER_PORT"):
            if not os.environ.get(name):
                raise DistributedError(
                    f"$WORLD_SIZE={info.world_size} but ${name} is unset (launch with torchrun)"
                )
        if torch.cuda.is_available():
            torch.cuda.set_device(info.local_rank % torch.cuda.device_count())
            backend = "nccl"
        else:
            backend = "gloo"
        dist.init_process_group(backend=backend, rank=info.rank, world_size=info.world_size)
    return info


def barrier() -> None:
    """Wait for every rank (a no-op in a single-process run)."""
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
