"""Time and peak memory of the SAN operations' backends at the shapes of each SAN stage on CIFAR-10.

    python -m attnlib.san.bench [--batch 40] [--device auto|cpu|cuda] [--repeats 20] [--dtype float32]

Shapes follow ``SANConfig()`` (the [Re] configuration): at stage s (resolution 32 / 2^s) aggregation reads the
SA features (B, width/4, H, W) with weights (B, width/32, K·K, H, W), subtraction2 the relation features
(B, width/16, H, W), subtraction the position grid (1, 2, H, W). On a GPU both backends are measured side by
side; on the CPU only the reference (Triton runs there only through its interpreter, far too slow to time).
Peak memory is what the call allocates above what existed before it (inputs excluded): from the CUDA caching
allocator's statistics on a GPU, from the profiler's allocation events on the CPU.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from functools import partial

import pandas as pd
import torch

from attnlib.errors import ConfigError
from attnlib.san import ops
from attnlib.san.model import SANConfig
from attnlib.util import sync, timed_ms

MiB = 2**20


def stage_cases(cfg: SANConfig, batch: int):
    """Yield (stage, op, shapes, call) for each SAN stage: call(*tensors, backend=...) runs the op."""
    for s, (width, K) in enumerate(zip(cfg.widths, cfg.kernels, strict=True), start=1):
        size = 32 >> s
        mid, rel = width // cfg.mid_reduction, width // cfg.rel_reduction
        window = dict(kernel_size=K, padding=K // 2, pad_mode="reflect")
        stage = f"{s} ({size}x{size})"
        yield (
            stage,
            "aggregation",
            [(batch, mid, size, size), (batch, mid // cfg.share_planes, K * K, size, size)],
            (lambda x, w, backend, window=window: ops.aggregation(x, w, **window, backend=backend)),
        )
        yield (
            stage,
            "subtraction2",
            [(batch, rel, size, size)] * 2,
            (lambda a, b, backend, window=window: ops.subtraction2(a, b, **window, backend=backend)),
        )
        yield (
            stage,
            "subtraction",
            [(1, 2, size, size)],
            (lambda p, backend, window=window: ops.subtraction(p, **window, backend=backend)),
        )


def _cpu_peak(fn: Callable[[], None]) -> float:
    """Peak bytes allocated by fn above the level at its start, from the profiler's allocation events."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted(
        (e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"
    )
    level = peak = 0
    for _, nbytes in events:
        level += nbytes
        peak = max(peak, level)
    return peak


def measure(fn: Callable[[], None], device: torch.device, repeats: int) -> tuple[float, float]:
    """(median milliseconds, peak MiB) of fn after two warm-up calls (Triton compiles at the first)."""
    for _ in range(2):
        fn()
    sync(device)
    times = [timed_ms(fn, device) for _ in range(repeats)]
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        fn()
        sync(device)
        peak = torch.cuda.max_memory_allocated(device) - base
    else:
        peak = _cpu_peak(fn)
    return statistics.median(times), peak / MiB


def _forward(call, inputs, backend) -> None:
    call(*inputs, backend=backend)


def _step(call, inputs, backend, upstream) -> None:
    call(*inputs, backend=backend).backward(upstream)
    for t in inputs:
        t.grad = None


def run(batch=40, device="auto", repeats=20, dtype="float32", backends=None, cfg: SANConfig | None = None):
    """pd.DataFrame, one row per (stage, op), columns (metric, backend). backends: default both on a GPU, the
    reference alone on the CPU (naming 'triton' there needs TRITON_INTERPRET=1: a smoke test, not a timing)."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda") or (device == "cuda" and not torch.cuda.is_available()):
        raise ConfigError("device", device, "'auto' | 'cpu' | 'cuda' (with a visible GPU)")
    if dtype not in ("float32", "float16", "bfloat16"):
        raise ConfigError("dtype", dtype, "'float32' | 'float16' | 'bfloat16'")
    dev, dt = torch.device(device), getattr(torch, dtype)
    backends = tuple(backends or (("torch", "triton") if dev.type == "cuda" else ("torch",)))
    for backend in backends:
        if backend not in ("torch", "triton"):
            raise ConfigError("backends", backends, "'torch' and/or 'triton'")
    rows = []
    for stage, op, shapes, call in stage_cases(cfg or SANConfig(), batch):
        g = torch.Generator(device=dev).manual_seed(0)
        inputs = [torch.randn(s, generator=g, device=dev, dtype=dt, requires_grad=True) for s in shapes]
        row = {("stage", ""): stage, ("op", ""): op, ("input", ""): "x".join(map(str, shapes[0]))}
        for backend in backends:
            upstream = torch.randn_like(call(*inputs, backend=backend))
            steps = {
                "fwd": partial(_forward, call, inputs, backend),
                "fwd+bwd": partial(_step, call, inputs, backend, upstream),
            }
            for name, fn in steps.items():
                ms, mib = measure(fn, dev, repeats)
                row[(f"{name} ms", backend)] = ms
                row[(f"{name} peak MiB", backend)] = mib
        rows.append(row)
    table = pd.DataFrame(rows).set_index([("stage", ""), ("op", ""), ("input", "")])
    table.index.names = ["stage", "op", "input"]
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    table.attrs["device"] = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    return table


def main(argv=None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(prog="python -m attnlib.san.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=40, help="batch size (the [Re] SAN runs used 40)")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    parser.add_argument(
        "--repeats", type=int, default=20, help="timed calls per measurement (median reported)"
    )
    parser.add_argument("--dtype", default="float32", help="float32 | float16 | bfloat16")
    parser.add_argument(
        "--backends", nargs="+", default=None, help="torch and/or triton (default: see above)"
    )
    args = parser.parse_args(argv)
    table = run(args.batch, args.device, args.repeats, args.dtype, args.backends)
    if not any(backend == "triton" for _, backend in table.columns):
        print("CPU: measuring the reference (backend='torch') alone; the Triton kernels need a GPU.")
    print(
        f"SAN ops, batch {args.batch}, {args.dtype}, {table.attrs['device']}; median of {args.repeats} calls"
    )
    with pd.option_context(
        "display.width", 200, "display.max_columns", 20, "display.float_format", "{:.3f}".format
    ):
        print(table)
    return table


if __name__ == "__main__":
    main()
