"""Throughput and utilisation of the paper's models: attnlib against the plain formulation.

``python -m attnlib.bench [--quick] [--out results/bench/cpu.json] [--all] [--threads N] [--profile] [--force]``

In one process, side by side, for each model (learned 2D + content, quadratic isotropic positional-only)
at the ``paper`` and ``budget`` shapes (``attnlib.experiments.resolve``), in fp32 and bf16 autocast:
forward + backward images/s (and eval-mode forward images/s), peak memory, FLOPs per image
(``torch.utils.flop_counter.FlopCounterMode``), achieved FLOP/s and the utilisation against this
machine's matmul peak, measured in the same run with square matmuls (best of several sizes and repetitions,
before and after the cases, with the load average around each). On a CPU whose load average says its cores
are shared with other work the benchmark refuses to start (``--force`` measures anyway; the report's
``load`` flags it): a peak measured on a shared core is too low and inflates every utilisation.
``--profile`` adds one profiled step per row: profiler self time per op category (GEMM, copies, dropout
RNG, softmax, ...) and the top ops, i.e. where the time goes. ``--all`` also runs ``attnlib.san.bench``.

The *plain* formulation (``plain_copy``: ``attnlib.attention.reference.PlainAttention`` layers) is the same
math written the obvious way, as the official code and the [Re] reproduction write it: explicit score
tensors of shape (B, H, W, heads, H, W) built with ``einsum``, a softmax over the flattened keys,
``nn.Dropout``, and ``einsum`` with the values. It is a copy with the same weights, so both give the same
outputs and gradients (``tests/test_bench.py`` checks it).

Paper shapes: batch 100, 16 x 16 tokens, hidden 400, 9 heads; by default one of the six layers is timed
(``--layers``; the time per layer is linear in depth, ``est_model_images_per_s`` scales it).

Timing: per implementation a warm-up step (which also counts the FLOPs) and one step that measures
memory, then the median of ``repeats`` timed steps, implementations interleaved step by step. CPU: wall
clock; memory = peak resident set size (``VmHWM`` from /proc/self/status, reset through
/proc/self/clear_refs after ``malloc_trim``) minus the resident size before the step. CUDA: CUDA
events; memory = ``torch.cuda.max_memory_allocated`` minus the memory allocated before the step.

On a GPU machine: ``python -m attnlib.bench --all --device cuda --layers 0 --out results/bench/cuda.json``.
On a CPU shared with other jobs, ``--threads 1`` avoids OpenMP threads waiting for each other.
"""

from __future__ import annotations

import argparse
import copy
import ctypes
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlib.attention import MultiHeadSelfAttention2d
from attnlib.attention.reference import PlainAttention
from attnlib.checks import check_choice, check_positive_int
from attnlib.errors import ConfigError
from attnlib.util import sync, timed_ms


# ------------------------------------------------------------------------------ plain formulation
def plain_copy(model: nn.Module) -> nn.Module:
    """A deep copy of ``model`` (same weights) whose attention layers are ``PlainAttention`` and whose
    dropouts are ``nn.Dropout``."""
    plain = copy.deepcopy(model)
    for module in list(plain.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, MultiHeadSelfAttention2d):
                setattr(module, name, PlainAttention(child))
    for module in list(plain.modules()):  # and torch's own dropout, not attnlib's cheaper mask
        for name, child in list(module.named_children()):
            if isinstance(child, nn.Dropout) and type(child) is not nn.Dropout:
                setattr(module, name, nn.Dropout(child.p).train(child.training))
    return plain


# ------------------------------------------------------------------------------------------ cases
MODELS = ("learned_content_9h", "quadratic_iso_9h")  # experiment names (attnlib.experiments)
SHAPES = ("paper", "budget")
DTYPES = ("fp32", "bf16")
IMPLS = ("attnlib", "plain")
_QUICK = dict(layers=1, hidden=16, mlp=16, heads=2, downsample=4)  # --quick: a smoke test of the bench


