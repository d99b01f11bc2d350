"""Distributed training under torchrun (DDP: gloo on the CPU, nccl on CUDA) and the stop signals.

`distributed_env` reads (and checks) the rank and world size torchrun sets.

Under `torchrun` (env `WORLD_SIZE` > 1) `distributed_session` joins the process group and `fit` wraps the
model in DistributedDataParallel; `_stop_request` turns SIGINT/SIGTERM/SIGHUP into a flag the loop checks
between steps.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import types
from dataclasses import dataclass

import torch
import torch.distributed as dist

from attnlib.checks import check, resolve_device
from attnlib.errors import ConfigError


def distributed_env() -> tuple[int, int, int]:
    """(RANK, WORLD_SIZE, LOCAL_RANK) from the environment torchrun sets; (0, 1, 0) without it. ConfigError
    naming the variable and quoting its value as given for one that is not ASCII digits (int() would take
    '٣' or '1_0') or not in range, or WORLD_SIZE > 1 without torchrun's MASTER_ADDR / MASTER_PORT (the
    process group could never form)."""
    values, given = {}, {}
    for name, default in (("WORLD_SIZE", 1), ("RANK", 0), ("LOCAL_RANK", 0)):
        text = given[name] = os.environ.get(name, "")
        digits = text.strip(" \t\r\n")
        if digits and not (digits.isascii() and digits.isdigit() and len(digits) <= 18):
            raise ConfigError(name, text, "an integer (set by torchrun)")
        values[name] = int(digits) if digits else default
    world, rank, local = values["WORLD_SIZE"], values["RANK"], values["LOCAL_RANK"]
    check(1 <= world <= 1 << 16, "WORLD_SIZE", given["WORLD_SIZE"], "an integer >= 1 (set by torchrun)")
    check(0 <= rank < world, "RANK", given["RANK"], f"an integer in [0, WORLD_SIZE={world})")
    check(0 <= local < world, "LOCAL_RANK", given["LOCAL_RANK"], f"an integer in [0, WORLD_SIZE={world})")
    if world > 1 and not (os.environ.get("MASTER_ADDR") and os.environ.get("MASTER_PORT")):
        raise ConfigError(
            "WORLD_SIZE",
            given["WORLD_SIZE"],
            "1 unless started by torchrun (which sets MASTER_ADDR and MASTER_PORT too)",
        )
    return rank, world, local


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def current_dist() -> DistInfo:
    if dist.is_available() and dist.is_initialized():
        return DistInfo(dist.get_rank(), dist.get_world_size())
    return DistInfo()


def _all_reduce(t: torch.Tensor, info: DistInfo, op=None) -> torch.Tensor:
    if info.enabled:
        dist.all_reduce(t, op=op or dist.ReduceOp.SUM)
    return t


@contextlib.contextmanager
def _stop_request():
    """SIGINT/SIGTERM/SIGHUP (its terminal closed) as a flag checked between steps (main thread only): yields
    an object whose `signum` the first signal sets; a second signal gives up at once (KeyboardInterrupt)."""
    stop = types.SimpleNamespace(signum=None)

    def handle(signum, frame):
        if stop.signum is not None:
            raise KeyboardInterrupt
        stop.signum = signum

    main = threading.current_thread() is threading.main_thread()
    old = {s: signal.signal(s, handle) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP) if main}
    try:
        yield stop
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def distributed_session(device: str | torch.device | None = None):
    """Context for entry points: (DistInfo, this rank's device). Started by torchrun (env WORLD_SIZE > 1), it
    joins the process group (gloo on the CPU, nccl on CUDA: one GPU per local rank) and leaves it at exit."""
    rank, world, local_rank = distributed_env()  # ConfigError for a value torchrun would not set
    dev = resolve_device(device)
    if world <= 1:
        yield DistInfo(), dev
        return
    if dev.type == "cuda":
        dev = torch.device("cuda", local_rank)
        torch.cuda.set_device(dev)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    try:
        yield DistInfo(rank, world), dev
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
