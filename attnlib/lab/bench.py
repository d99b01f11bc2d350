"""Throughput and utilisation of the paper's models: attnlib against the plain formulation.

``python -m attnlib bench [--quick] [--out results/bench/cpu.json] [--threads N] [--profile] [--force]``

In one process, side by side, for each model (learned 2D + content, quadratic isotropic positional-only)
at the ``paper`` and ``budget`` shapes (``attnlib.experiments.resolve``), in fp32 and bf16 autocast:
forward + backward images/s (and eval-mode forward images/s), peak memory, FLOPs per image
(``torch.utils.flop_counter.FlopCounterMode``), achieved FLOP/s and the utilisation against this
machine's matmul peak, measured in the same run with square matmuls (best of several sizes and repetitions,
before and after the cases, with the load average around each). On a CPU whose load average says its cores
are shared with other work the benchmark refuses to start (``--force`` measures anyway; the report's
``load`` flags it): a peak measured on a shared core is too low and inflates every utilisation.
``--profile`` adds one profiled step per row: profiler self time per op category (GEMM, copies, dropout
RNG, softmax, ...), i.e. where the time goes. ``--peak-only`` measures the matmul peak alone, by the same
protocol (``run(shapes=())``: no model).

The *plain* formulation (``plain_copy``: ``attnlib.attention.reference.PlainAttention`` layers) is the same
math written the obvious way, as the official code and the [Re] reproduction write it: explicit score
tensors of shape (B, H, W, heads, H, W) built with ``einsum``, a softmax over the flattened keys,
``nn.Dropout``, and ``einsum`` with the values. It is a copy with the same weights, so both give the same
outputs and gradients (``tests/test_bench.py`` checks it).

Paper shapes: batch 100, 16 x 16 tokens, hidden 400, 9 heads; by default one of the six layers is timed
(``--layers``; the time per layer is linear in depth).

How each number is measured:

- time: `attnlib.lab.measure.compare` of the implementations of one model: a warm-up step, one that measures
  memory, then ``--repeats`` interleaved rounds of timed blocks (torch.utils.benchmark's blocked_autorange),
  the first implementation rotating; a row's time per step is the median over rounds of each round's median
  block. The step is the trainer's without an optimizer (`attnlib.train.loop.train_step`: forward under
  autocast, cross-entropy, backward, gradients freed); inference the same for eval-mode forward passes;
- memory: ``attnlib.lab.measure.MEMORY_METHOD``; FLOPs: ``FlopCounterMode`` on one step, per image;
- utilisation: achieved FLOP/s (the implementation's own FLOPs) over the matmul peak, the fastest block of
  n x n matmuls (``settings``: sizes, min_run_time), measured at the start and at the end with the load
  around each (``peak_load``; ``load.peak_shared`` when both say the cores were shared), the better of the
  two; ``model_utilisation`` counts the plain formulation's FLOPs instead (attnlib's bilinear path does
  fewer FLOPs for the same function).

On a GPU machine: ``python -m attnlib bench --device cuda --layers 0 --out results/bench/cuda.json``.
On a CPU shared with other jobs, ``--threads 1`` avoids OpenMP threads waiting for each other.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnlib.attention import MultiHeadSelfAttention2d
from attnlib.attention.reference import PlainAttention
from attnlib.checks import check_choice, check_positive_int
from attnlib.lab.machine import load_average, usable_cores
from attnlib.lab.measure import MEMORY_METHOD, MIN_RUN_TIME, block_times, compare, quiet_profiler, session
from attnlib.results.timing import core_sharing
from attnlib.train.device import autocast
from attnlib.train.loop import train_step


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
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}  # bf16: autocast, and its matmul peak
IMPLS = ("attnlib", "plain")
_QUICK = dict(layers=1, hidden=16, mlp=16, heads=2, downsample=4)  # --quick: a smoke test of the bench


@dataclass(frozen=True)
class Case:
    """One model at one set of shapes: ``model`` are PaperConfig fields (``attnlib.experiments.resolve`` of
    the experiment at the preset named by ``shapes``)."""

    shapes: str
    name: str
    model: dict
    batch: int


def cases(
    shapes: tuple[str, ...], names: tuple[str, ...], batch: int | None, layers: int | None, quick: bool
):
    """The cases to time. ``layers`` (paper shapes) times fewer layers than the model has."""
    from attnlib import experiments

    out = []
    for shape in shapes:
        check_choice("shapes", shape, SHAPES)
        for name in names:
            check_choice("models", name, MODELS)
            rc = experiments.resolve(name, shape)
            model, b = dict(rc.model), rc.train.batch_size
            if quick:
                model, b = {**model, **_QUICK}, 4
            elif shape == "paper" and layers is not None:
                model = {**model, "layers": layers}
            out.append(Case(shape, name, model, batch or b))
    return out


# -------------------------------------------------------------------------------------- measuring
def infer_step(model: nn.Module, x: Tensor, device: torch.device, dtype: str) -> None:
    with torch.no_grad(), autocast(device, dtype == "bf16"):
        model(x)


def measure(
    nets: dict[str, nn.Module],
    batch: int,
    device: torch.device,
    dtype: str,
    repeats: int,
    inference: bool,
    min_run_time: float = MIN_RUN_TIME,
) -> dict[str, dict]:
    """Time implementations of one model side by side (see the module docstring): {impl: row}; eval-mode
    forward passes too when ``inference``."""
    from torch.utils.flop_counter import FlopCounterMode

    x = torch.randn(batch, 3, 32, 32, device=device)
    y = torch.randint(0, next(iter(nets.values())).cfg.num_classes, (batch,), device=device)
    steps = {impl: (lambda m=m: train_step(m, None, x, y, 0.0, dtype == "bf16")) for impl, m in nets.items()}
    rows = {}
    for impl, step in steps.items():
        nets[impl].train()
        with FlopCounterMode(display=False) as counter:
            step()
        rows[impl] = dict(gflop_per_image=counter.get_total_flops() / batch / 1e9)
    for impl, m in compare(steps, device, repeats, min_run_time).items():
        rows[impl].update(step_s=m["step_s"], images_per_s=batch / m["step_s"], peak_mem_mb=m["peak_mib"])
    if inference:
        for net in nets.values():
            net.eval()
        fwds = {impl: (lambda m=m: infer_step(m, x, device, dtype)) for impl, m in nets.items()}
        for impl, m in compare(fwds, device, repeats, min_run_time).items():
            rows[impl]["infer_images_per_s"] = batch / m["step_s"]
        for net in nets.values():
            net.train()
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


def profile_step(model: nn.Module, batch: int, device: torch.device, dtype: str) -> dict:
    """One forward+backward step under torch.profiler: the total op self time (ms) and each category's share."""
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(batch, 3, 32, 32, device=device)
    y = torch.randint(0, model.cfg.num_classes, (batch,), device=device)
    model.train()
    train_step(model, None, x, y, 0.0, dtype == "bf16")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    quiet_profiler()
    with profile(activities=activities) as prof:
        train_step(model, None, x, y, 0.0, dtype == "bf16")
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    attr = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    by_category: dict[str, float] = {}
    for e in prof.key_averages():
        if e.key.startswith("aten::"):
            by_category[_category(e.key)] = by_category.get(_category(e.key), 0.0) + getattr(e, attr) / 1e3
    total = sum(by_category.values())
    share = {k: round(v / total, 3) for k, v in by_category.items()} if total else {}
    return dict(total_ms=total, category_share=share)