@dataclass(frozen=True)
class Case:
    """One model at one set of shapes: ``model`` are PaperConfig fields; ``layers_model`` the full depth."""

    shapes: str
    name: str
    model: dict
    batch: int
    layers_model: int
    source: str


def cases(
    shapes: tuple[str, ...], names: tuple[str, ...], batch: int | None, layers: int | None, quick: bool
):
    """The cases to time. ``layers`` (paper shapes) times fewer layers than the model has."""
    out = []
    for shape in shapes:
        check_choice("shapes", shape, SHAPES)
        for name in names:
            model, b, source = _resolve(name, shape)
            full = model.get("layers", 6)
            if quick:
                model, b, source = {**model, **_QUICK}, 4, source + "; --quick: tiny model"
            elif shape == "paper" and layers is not None:
                model = {**model, "layers": layers}
            out.append(Case(shape, name, model, batch or b, full, source))
    return out


def _resolve(name: str, shape: str) -> tuple[dict, int, str]:
    """(PaperConfig fields, batch, where they come from) of experiment ``name`` at preset ``shape``."""
    check_choice("models", name, MODELS)
    from attnlib import experiments

    rc = experiments.resolve(name, shape)
    return dict(rc.model), rc.train.batch_size, f"attnlib.experiments.resolve({name!r}, {shape!r})"


# -------------------------------------------------------------------------------------- measuring
def _timed(fn: Callable[[], None], device: torch.device) -> float:
    """Seconds of one call: CUDA events on a GPU, wall clock on the CPU."""
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize(device)
        return start.elapsed_time(end) / 1e3
    return timed_ms(fn, device) / 1e3


def _proc_status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_cpu_peak() -> bool:
    """Return freed heap memory to the OS (glibc malloc_trim) and reset the RSS high-water mark."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current RSS
        return True
    except OSError:
        return False


CPU_MEMORY_METHOD = (
    "peak RSS during the step (VmHWM after a reset through /proc/self/clear_refs, after malloc_trim) "
    "minus RSS before it: activations, gradients and temporaries the step allocates"
)
CUDA_MEMORY_METHOD = "torch.cuda.max_memory_allocated during the step minus memory_allocated before it"


def peak_memory_mb(fn: Callable[[], None], device: torch.device) -> float | None:
    """Extra memory one call needs at its peak (MB). See CPU_MEMORY_METHOD / CUDA_MEMORY_METHOD."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return (torch.cuda.max_memory_allocated(device) - before) / 2**20
    if not _reset_cpu_peak():
        fn()
        return None
    before = _proc_status_kib("VmRSS")
    fn()
    peak = _proc_status_kib("VmHWM")
    return None if before is None or peak is None else (peak - before) / 1024


def matmul_peak(dtype: torch.dtype, device: torch.device, sizes: tuple[int, ...], repeats: int = 5) -> dict:
    """Best FLOP/s of n x n @ n x n matmuls over ``sizes`` and ``repeats`` timed calls of each (after one
    warm-up call): {"gflops", "n", "by_size": {n: best GFLOP/s}}. A peak is what the hardware can do, so the
    fastest call counts, not the median (a call slowed by other work says nothing about the peak)."""
    best = {"gflops": 0.0, "n": None, "by_size": {}}
    for n in sizes:
        a = torch.randn(n, n, device=device).to(dtype)
        b = torch.randn(n, n, device=device).to(dtype)
        call = lambda a=a, b=b: a @ b  # noqa: E731
        _timed(call, device)  # warm-up
        t = min(_timed(call, device) for _ in range(repeats))
        gflops = 2 * n**3 / t / 1e9
        best["by_size"][n] = gflops
        if gflops > best["gflops"]:
            best.update(gflops=gflops, n=n)
    return best


#: Other work may use this much of a core beyond the cores a measurement leaves free before its cores count
#: as shared (load averages are averages: a short job of another user is not a second tenant).
SHARED_MARGIN = 0.5


class MachineBusy(RuntimeError):
    """The load average says the cores are shared with other work; the measurement was not started."""


