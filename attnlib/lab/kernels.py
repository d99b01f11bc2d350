"""Kernels alone: the SAN operations' backends at the shapes of each SAN stage (``python -m attnlib san-bench``),
timed through `attnlib.lab.measure` (``torch.utils.benchmark``).

SAN shapes follow ``SANConfig()`` (the [Re] configuration): at stage s (resolution 32 / 2^s) aggregation reads
the SA features (B, width/4, H, W) with weights (B, width/32, K·K, H, W), subtraction2 the relation features
(B, width/16, H, W), subtraction the position grid (1, 2, H, W). On a GPU both backends are measured side by
side; on the CPU only the reference (Triton runs there only through its interpreter, far too slow to time).
"""

from __future__ import annotations

from functools import partial

import torch

from attnlib.checks import check_choice, check_positive_int, resolve_device
from attnlib.errors import ConfigError
from attnlib.lab.measure import MIN_RUN_TIME, compare


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


def _step(call, inputs, backend, upstream) -> None:
    call(*inputs, backend=backend).backward(upstream)
    for t in inputs:
        t.grad = None


def run(batch=40, device="auto", min_run_time=MIN_RUN_TIME, dtype="float32", backends=None, cfg=None):
    """pd.DataFrame, one row per (stage, op), columns (metric, backend). backends: default both on a GPU, the
    reference alone on the CPU (naming 'triton' there needs TRITON_INTERPRET=1: a smoke test, not a timing)."""
    import pandas as pd

    from attnlib.san.model import SANConfig

    check_positive_int("batch", batch)
    dev = resolve_device(device)
    check_choice("dtype", dtype, ("float32", "float16", "bfloat16"))
    dt = getattr(torch, dtype)
    backends = tuple(backends or (("torch", "triton") if dev.type == "cuda" else ("torch",)))
    for backend in backends:
        if backend not in ("torch", "triton"):
            raise ConfigError("backends", backends, "'torch' and/or 'triton'")
    rows = []
    for stage, op, shapes, call in stage_cases(cfg or SANConfig(), batch):
        g = torch.Generator(device=dev).manual_seed(0)
        inputs = [torch.randn(s, generator=g, device=dev, dtype=dt, requires_grad=True) for s in shapes]
        row = {("stage", ""): stage, ("op", ""): op, ("input", ""): "x".join(map(str, shapes[0]))}
        steps = {}
        for backend in backends:
            upstream = torch.randn_like(call(*inputs, backend=backend))
            steps["fwd", backend] = partial(call, *inputs, backend=backend)
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
