"""Kernels alone: the machine's matmul peak, and the SAN operations' backends at the shapes of each SAN stage.

``python -m attnlib bench --peak-only`` measures the peak (the denominator of the model benchmark's
utilisation, `attnlib.lab.bench`); ``python -m attnlib san-bench`` the SAN operations. Both time through
`attnlib.lab.measure` (``torch.utils.benchmark``).

Matmul peak: square n x n @ n x n matmuls over several sizes, the fastest block of calls of each counting
(a peak is what the hardware can do: a block slowed by other work says nothing about it), with the load
average before and after and ``core_sharing``.

SAN shapes follow ``SANConfig()`` (the [Re] configuration): at stage s (resolution 32 / 2^s) aggregation reads
the SA features (B, width/4, H, W) with weights (B, width/32, K·K, H, W), subtraction2 the relation features
(B, width/16, H, W), subtraction the position grid (1, 2, H, W). On a GPU both backends are measured side by
side; on the CPU only the reference (Triton runs there only through its interpreter, far too slow to time).
"""

from __future__ import annotations

from functools import partial

import torch

from attnlib.checks import check_choice
from attnlib.errors import ConfigError
from attnlib.lab.machine import core_sharing, load_average, usable_cores
from attnlib.lab.measure import MIN_RUN_TIME, block_times, compare, session
from attnlib.results.timing import machine_words
from attnlib.train.device import resolve_device

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


# ------------------------------------------------------------------------------------------ matmul peak
def matmul_peak(
    dtype: torch.dtype, device: torch.device, sizes: tuple[int, ...], min_run_time: float = MIN_RUN_TIME
) -> dict:
    """Best FLOP/s of n x n @ n x n matmuls over ``sizes``: {"gflops", "n", "by_size": {n: best GFLOP/s}},
    each size's best the fastest of its timed blocks (``block_times``)."""
    best = {"gflops": 0.0, "n": None, "by_size": {}}
    for n in sizes:
        a = torch.randn(n, n, device=device).to(dtype)
        b = torch.randn(n, n, device=device).to(dtype)
        gflops = 2 * n**3 / min(block_times(lambda a=a, b=b: a @ b, min_run_time)) / 1e9  # 2n³ FLOPs a call
        best["by_size"][n] = gflops
        if gflops > best["gflops"]:
            best.update(gflops=gflops, n=n)
    return best


def measure_peaks(dtypes, device: torch.device, sizes: tuple[int, ...], min_run_time: float) -> dict:
    """``matmul_peak`` of every dtype, with the load average before and after and ``core_sharing``."""
    before = load_average()
    peaks = {dt: matmul_peak(DTYPES[dt], device, sizes, min_run_time) for dt in dtypes}
    after = load_average()
    threads = torch.get_num_threads()
    return dict(peaks=peaks, threads=threads, **core_sharing(threads, before, after, usable=usable_cores()))


def peak_sizes(device: torch.device, quick: bool) -> tuple[tuple[int, ...], float]:
    """(matrix sizes, seconds of timed blocks per size) of the matmul peak."""
    if quick:
        return (256,), 0.01
    return ((4096, 8192) if device.type == "cuda" else (512, 1024, 2048, 3072)), MIN_RUN_TIME


def peak(
    dtypes: tuple[str, ...] = tuple(DTYPES),
    device: str = "auto",
    *,
    threads: int | None = 1,
    quick: bool = False,
    force: bool = False,
) -> dict:
    """The matmul peak alone (``--peak-only``), by the same protocol as the benchmark's: the report holds the
    machine, ``matmul_peak`` {dtype: {"best", "n", "by_size"}} and ``load`` (``core_sharing``)."""
    for value in dtypes:
        check_choice("dtypes", value, tuple(DTYPES))
    why = None if force or quick else "the matmul peak would be too low"
    with session(device, threads, refuse=why) as (dev, report, _):
        sizes, min_run_time = peak_sizes(dev, quick)
        peaks = {dt: matmul_peak(DTYPES[dt], dev, sizes, min_run_time) for dt in dtypes}
    threads = report["machine"]["torch_threads"]
    report["settings"] = dict(quick=quick, threads=threads, sizes=list(sizes), min_run_time=min_run_time)
    report["matmul_peak"] = {dt: dict(best=p["gflops"], **p) for dt, p in peaks.items()}
    return report