def core_sharing(
    threads: int,
    load_before: list[float] | None,
    load_after: list[float] | None = None,
    *,
    usable: int,
    running: list[int] | None = None,
) -> dict:
    """Whether the load says the ``threads`` cores a measurement used were shared with other work.

    The other work's load is the largest of: the 1-minute load average before the measurement; the one
    after it minus this measurement's own ``threads`` (an underestimate when it lasted under a minute); and
    the mean of ``running``, the runnable tasks of other processes sampled during it. The cores count as
    shared when that load exceeds the cores the measurement leaves free (``usable − threads``) by more than
    SHARED_MARGIN; unknown (None) when no load could be read."""
    estimates = []
    if load_before:
        estimates.append(load_before[0])
    if load_after:
        estimates.append(max(0.0, load_after[0] - threads))
    if running:
        estimates.append(statistics.fmean(running))
    free = max(0, usable - threads)
    other = max(estimates) if estimates else None
    return dict(
        load_before=load_before,
        load_after=load_after,
        running_others=running,
        other_load=None if other is None else round(other, 2),
        free_cores=free,
        shared=None if other is None else other > free + SHARED_MARGIN,
        rule=f"shared when other work's load exceeds the {free} core(s) left free by more than {SHARED_MARGIN}",
    )


def measure_peaks(dtypes, device: torch.device, sizes: tuple[int, ...], repeats: int = 5) -> dict:
    """``matmul_peak`` of every dtype, with the load average before and after and ``core_sharing``."""
    before = _load()
    peaks = {dt: matmul_peak(_TORCH_DTYPES[dt], device, sizes, repeats) for dt in dtypes}
    after = _load()
    usable = machine(device)["usable_cores"]
    return dict(
        peaks=peaks,
        sizes=list(sizes),
        repeats=repeats,
        threads=torch.get_num_threads(),
        **core_sharing(torch.get_num_threads(), before, after, usable=usable),
    )


def _peak_sizes(device: torch.device, quick: bool) -> tuple[tuple[int, ...], int]:
    """(matrix sizes, timed calls per size) of the matmul peak."""
    if quick:
        return (256,), 1
    return ((4096, 8192) if device.type == "cuda" else (512, 1024, 2048, 3072)), 5


def _refuse_if_shared(info: dict, threads: int) -> None:
    """MachineBusy when ``machine()``'s load average says the CPU cores are shared (no check on a GPU)."""
    if info["device"] != "cpu":
        return
    load, usable = info["load_average_start"], info["usable_cores"]
    sharing = core_sharing(threads, load, usable=usable)
    if sharing["shared"]:
        raise MachineBusy(
            f"the load average {load} on {usable} usable cores says they are shared with other work "
            f"({sharing['rule']}): the matmul peak and the throughputs would be too low; run on an idle "
            "machine, or pass --force to measure anyway (the report flags it)"
        )


def peak(
    dtypes: tuple[str, ...] = DTYPES,
    device: str = "auto",
    *,
    threads: int | None = 1,
    quick: bool = False,
    force: bool = False,
) -> dict:
    """The matmul peak alone (``--peak-only``), by the same protocol as the benchmark's: the report holds the
    machine, ``matmul_peak`` {dtype: {"best", "n", "by_size"}} and ``load`` (``core_sharing``)."""
    for value in dtypes:
        check_choice("dtypes", value, DTYPES)
    dev = _device(device)
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        info = machine(dev)
        if not (force or quick):
            _refuse_if_shared(info, torch.get_num_threads())
        sizes, repeats = _peak_sizes(dev, quick)
        measured = measure_peaks(dtypes, dev, sizes, repeats)
    finally:
        torch.set_num_threads(previous)
    info["load_average_end"] = measured["load_after"]
    return dict(
        machine=info,
        settings=dict(quick=quick, threads=measured["threads"], sizes=list(sizes), repeats=repeats),
        matmul_peak={dt: dict(best=p["gflops"], **p) for dt, p in measured["peaks"].items()},
        load={k: v for k, v in measured.items() if k not in ("peaks", "sizes", "repeats", "threads")},
        finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    )


