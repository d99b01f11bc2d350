"""The lab's one timer, one interleaving, one measuring session and one peak-memory method.

Time: ``torch.utils.benchmark.Timer.blocked_autorange`` (``block_times``): after a warm-up that sizes them,
blocks of calls long enough that the timer's own overhead is negligible, with the accelerator synchronised
around each block, for at least ``min_run_time`` seconds. ``interleave`` times several steps in rounds, each
step in turn and the first rotating from round to round, so that a change of machine load hits all of them
alike; ``paired_ratio`` compares two of them round by round; ``compare`` is the benchmarks' A/B protocol on
it. Only Table 3's single forward passes are timed one by one (``pass_times_ms``, the [Re] protocol): in the
inference wall time that every run saves (``inference_wall_time``) and, interleaved the same way, by
`attnlib.lab.timing`.

Peak memory: what a call allocates above what existed before it, from torch's own accounting: the CUDA
caching allocator's statistics on a GPU, the profiler's allocation events on the CPU (the CPU allocator keeps
no statistics; the resident set size would count the C library's caching too).

``session``: every measurement's machine (`attnlib.lab.machine`), its refusal to start on shared cores, its
threads, and the load over it.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from contextlib import contextmanager

import numpy as np
import torch

from attnlib.checks import resolve_device
from attnlib.lab.machine import check_threads, load_average, machine, refuse_if_shared
from attnlib.results.timing import core_sharing
from attnlib.train.device import cpu_info

MIN_RUN_TIME = 0.2  # seconds per measurement (torch's default)
MiB = 2**20


def block_times(fn: Callable[[], object], min_run_time: float = MIN_RUN_TIME, *, cpu_time: bool = False):
    """Seconds per call of ``fn()`` in each timed block (``Timer.blocked_autorange``), with torch's current
    number of threads (the Timer's own default is one). ``cpu_time``: one thread, timed by this process's CPU
    time (``time.process_time``), which other processes sharing the machine barely disturb."""
    from torch.utils import benchmark  # imported on first use: it loads torch's C++ extension machinery

    clock = {"timer": time.process_time} if cpu_time else {}
    threads = 1 if cpu_time else torch.get_num_threads()
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads, **clock)
    return list(timer.blocked_autorange(min_run_time=min_run_time).times)


def interleave(
    steps: dict[str, Callable],
    rounds: int,
    timed: Callable[[Callable, int], list[float]],
    after_round: Callable[[int, dict], None] | None = None,
) -> dict[str, list[list[float]]]:
    """{name: [the times ``timed(step, r)`` returned in round r, for every round]}: ``rounds`` rounds in which
    every step is timed in turn, the first step rotating from round to round; ``after_round(r, {name: its
    times in round r})`` after each."""
    names = list(steps)
    out: dict[str, list[list[float]]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            out[name].append(timed(steps[name], r))
        if after_round is not None:
            after_round(r, {name: out[name][-1] for name in names})
    return out


def quartiles(values: list[float]) -> tuple[float, float]:
    """The first and third quartiles (both the value itself when there is one)."""
    q1, _, q3 = statistics.quantiles(values, n=4) if len(values) > 1 else (values[0],) * 3
    return q1, q3


def paired_ratio(top: list[float], bottom: list[float]) -> dict:
    """``top`` / ``bottom`` paired by round, from the two's median time in each round: ``ratio``, the median
    of the per-round ratios, with their quartiles (``round_ratio_p25`` / ``_p75``) as its spread."""
    per_round = [t / b for t, b in zip(top, bottom, strict=True)]
    q1, q3 = quartiles(per_round)
    return dict(ratio=statistics.median(per_round), round_ratio_p25=q1, round_ratio_p75=q3)


def compare(steps: dict[str, Callable], device: torch.device, rounds: int, min_run_time: float) -> dict:
    """Steps side by side: {name: {step_s, round_step_s, peak_mib}}. Each step is called once (warm-up:
    compilation, gradients, momentum buffers, one-time allocations), then once to measure its peak memory
    (``peak_memory_mb``); then ``rounds`` interleaved rounds of timed blocks (``interleave``, ``block_times``).
    ``round_step_s``: the median seconds per call of each round; ``step_s``: their median."""
    for step in steps.values():
        step()
    memory = {name: peak_memory_mb(step, device) for name, step in steps.items()}
    times = interleave(steps, rounds, lambda step, r: block_times(step, min_run_time))
    out = {}
    for name, rounds_s in times.items():
        medians = [statistics.median(t) for t in rounds_s]
        out[name] = dict(step_s=statistics.median(medians), round_step_s=medians, peak_mib=memory[name])
    return out


def device_name(device: torch.device | str) -> str:
    """A human-readable device name: the GPU's name, or the CPU model (`attnlib.train.device.cpu_info`, the one
    reader of /proc/cpuinfo) with the threads in use in words ("(1 thread)"; runs saved before wrote "(1
    threads)", which `attnlib.results.timing.device_words` reads as words)."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    threads = torch.get_num_threads()
    return f"{cpu_info()[0]} ({threads} thread{'' if threads == 1 else 's'})"


