"""The benchmarks' one timer, one interleaving, one thread setting and one peak-memory method.

Time: ``torch.utils.benchmark.Timer.blocked_autorange``: after a warm-up that sizes them, blocks of calls long
enough that the timer's own overhead is negligible, with the accelerator synchronised around each block, run
for at least ``min_run_time`` seconds; ``interleaved_blocks`` gives several calls their blocks in turn;
``mean_seconds`` times a fixed count of calls (``Timer.timeit``: the throughput behind the CPU-hour estimates).
By hand only the interleaved Table-3 protocol (`attnlib.lab.timing`).

Peak memory: what a call allocates above what existed before it, from torch's own accounting: the CUDA
caching allocator's statistics on a GPU, the profiler's allocation events on the CPU (the CPU allocator keeps
no statistics; the resident set size would count the C library's caching too).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

MIN_RUN_TIME = 0.2  # seconds per measurement (torch's default)
MiB = 2**20


def block_times(fn: Callable[[], object], min_run_time: float = MIN_RUN_TIME) -> list[float]:
    """Seconds per call of ``fn()`` in each timed block (``Timer.blocked_autorange``), with torch's current
    number of threads (the Timer's own default is one)."""
    from torch.utils import benchmark  # imported on first use: it loads torch's C++ extension machinery

    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    return list(timer.blocked_autorange(min_run_time=min_run_time).times)


def mean_seconds(fn: Callable[[], object], calls: int, *, warmup: int = 0, cpu_time: bool = False) -> float:
    """Mean seconds per call of ``fn()`` over ``calls`` timed calls (``Timer.timeit``) after ``warmup`` untimed
    ones. ``cpu_time``: one thread, timed by this process's CPU time (``time.process_time``), which other
    processes sharing the machine barely disturb; otherwise wall time with torch's threads, synchronised."""
    from torch.utils import benchmark

    for _ in range(warmup):
        fn()
    clock = {"timer": time.process_time} if cpu_time else {}
    threads = 1 if cpu_time else torch.get_num_threads()
    return benchmark.Timer("fn()", globals={"fn": fn}, num_threads=threads, **clock).timeit(calls).mean


def interleaved_blocks(steps: dict[str, Callable[[], object]], repeats: int, min_run_time: float) -> dict:
    """{name: seconds per call of each timed block}: ``repeats`` rounds in which every step is timed in turn
    (``block_times``), so that a change of machine load hits all of them alike."""
    times = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            times[name] += block_times(step, min_run_time)
    return times


@contextmanager
def torch_threads(threads: int | None) -> Iterator[int]:
    """Within the block torch uses ``threads`` intra-op threads (None: as it is), restored afterwards; yields
    the number in use."""
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(previous)


def peak_memory_mb(fn: Callable[[], object], device: torch.device) -> float:
    """Peak MiB that one call of ``fn`` allocates above the level at its start (inputs and weights excluded)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return (torch.cuda.max_memory_allocated(device) - before) / MiB
    from torch.profiler import ProfilerActivity, profile

    quiet_profiler()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted(
        (e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"
    )
    level = peak = 0
    for _, nbytes in events:  # allocations positive, frees negative, in the order they happened
        level += nbytes
        peak = max(peak, level)
    return peak / MiB


def quiet_profiler() -> None:
    """Before the process's first profiler: no kineto log lines (a start and a stop line on stderr for every
    profiled call otherwise), unless $KINETO_LOG_LEVEL says otherwise."""
    os.environ.setdefault("KINETO_LOG_LEVEL", "99")


MEMORY_METHOD = {
    "cpu": "peak of torch's allocations during the step above the level at its start (torch.profiler's "
    "memory events): activations, gradients and temporaries the step allocates",
    "cuda": "torch.cuda.max_memory_allocated during the step minus memory_allocated before it",
}