def _autocast(device: torch.device, dtype: str):
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=dtype == "bf16")


def train_step(model: nn.Module, x: Tensor, y: Tensor, device: torch.device, dtype: str) -> None:
    """Forward + backward of the cross-entropy loss (gradients freed afterwards; no optimiser step)."""
    with _autocast(device, dtype):
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    model.zero_grad(set_to_none=True)


def infer_step(model: nn.Module, x: Tensor, device: torch.device, dtype: str) -> None:
    with torch.no_grad(), _autocast(device, dtype):
        model(x)


def measure(
    nets: dict[str, nn.Module], batch: int, device: torch.device, dtype: str, repeats: int, inference: bool
):
    """Time implementations of one model side by side: {impl: row}.

    Per implementation: a warm-up step that counts FLOPs, one step that measures memory; then ``repeats``
    rounds in which every implementation takes one timed step in turn (interleaved, so that a change of
    machine load hits all of them alike); the same for eval-mode forward passes when ``inference``.
    """
    from torch.utils.flop_counter import FlopCounterMode

    x = torch.randn(batch, 3, 32, 32, device=device)
    y = torch.randint(0, next(iter(nets.values())).cfg.num_classes, (batch,), device=device)
    steps = {impl: (lambda m=m: train_step(m, x, y, device, dtype)) for impl, m in nets.items()}
    rows = {}
    for impl, step in steps.items():
        nets[impl].train()
        counter = FlopCounterMode(display=False)
        with counter:
            step()
        sync(device)
        rows[impl] = dict(
            peak_mem_mb=peak_memory_mb(step, device),
            gflop_per_image=counter.get_total_flops() / batch / 1e9,
        )
    times = {impl: [] for impl in nets}
    for _ in range(repeats):
        for impl, step in steps.items():
            times[impl].append(_timed(step, device))
    for impl, row in rows.items():
        row.update(step_s=statistics.median(times[impl]), step_s_min=min(times[impl]))
        row["images_per_s"] = batch / row["step_s"]
    if inference:
        fwds = {impl: (lambda m=m: infer_step(m, x, device, dtype)) for impl, m in nets.items()}
        for impl, fwd in fwds.items():
            nets[impl].eval()
            fwd()
        times = {impl: [] for impl in nets}
        for _ in range(repeats):
            for impl, fwd in fwds.items():
                times[impl].append(_timed(fwd, device))
        for impl, row in rows.items():
            row["infer_images_per_s"] = batch / statistics.median(times[impl])
            nets[impl].train()
    return rows


# where the time goes: profiler self time of each aten op, grouped
_CATEGORIES = {
    "gemm": ("mm", "addmm", "bmm", "baddbmm", "addbmm", "_addmm_activation", "_scaled_dot_product"),
    "softmax": ("_softmax", "_softmax_backward_data", "_log_softmax", "_log_softmax_backward_data"),
    "dropout_rng": ("random_", "bernoulli_", "uniform_", "masked_fill_", "lt", "native_dropout"),
    "copy_cast": ("copy_", "clone", "contiguous", "_to_copy", "to"),
    "layer_norm": ("native_layer_norm", "native_layer_norm_backward"),
    "gather_scatter": ("gather", "scatter_add_", "index", "index_select", "index_add_", "embedding"),
}


def _category(name: str) -> str:
    op = name.removeprefix("aten::")
    for category, ops in _CATEGORIES.items():
        if op in ops or (category == "gemm" and op.startswith("_scaled_dot_product")):
            return category
    return "elementwise_other"