def pass_times_ms(model: torch.nn.Module, x: torch.Tensor, passes: int) -> list[float]:
    """Wall-clock milliseconds of each of ``passes`` forward passes of ``x``, waiting after each for the work it
    queued on the accelerator (a no-op on the CPU), so that the clock counts it: Table 3's timing protocol
    ([Re] main.py), here and in `attnlib.lab.timing`."""
    times = []
    for _ in range(passes):
        start = time.perf_counter()
        model(x)
        if x.device.type == "cuda":
            torch.cuda.synchronize(x.device)
        times.append((time.perf_counter() - start) * 1e3)
    return times


@torch.inference_mode()
def inference_wall_time(
    model: torch.nn.Module, device: torch.device | str, reps: int = 300, warmup: int = 10
) -> dict:
    """Table 3's protocol, as every run saves it: `warmup` untimed, then `reps` timed forward passes of one
    1×3×32×32 image in fp32 (`pass_times_ms`). Returns mean and std in ms and the device's name."""
    device = torch.device(device)
    model = model.to(device).eval()
    x = torch.randn(1, 3, 32, 32, device=device)
    pass_times_ms(model, x, warmup)
    t = np.asarray(pass_times_ms(model, x, reps))
    return {
        "wall_time_ms": float(t.mean()),
        "wall_time_std_ms": float(t.std()),
        "wall_time_reps": reps,
        "wall_time_warmup": warmup,
        "wall_time_dtype": "float32",
        "wall_time_device": device_name(device),
    }


@contextmanager
def session(device: str, threads: int | None, *, refuse: str | None, cpu_only: bool = True):
    """A measurement on ``device`` (checked) with ``threads`` torch threads (checked; None: torch's), restored
    afterwards. Yields (device, report, running): ``report["machine"]`` (`machine`: CPU, instruction sets,
    versions, the load average at the start) once the load check passed (unless ``refuse`` is None:
    `refuse_if_shared`, MachineBusy naming ``refuse``, what would be wrong, when the cores are shared; on the
    CPU alone when ``cpu_only``), and a list for the runnable tasks of other processes sampled during the
    measurement. At the end the report gains the load average after, ``load`` (`core_sharing` of the whole
    measurement), ``seconds`` and ``finished``."""
    if threads is not None:
        check_threads("threads", threads)
    dev = resolve_device(device)
    running: list[int] = []
    previous = torch.get_num_threads()
    torch.set_num_threads(threads or previous)
    try:
        used = torch.get_num_threads()
        info = machine(dev)
        if refuse is not None:
            refuse_if_shared(info, used, refuse, cpu_only=cpu_only)
        report = dict(machine=info)
        start = time.perf_counter()
        yield dev, report, running
        seconds = time.perf_counter() - start
        info["load_average_end"] = load_average()
    finally:
        torch.set_num_threads(previous)
    sampled = [n for n in running if n is not None] or None
    report["load"] = core_sharing(
        used,
        info["load_average_start"],
        info["load_average_end"],
        usable=info["usable_cores"],
        running=sampled,
    )
    report.update(seconds=seconds, finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"))


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