# ------------------------------------------------------------------------------------------ matmul peak
# a peak is what the hardware can do: the fastest block of calls counts (a block slowed by other work says
# nothing about it); ``run(shapes=())`` measures it alone (``--peak-only``)
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


# ------------------------------------------------------------------------------------------ running
def run(
    shapes: tuple[str, ...] = SHAPES,
    models: tuple[str, ...] = MODELS,
    dtypes: tuple[str, ...] = tuple(DTYPES),
    impls: tuple[str, ...] = IMPLS,
    device: str = "auto",
    batch: int | None = None,
    layers: int | None = 1,
    repeats: int = 3,
    inference: bool = True,
    quick: bool = False,
    profile: bool = False,
    force: bool = False,
    threads: int | None = None,
    log: Callable[[str], None] = print,
) -> dict:
    """The benchmark; returns the JSON-ready report (``rows`` holds one dict per measurement; none for
    ``shapes=()``, the matmul peak alone: ``--peak-only``).

    ``threads``: intra-op threads during the run (None: torch's), restored afterwards. ``layers``: the
    layers timed at the paper shapes (None or 0: all of them). On the CPU it refuses to
    start (MachineBusy) when the load average says the cores are shared, unless ``force`` or ``quick``; the
    report's ``load`` flags it either way."""
    for name, values, allowed in (("dtypes", dtypes, DTYPES), ("impls", impls, IMPLS)):
        for value in values:
            check_choice(name, value, allowed)
    for name, value in (("batch", batch), ("repeats", repeats)):
        if value is not None:
            check_positive_int(name, value)
    check_positive_int("layers", layers or 0, 0, "an integer >= 0 (0: all of the model's layers)")
    todo = cases(shapes, models, batch, layers or None, quick)  # validates before any work
    why = None if force or quick else "the matmul peak and the throughputs would be too low"
    with session(device, threads, refuse=why) as (dev, report, _):
        threads = report["machine"]["torch_threads"]
        sizes = (256,) if quick else (4096, 8192) if dev.type == "cuda" else (512, 1024, 2048, 3072)
        min_run_time = 0.01 if quick else MIN_RUN_TIME  # per matmul size, per timed block of the cases
        start = measure_peaks(dtypes, dev, sizes, min_run_time)
        log(
            "matmul peak: "
            + ", ".join(f"{dt} {p['gflops']:.1f} GFLOP/s (n={p['n']})" for dt, p in start["peaks"].items())
            + f"; load {start['load_before']} -> {start['load_after']}"
            + (" (cores shared: too low)" if start["shared"] else "")
        )
        rows = []
        for case in todo:
            rows += _case_rows(case, dtypes, impls, dev, repeats, inference, profile, min_run_time, log)
        end = measure_peaks(dtypes, dev, sizes, min_run_time)
    settings = dict(repeats=repeats, quick=quick, layers=layers, threads=threads, sizes=list(sizes))
    report.update(
        rows=rows, settings=dict(settings, min_run_time=min_run_time, memory=MEMORY_METHOD[dev.type])
    )
    _utilisation(report, start, end)
    return report