def profile_step(model: nn.Module, batch: int, device: torch.device, dtype: str, top: int = 12) -> dict:
    """One forward+backward step under torch.profiler: self time per category (ms) and the top ops."""
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(batch, 3, 32, 32, device=device)
    y = torch.randint(0, model.cfg.num_classes, (batch,), device=device)
    model.train()
    train_step(model, x, y, device, dtype)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities, record_shapes=True) as prof:
        train_step(model, x, y, device, dtype)
        sync(device)
    attr = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    events = [e for e in prof.key_averages(group_by_input_shape=True) if e.key.startswith("aten::")]
    by_category: dict[str, float] = {}
    for e in events:
        by_category[_category(e.key)] = by_category.get(_category(e.key), 0.0) + getattr(e, attr) / 1e3
    total = sum(by_category.values())
    ops = sorted(events, key=lambda e: getattr(e, attr), reverse=True)[:top]
    return dict(
        total_ms=total,
        category_ms={k: round(v, 1) for k, v in sorted(by_category.items(), key=lambda kv: -kv[1])},
        category_share={k: round(v / total, 3) for k, v in by_category.items()} if total else {},
        top_ops=[
            dict(
                op=e.key, shapes=str(e.input_shapes)[:120], ms=round(getattr(e, attr) / 1e3, 1), calls=e.count
            )
            for e in ops
        ],
    )


