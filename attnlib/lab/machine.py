"""What a measurement ran on, and whether its cores were shared: the one home of machine facts.

`machine(device)` names the CPU (model, instruction sets, cores, torch and its threads) and the GPU; the load
average and the runnable tasks of other processes say whether other work shared the cores
(`attnlib.results.timing.core_sharing`, the rule a saved report is read by too); `refuse_if_shared` stops a
measurement before it starts when they were (`MachineBusy`, unless forced).
"""

from __future__ import annotations

import os
import platform

import torch

from attnlib.checks import check, in_range, max_threads
from attnlib.results.timing import core_sharing
from attnlib.train.device import cpu_info  # the one reader of /proc/cpuinfo

#: the instruction sets a report names (what decides how fast fp32 / bf16 matmuls can be)
FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "fma")


class MachineBusy(RuntimeError):
    """The load average says the cores are shared with other work; the measurement was not started."""


def check_threads(name: str, value) -> None:
    """ConfigError unless ``value`` is an integer in [1, max_threads()]: far more threads (or lanes) than cores
    crash torch and abort libgomp."""
    check(in_range(1, max_threads())(value), name, value, f"an integer in [1, {max_threads()}]")


def usable_cores() -> int:
    """The cores of this process's CPU set (os.cpu_count() where the platform has no affinity)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def load_average() -> list[float] | None:
    """The 1-, 5- and 15-minute load averages, or None where the platform has none."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def running_others() -> int | None:
    """Runnable tasks on the machine now, this process excluded (/proc/loadavg, fourth field)."""
    try:
        with open("/proc/loadavg") as f:
            return max(0, int(f.read().split()[3].split("/")[0]) - 1)
    except (OSError, ValueError, IndexError):
        return None


def machine(device: torch.device) -> dict:
    """What the numbers were measured on (and the load average at the start)."""
    cpu, flags = cpu_info()
    info = dict(
        device=device.type,
        cpu=cpu,
        cpu_flags=sorted(flags & set(FLAGS)),
        logical_cores=os.cpu_count(),
        usable_cores=usable_cores(),
        torch_threads=torch.get_num_threads(),
        torch=torch.__version__,
        cpu_capability=torch.backends.cpu.get_cpu_capability(),
        python=platform.python_version(),
        platform=platform.platform(),
        load_average_start=load_average(),
    )
    if device.type == "cuda":
        prop = torch.cuda.get_device_properties(device)
        info.update(
            gpu=prop.name,
            gpu_memory_gb=round(prop.total_memory / 2**30, 1),
            gpu_capability=f"{prop.major}.{prop.minor}",
            cuda=torch.version.cuda,
            tf32_matmul=torch.backends.cuda.matmul.allow_tf32,
        )
    return info


def refuse_if_shared(info: dict, threads: int, consequence: str, *, cpu_only: bool = True) -> dict:
    """``core_sharing`` at the start of a measurement on ``machine()``'s ``info``; MachineBusy when it says the
    cores are shared (on a GPU too unless ``cpu_only``), naming ``consequence`` (what would be wrong) and
    --force."""
    load, usable = info["load_average_start"], info["usable_cores"]
    sharing = core_sharing(threads, load, usable=usable)
    if sharing["shared"] and not (cpu_only and info["device"] != "cpu"):
        raise MachineBusy(
            f"the load average {load} on {usable} usable cores says they are shared with other work "
            f"({sharing['rule']}): {consequence}; run on an idle machine, or pass --force to measure anyway "
            "(the report flags it)"
        )
    return sharing