def _case_rows(case: Case, dtypes, impls, dev, repeats, inference, profile, min_run_time, log) -> list[dict]:
    """The rows of one case: every dtype x implementation, measured side by side."""
    from attnlib.models import make

    torch.manual_seed(0)
    with dev:
        model = make("paper", **case.model)
    rows = []
    for dtype in dtypes:
        nets = {impl: model if impl == "attnlib" else plain_copy(model) for impl in impls}
        layers = case.model["layers"]
        log(
            f"{case.shapes} {case.name} {dtype}: batch {case.batch}, {layers} layer{'' if layers == 1 else 's'}"
        )
        for impl, m in measure(nets, case.batch, dev, dtype, repeats, inference, min_run_time).items():
            row = dict(shapes=case.shapes, model=case.name, dtype=dtype, impl=impl, batch=case.batch, **m)
            row.update(layers_timed=case.model["layers"], config=case.model)
            row["achieved_gflops"] = row["gflop_per_image"] * row["images_per_s"]
            if profile:
                row["profile"] = profile_step(nets[impl], case.batch, dev, dtype)
            rows.append(row)
    return rows


def _utilisation(report: dict, start: dict, end: dict) -> None:
    """The matmul peak (the better of ``start`` and ``end``), whether both were measured on shared cores, and
    every row's utilisation against that peak; every row gets ``model_gflop_per_image`` (the plain
    formulation's count: the FLOPs of the model as written, whatever an implementation saves) and
    ``model_utilisation`` = model FLOPs x images/s / matmul peak, attnlib rows ``speedup_vs_plain``
    (training) and ``infer_speedup_vs_plain``."""
    best = {dt: max(start["peaks"][dt]["gflops"], end["peaks"][dt]["gflops"]) for dt in start["peaks"]}
    report["matmul_peak"] = {
        dt: dict(start=start["peaks"][dt], end=end["peaks"][dt], best=best[dt]) for dt in best
    }
    report["peak_load"] = {
        when: {k: v for k, v in m.items() if k != "peaks"} for when, m in (("start", start), ("end", end))
    }
    report["load"]["peak_shared"] = bool(start["shared"] and end["shared"])
    plain = {(r["shapes"], r["model"], r["dtype"]): r for r in report["rows"] if r["impl"] == "plain"}
    for r in report["rows"]:
        r["peak_gflops"] = best[r["dtype"]]
        r["utilisation"] = r["achieved_gflops"] / best[r["dtype"]]
        ref = plain.get((r["shapes"], r["model"], r["dtype"]))
        r["model_gflop_per_image"] = (ref or r)["gflop_per_image"]
        r["model_utilisation"] = r["model_gflop_per_image"] * r["images_per_s"] / r["peak_gflops"]
        if r["impl"] == "attnlib" and ref is not None:
            r["speedup_vs_plain"] = r["images_per_s"] / ref["images_per_s"]
            if "infer_images_per_s" in r:
                r["infer_speedup_vs_plain"] = r["infer_images_per_s"] / ref["infer_images_per_s"]