# ------------------------------------------------------------------------------------------ machine
def machine(device: torch.device) -> dict:
    """What the numbers were measured on."""
    cpu = platform.processor() or platform.machine()
    flags = []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and cpu in ("", platform.machine()):
                    cpu = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    flags = sorted(have & {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "fma"})
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    info = dict(
        device=device.type,
        cpu=cpu,
        cpu_flags=flags,
        logical_cores=os.cpu_count(),
        usable_cores=usable,
        torch_threads=torch.get_num_threads(),
        torch=torch.__version__,
        cpu_capability=torch.backends.cpu.get_cpu_capability(),
        python=platform.python_version(),
        platform=platform.platform(),
        load_average_start=_load(),
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


def _load() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


# ------------------------------------------------------------------------------------------ running
def run(*args, threads: int | None = None, **kwargs) -> dict:
    """Run the benchmark (arguments of ``_run``) with ``threads`` intra-op threads (None: torch's
    default), restoring the previous setting afterwards. Returns the JSON-ready report."""
    previous = torch.get_num_threads()
    if threads is not None:
        check_positive_int("threads", threads)
        torch.set_num_threads(threads)
    try:
        return _run(*args, **kwargs)
    finally:
        torch.set_num_threads(previous)


def _run(
    shapes: tuple[str, ...] = SHAPES,
    models: tuple[str, ...] = MODELS,
    dtypes: tuple[str, ...] = DTYPES,
    impls: tuple[str, ...] = IMPLS,
    device: str = "auto",
    batch: int | None = None,
    layers: int | None = 1,
    repeats: int = 3,
    inference: bool = True,
    quick: bool = False,
    profile: bool = False,
    force: bool = False,
    log: Callable[[str], None] = print,
) -> dict:
    """The benchmark; returns the JSON-ready report (``rows`` holds one dict per measurement).

    On the CPU it refuses to start (MachineBusy) when the load average says the cores are shared, unless
    ``force`` or ``quick``; the report's ``load`` flags it either way."""
    from attnlib.models import make

    for name, values, allowed in (("dtypes", dtypes, DTYPES), ("impls", impls, IMPLS)):
        for value in values:
            check_choice(name, value, allowed)
    dev = _device(device)
    todo = cases(shapes, models, batch, layers, quick)  # validates before any work
    settings = dict(repeats=repeats, quick=quick, layers=layers, threads=torch.get_num_threads())
    report = dict(machine=machine(dev), settings=settings, rows=[])
    threads, usable = torch.get_num_threads(), report["machine"]["usable_cores"]
    load = report["machine"]["load_average_start"]
    if not (force or quick):
        _refuse_if_shared(report["machine"], threads)
    sizes, peak_repeats = _peak_sizes(dev, quick)
    start = measure_peaks(dtypes, dev, sizes, peak_repeats)
    log(
        "matmul peak: "
        + ", ".join(f"{dt} {p['gflops']:.1f} GFLOP/s (n={p['n']})" for dt, p in start["peaks"].items())
        + f"; load {start['load_before']} -> {start['load_after']}"
        + (" (cores shared: too low)" if start["shared"] else "")
    )
    for case in todo:
        torch.manual_seed(0)
        with dev:
            model = make("paper", **case.model)
        for dtype in dtypes:
            nets = {impl: model if impl == "attnlib" else plain_copy(model) for impl in impls}
            log(f"{case.shapes} {case.name} {dtype}: batch {case.batch}, {case.model['layers']} layer(s)")
            measured = measure(nets, case.batch, dev, dtype, repeats, inference)
            for impl, m in measured.items():
                row = dict(
                    shapes=case.shapes,
                    model=case.name,
                    dtype=dtype,
                    impl=impl,
                    batch=case.batch,
                    layers_timed=case.model["layers"],
                    layers_model=case.layers_model,
                    config=case.model,
                    config_source=case.source,
                    **m,
                )
                row["achieved_gflops"] = row["gflop_per_image"] * row["images_per_s"]
                row["est_model_images_per_s"] = (
                    row["images_per_s"] * row["layers_timed"] / row["layers_model"]
                )
                row["load_average"] = _load()
                if profile:
                    row["profile"] = profile_step(nets[impl], case.batch, dev, dtype)
                report["rows"].append(row)
            del nets
    end = measure_peaks(dtypes, dev, sizes, peak_repeats)
    best = {dt: max(start["peaks"][dt]["gflops"], end["peaks"][dt]["gflops"]) for dt in dtypes}
    report["matmul_peak"] = {
        dt: dict(start=start["peaks"][dt], end=end["peaks"][dt], best=best[dt]) for dt in dtypes
    }
    report["peak_load"] = {
        when: {k: v for k, v in m.items() if k != "peaks"} for when, m in (("start", start), ("end", end))
    }
    report["machine"]["load_average_end"] = _load()
    report["load"] = core_sharing(threads, load, report["machine"]["load_average_end"], usable=usable)
    report["load"]["peak_shared"] = bool(start["shared"] and end["shared"])
    for row in report["rows"]:
        row["peak_gflops"] = best[row["dtype"]]
        row["utilisation"] = row["achieved_gflops"] / best[row["dtype"]]
    _speedups(report["rows"])
    report["notes"] = dict(
        memory=CUDA_MEMORY_METHOD if dev.type == "cuda" else CPU_MEMORY_METHOD,
        timing=f"median of {repeats} forward+backward steps after one warm-up step and one memory step, "
        "implementations interleaved step by step; "
        + ("CUDA events" if dev.type == "cuda" else "wall clock"),
        flops="torch.utils.flop_counter.FlopCounterMode on the warm-up step (forward+backward), per image",
        utilisation="achieved FLOP/s (the implementation's own FLOPs) over the matmul peak: the fastest of "
        f"{peak_repeats} timed n x n matmuls for n in {list(sizes)}, measured at the start and at the end of "
        "the run with the load average before and after each (peak_load; peak_shared when both say the "
        "cores were shared), the better of the two; model_utilisation counts the plain formulation's FLOPs instead "
        "(attnlib's bilinear path does fewer FLOPs for the same function)",
        layers="paper shapes time `layers_timed` of the model's `layers_model` layers (time per layer is "
        "linear in depth); est_model_images_per_s scales images_per_s by layers_timed / layers_model",
        plain="PlainAttention: the same math with explicit (B, H, W, heads, H, W) scores (einsum, softmax, "
        "dropout), same weights",
    )
    return report


_TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name not in ("cpu", "cuda") or (name == "cuda" and not torch.cuda.is_available()):
        raise ConfigError("device", name, "auto, cpu" + (", cuda" if torch.cuda.is_available() else ""))
    return torch.device(name)


def _speedups(rows: list[dict]) -> None:
    """attnlib rows get ``speedup_vs_plain`` (training) and ``infer_speedup_vs_plain``; every row gets
    ``model_gflop_per_image`` (the plain formulation's count: the FLOPs of the model as written, whatever
    an implementation saves) and ``model_utilisation`` = model FLOPs x images/s / matmul peak."""
    plain = {(r["shapes"], r["model"], r["dtype"]): r for r in rows if r["impl"] == "plain"}
    for r in rows:
        ref = plain.get((r["shapes"], r["model"], r["dtype"]))
        r["model_gflop_per_image"] = (ref or r)["gflop_per_image"]
        r["model_utilisation"] = r["model_gflop_per_image"] * r["images_per_s"] / r["peak_gflops"]
        if r["impl"] == "attnlib" and ref is not None:
            r["speedup_vs_plain"] = r["images_per_s"] / ref["images_per_s"]
            if "infer_images_per_s" in r:
                r["infer_speedup_vs_plain"] = r["infer_images_per_s"] / ref["infer_images_per_s"]


def table(report: dict):
    """The report's rows as a pandas DataFrame (one row per shapes x model x dtype x impl)."""
    import pandas as pd

    cols = [
        "shapes", "model", "dtype", "impl", "batch", "layers_timed", "images_per_s", "speedup_vs_plain",
        "infer_images_per_s", "infer_speedup_vs_plain", "peak_mem_mb", "gflop_per_image",
        "achieved_gflops", "utilisation", "model_utilisation",
    ]  # fmt: skip
    df = pd.DataFrame(report["rows"])
    return df[[c for c in cols if c in df.columns]]


def profile_table(report: dict):
    """Share of the profiled step's op time per category, one row per measurement (None if not profiled)."""
    import pandas as pd

    rows = [
        {**{k: r[k] for k in ("shapes", "model", "dtype", "impl")}, "total_ms": r["profile"]["total_ms"],
         **r["profile"]["category_share"]}
        for r in report["rows"] if "profile" in r
    ]  # fmt: skip
    return pd.DataFrame(rows).fillna(0.0) if rows else None


def write_json(report: dict, path: str | os.PathLike) -> Path:
    """Write atomically (``attnlib.util.write_bytes``: a temporary file in the same folder, then a rename)."""
    from attnlib.util import write_bytes

    path = Path(path)
    write_bytes(path, (json.dumps(report, indent=2, default=str) + "\n").encode())
    return path


def main(argv: list[str] | None = None) -> dict:
    """Command line: ``python -m attnlib.bench [--quick] [--out PATH] [--all] ...``."""
    parser = argparse.ArgumentParser(prog="python -m attnlib.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny models, one repeat: a few seconds")
    parser.add_argument("--out", default=None, help="JSON report (default results/bench/<device>.json)")
    parser.add_argument(
        "--all", action="store_true", help="also run the SAN kernel benchmark (attnlib.san.bench)"
    )
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    parser.add_argument(
        "--shapes", nargs="+", default=None, help=f"of {', '.join(SHAPES)} (default: all; --quick: paper)"
    )
    parser.add_argument("--models", nargs="+", default=list(MODELS), help=f"of {', '.join(MODELS)}")
    parser.add_argument("--dtypes", nargs="+", default=list(DTYPES), help=f"of {', '.join(DTYPES)}")
    parser.add_argument("--impls", nargs="+", default=list(IMPLS), help=f"of {', '.join(IMPLS)}")
    parser.add_argument("--batch", type=int, default=None, help="batch size (default: the preset's, 100)")
    parser.add_argument(
        "--layers", type=int, default=1, help="layers timed at the paper shapes (default 1 of 6; 0 = all)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed steps per measurement (median)")
    parser.add_argument("--no-inference", action="store_true", help="skip the eval-mode forward timing")
    parser.add_argument("--profile", action="store_true", help="profile one step per row: where time goes")
    parser.add_argument(
        "--threads", type=int, default=None, help="intra-op threads (default: torch's; --quick: 1)"
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="measure even when the load average says the cores are shared (the report flags it)",
    )
    parser.add_argument(
        "--peak-only",
        action="store_true",
        help="only the matmul peak (default --out results/bench/peak/<device>.json, --threads 1)",
    )
    args = parser.parse_args(argv)
    for name in ("batch", "repeats"):
        value = getattr(args, name)
        if value is not None:
            check_positive_int(name, value)
    check_positive_int("layers", args.layers, 0, "an integer >= 0 (0: all of the model's layers)")
    if args.peak_only:
        report = peak(
            tuple(args.dtypes), args.device, threads=args.threads or 1, quick=args.quick, force=args.force
        )
        device = report["machine"]["device"]
        out = write_json(report, args.out or Path("results") / "bench" / "peak" / f"{device}.json")
        print(peak_line(report) + f"; written {out}")
        return report
    shapes = args.shapes or (["paper"] if args.quick else list(SHAPES))  # --quick: both shapes are tiny
    report = run(
        shapes=tuple(shapes),
        models=tuple(args.models),
        dtypes=tuple(args.dtypes),
        impls=tuple(args.impls),
        device=args.device,
        batch=args.batch,
        layers=args.layers or None,
        repeats=1 if args.quick else args.repeats,
        inference=not args.no_inference,
        quick=args.quick,
        profile=args.profile,
        threads=args.threads or (1 if args.quick else None),
        force=args.force,
    )
    if args.all:
        report["san"] = _san_bench(report["machine"]["device"], args.quick)
    out = write_json(report, args.out or Path("results") / "bench" / f"{report['machine']['device']}.json")
    import pandas as pd

    with pd.option_context(
        "display.width", 250, "display.max_columns", 30, "display.float_format", "{:.3g}".format
    ):
        print(table(report).to_string(index=False))
        shares = profile_table(report)
        if shares is not None:
            print("where the time goes (share of the profiled step's op self time):")
            print(shares.to_string(index=False))
    m = report["machine"]
    print(f"{m['cpu']} ({', '.join(m['cpu_flags'])}), {m['usable_cores']} cores, torch {m['torch']} "
          f"({m['torch_threads']} threads); matmul peak "
          + ", ".join(f"{dt} {p['best']:.1f} GFLOP/s" for dt, p in report["matmul_peak"].items())
          + f"; load {m['load_average_start']} -> {m['load_average_end']}"
          + (" (cores shared with other work: the figures are too low)" if report["load"]["shared"] else "")
          + f"; written {out}")  # fmt: skip
    return report


def peak_line(report: dict) -> str:
    """One line: the machine, its instruction sets, the peaks and whether the cores were shared."""
    m, load = report["machine"], report.get("load", {})
    shared = load.get("shared")
    verdict = {
        True: "cores shared with other work: too low",
        False: "cores otherwise idle",
        None: "load unknown",
    }
    return (
        f"{m['cpu']} ({', '.join(m['cpu_flags']) or 'no avx2/avx512/amx'}; CPU capability "
        f"{m.get('cpu_capability')}), {m['torch_threads']} thread(s), torch {m['torch']}: matmul peak "
        + ", ".join(f"{dt} {p['best']:.1f} GFLOP/s (n={p['n']})" for dt, p in report["matmul_peak"].items())
        + f"; load {load.get('load_before')} -> {load.get('load_after')} ({verdict[shared]})"
    )


def _san_bench(device: str, quick: bool) -> dict:
    """Run attnlib.san.bench.main if that module exists; its table (or the error) goes into the report."""
    try:
        from attnlib.san import bench as san_bench
    except ImportError as err:
        return {"error": f"attnlib.san.bench not available: {err}"}
    argv = ["--device", device] + (["--batch", "2", "--repeats", "1"] if quick else [])
    try:
        result = san_bench.main(argv)
    except (Exception, SystemExit) as err:  # another module's failure must not lose our numbers
        return {"error": f"{type(err).__name__}: {err}"}
    if hasattr(result, "to_json"):
        return {"argv": argv, "table": json.loads(result.reset_index().to_json(orient="records"))}
    return {"argv": argv, "result": str(result)}


if __name__ == "__main__":
    try:
        main()
    except ConfigError as err:
        sys.exit(f"python -m attnlib.bench: error: {err}")
    except MachineBusy as err:
        sys.exit(f"python -m attnlib.bench: refused: {err}")