def peak_line(report: dict) -> str:
    """One line: the machine, its instruction sets, the peaks and whether the cores were shared."""
    m, load = report["machine"], report.get("load", {})
    verdict = {
        True: "cores shared with other work: too low",
        False: "cores otherwise idle",
        None: "load unknown",
    }
    return (
        f"{machine_words(m, m['torch_threads'])}: matmul peak "
        + ", ".join(f"{dt} {p['best']:.1f} GFLOP/s (n={p['n']})" for dt, p in report["matmul_peak"].items())
        + f"; load {load.get('load_before')} -> {load.get('load_after')} ({verdict[load.get('shared')]})"
    )


# ------------------------------------------------------------------------------------------ SAN operations
def stage_cases(cfg, batch: int):
    """Yield (stage, op, shapes, call) for each SAN stage: call(*tensors, backend=...) runs the op."""
    from attnlib.san import ops

    for s, (width, K) in enumerate(zip(cfg.widths, cfg.kernels, strict=True), start=1):
        size = 32 >> s
        mid, rel = width // cfg.mid_reduction, width // cfg.rel_reduction
        window = dict(kernel_size=K, padding=K // 2, pad_mode="reflect")
        stage = f"{s} ({size}x{size})"
        weights = (batch, mid // cfg.share_planes, K * K, size, size)
        yield stage, "aggregation", [(batch, mid, size, size), weights], partial(ops.aggregation, **window)
        yield stage, "subtraction2", [(batch, rel, size, size)] * 2, partial(ops.subtraction2, **window)
        yield stage, "subtraction", [(1, 2, size, size)], partial(ops.subtraction, **window)


def _forward(call, inputs, backend) -> None:
    call(*inputs, backend=backend)


def _step(call, inputs, backend, upstream) -> None:
    call(*inputs, backend=backend).backward(upstream)
    for t in inputs:
        t.grad = None


def _san_options(device, dtype, backends) -> tuple[torch.device, torch.dtype, tuple[str, ...]]:
    """The device, dtype and backends of ``run``, checked (ConfigError naming the parameter)."""
    dev = resolve_device(device)
    check_choice("dtype", dtype, ("float32", "float16", "bfloat16"))
    backends = tuple(backends or (("torch", "triton") if dev.type == "cuda" else ("torch",)))
    for backend in backends:
        if backend not in ("torch", "triton"):
            raise ConfigError("backends", backends, "'torch' and/or 'triton'")
    return dev, getattr(torch, dtype), backends


def run(batch=40, device="auto", min_run_time=MIN_RUN_TIME, dtype="float32", backends=None, cfg=None):
    """pd.DataFrame, one row per (stage, op), columns (metric, backend). backends: default both on a GPU, the
    reference alone on the CPU (naming 'triton' there needs TRITON_INTERPRET=1: a smoke test, not a timing)."""
    import pandas as pd

    from attnlib.checks import check_positive_int
    from attnlib.san.model import SANConfig

    check_positive_int("batch", batch)
    dev, dt, backends = _san_options(device, dtype, backends)
    rows = []
    for stage, op, shapes, call in stage_cases(cfg or SANConfig(), batch):
        g = torch.Generator(device=dev).manual_seed(0)
        inputs = [torch.randn(s, generator=g, device=dev, dtype=dt, requires_grad=True) for s in shapes]
        row = {("stage", ""): stage, ("op", ""): op, ("input", ""): "x".join(map(str, shapes[0]))}
        steps = {}
        for backend in backends:
            upstream = torch.randn_like(call(*inputs, backend=backend))
            steps["fwd", backend] = partial(_forward, call, inputs, backend)
            steps["fwd+bwd", backend] = partial(_step, call, inputs, backend, upstream)
        for (name, backend), m in compare(steps, dev, 1, min_run_time).items():
            row[(f"{name} ms", backend)] = m["step_s"] * 1e3
            row[(f"{name} peak MiB", backend)] = m["peak_mib"]
        rows.append(row)
    table = pd.DataFrame(rows).set_index([("stage", ""), ("op", ""), ("input", "")])
    table.index.names = ["stage", "op", "input"]
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    table.attrs["device"] = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    return table
