"""The training engine against an earlier commit's, whole runs side by side: ``python -m attnlib bench-engine``.

``python -m attnlib bench-engine --base REF [--models ...] [--images N_TRAIN:N_TEST] [--rounds R]``

Each case is one model of the registry trained for one epoch at the ``budget`` preset by the lab's own
``attnlib.lab.run.train_run`` (so everything a run does is timed: the probe at initialisation, the epoch's
steps with their data, evaluation and per-epoch probe, the saved maps, the end probe and Table 3's inference
timing), on a synthetic CIFAR-10 of ``N_TRAIN`` training and ``N_TEST`` test images (same shapes and dtypes
as the real one; ``--images 50000:10000`` is a whole budget epoch). Both engines run in fresh processes
on the same core count: the *base* is ``git archive REF attnlib`` unpacked in a temporary folder and put
first on ``PYTHONPATH``, the *new* one is this checkout's ``attnlib``. Rounds interleave the two, the first
one alternating, so a slow minute of the machine falls on both. Per case and engine the report keeps every
round's whole-run wall and CPU seconds, the epoch's seconds (training + evaluation, the history's
``seconds``), training images/s, and the run's peak memory (VmHWM reset through /proc/self/clear_refs
after the data is made, minus the RSS then); the ratios are base / new of the medians.

``breakdown(name, steps)`` (``--profile``) is where one budget epoch goes with this checkout's engine:
``steps`` training steps split into data, forward, backward and optimiser (wall clock around each, with the
rest of the loop as Python overhead), the epoch's evaluation and probe, scaled to a whole epoch by their
counts, and torch.profiler's top operators of the steps. ``--geometry 16x16`` adds training steps of
models at a geometry no preset has (``GEOMETRIES``: the papers' 16x16 tokens), the same two engines
interleaved. A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from attnlib.checks import check_choice, check_positive_int, synthetic_sizes
from attnlib.errors import ConfigError
from attnlib.lab.machine import check_threads, load_average, machine, usable_cores
from attnlib.results.timing import core_sharing

# the models whose runs spend the CPU (issue 47); every other experiment of the registry is accepted too
MODELS = (
    "learned_content_9h", "learned_content_9h_ha", "learned_content_16h", "learned_content_16h_ha",
    "san_pairwise", "san_pairwise_ha", "vit", "vit_ha",
)  # fmt: skip
EPOCH_IMAGES = (50_000, 10_000)  # a whole budget epoch: CIFAR-10's splits

# One run in a fresh process, whichever attnlib is first on sys.path; prints one JSON line. It uses only
# what every commit since the lab landed has: train_run(name, preset, data=, results_dir=, epochs=).
WORKER = r"""
import csv, ctypes, gc, json, os, sys, tempfile, time
import torch
torch.set_num_threads(int(sys.argv[3]))
import attnlib
from attnlib.data import load_dataset
from attnlib.lab.run import train_run
def status(key):  # kB of /proc/self/status's line ``key``
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":"))
data = load_dataset(sys.argv[2])  # made before the peak is reset: the data is the same for both engines
gc.collect(); ctypes.CDLL("libc.so.6").malloc_trim(0)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # VmHWM := VmRSS
start = status("VmRSS")
with tempfile.TemporaryDirectory() as d:
    wall, cpu = time.perf_counter(), time.process_time()
    run = train_run(sys.argv[1], "budget", data=data, results_dir=d, epochs=1, progress=False)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    with open(run.path / "history.csv") as f:
        row = list(csv.DictReader(f))[-1]
print(json.dumps({"attnlib": os.path.dirname(attnlib.__file__), "wall_s": wall, "cpu_s": cpu,
                  "epoch_s": float(row["seconds"]), "train_images_per_s": float(row["images_per_s"]),
                  "peak_mib": (status("VmHWM") - start) / 1024}))
"""

# Training steps of a registry model with model fields overridden (a geometry no preset has yet, e.g. 16x16
# tokens: downsample=2), on random batches of the budget's size: median of timed steps after two warm-ups.
STEP_WORKER = r"""
import json, os, sys, time
import torch
torch.set_num_threads(int(sys.argv[3]))
import attnlib
from attnlib import experiments
from attnlib.models import make
from attnlib.train.loop import train_step
from attnlib.train.schedule import make_optimizer
rc = experiments.resolve(sys.argv[1], "budget")
torch.manual_seed(0)
model = make(rc.family, **{**rc.model, **json.loads(sys.argv[2])})
opt = make_optimizer(model, rc.train)
x, y = torch.randn(rc.train.batch_size, 3, 32, 32), torch.randint(0, 10, (rc.train.batch_size,))
times = []
for i in range(2 + int(sys.argv[4])):
    t = time.perf_counter()
    train_step(model, opt, x, y, rc.train.label_smoothing, True, rc.train.grad_clip)
    times.append(time.perf_counter() - t)
times = sorted(times[2:])
print(json.dumps({"attnlib": os.path.dirname(attnlib.__file__), "step_s": times[len(times) // 2]}))
"""
GEOMETRIES = {
    "16x16": {"downsample": 2}
}  # name -> model fields: the papers' 16x16 tokens (2x2 space-to-depth)
GEOMETRY_MODELS = ("learned_9h", "quadratic_aniso_9h", "learned_content_9h")


def unpack(ref: str, into: Path, repo: Path) -> Path:
    """``attnlib`` of commit ``ref`` (``git archive``) unpacked under ``into``; returns ``into``."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--verify", f"{ref}^{{commit}}"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (subprocess.CalledProcessError, FileNotFoundError):
        raise ConfigError("base", ref, f"a commit of the repository at {repo}") from None
    archive = into / "base.tar"
    with archive.open("wb") as f:
        subprocess.run(["git", "-C", str(repo), "archive", commit, "attnlib"], stdout=f, check=True)
    with tarfile.open(archive) as t:
        t.extractall(into, filter="data")
    archive.unlink()
    return into


def _run_once(tree: Path, name: str, spec: str, threads: int, worker: str = WORKER, *extra: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "ATTNLIB_TRAIN_MISSING": "0"}
    with tempfile.TemporaryDirectory() as cwd:  # no checkout folder on sys.path but the tree's
        out = subprocess.run(
            [sys.executable, "-c", worker, name, spec, str(threads), *extra],
            cwd=cwd, env=env, capture_output=True, text=True,
        )  # fmt: skip
    if out.returncode:
        raise RuntimeError(f"{name} with {tree}: exit {out.returncode}: {out.stderr.strip()[-2000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if Path(result["attnlib"]).resolve() != (tree / "attnlib").resolve():
        raise RuntimeError(f"{name}: imported {result['attnlib']}, not the tree {tree}")
    return result


def compare(
    base: str,
    models: tuple[str, ...] = MODELS,
    images: str = "10000:2000",
    rounds: int = 2,
    threads: int = 1,
    repo: Path | None = None,
    geometries: tuple[str, ...] = (),
    geometry_models: tuple[str, ...] = GEOMETRY_MODELS,
    geometry_steps: int = 4,
) -> dict:
    """The engines of ``base`` and this checkout, whole one-epoch budget runs of each model, interleaved
    (module docstring). -> report dict (``machine``, ``settings``, ``rows``: one per model)."""
    import torch

    from attnlib import experiments

    for name in models:
        check_choice("models", name, experiments.names(variants=True))
    for geometry in geometries:
        check_choice("geometries", geometry, tuple(GEOMETRIES))
    for name in geometry_models:
        check_choice("geometry_models", name, experiments.names(variants=True))
    check_positive_int("geometry_steps", geometry_steps)
    check_positive_int("rounds", rounds)
    check_threads("threads", threads)
    n_train, n_test = synthetic_sizes(
        f"synthetic:{images}", "N_TRAIN:N_TEST, two positive integers", "images"
    )
    spec = f"synthetic:{n_train}:{n_test}"
    repo = Path(repo or Path(__file__).resolve().parents[2])
    new = repo  # this checkout: its attnlib/ is the package imported here
    facts = machine(torch.device("cpu"))
    facts["torch_threads"] = threads
    rows, geometry_rows = [], []
    with tempfile.TemporaryDirectory(prefix="attnlib-base-") as tmp:
        trees = {"base": unpack(base, Path(tmp), repo), "new": new}
        for name in models:
            runs: dict[str, list[dict]] = {"base": [], "new": []}
            for r in range(rounds):
                for engine in ("base", "new") if r % 2 == 0 else ("new", "base"):
                    runs[engine].append(_run_once(trees[engine], name, spec, threads))
            rows.append(_row(name, runs))
            print(_line(rows[-1]), flush=True)
        for geometry in geometries:
            fields = json.dumps(GEOMETRIES[geometry])
            for name in geometry_models:
                steps = {"base": [], "new": []}
                for r in range(rounds):
                    for engine in ("base", "new") if r % 2 == 0 else ("new", "base"):
                        out = _run_once(
                            trees[engine], name, fields, threads, STEP_WORKER, str(geometry_steps)
                        )
                        steps[engine].append(out["step_s"])
                med = {e: statistics.median(v) for e, v in steps.items()}
                geometry_rows.append({"model": name, "geometry": geometry, "fields": GEOMETRIES[geometry],
                                      "base_step_s": med["base"], "new_step_s": med["new"], "rounds": steps,
                                      "ratio_step": med["base"] / med["new"]})  # fmt: skip
                print(f"{name:24s} {geometry} step {med['base']:.3f} -> {med['new']:.3f} s "
                      f"({med['base'] / med['new']:.2f}x)", flush=True)  # fmt: skip
    fraction = n_train / EPOCH_IMAGES[0]
    return {
        "machine": facts,
        "load": core_sharing(threads, facts["load_average_start"], load_average(), usable=usable_cores()),
        "settings": {
            "base": base,
            "base_commit": _commit(repo, base),
            "new": _commit(repo, "HEAD"),
            "new_dirty": _dirty(repo),
            "images": [n_train, n_test],
            "epoch_fraction": fraction,
            "rounds": rounds,
            "threads": threads,
            "preset": "budget",
        },  # fmt: skip
        "rows": rows,
        "geometry_rows": geometry_rows,
        "notes": {
            "what": "one epoch of each model at the budget preset, trained by attnlib.lab.run.train_run on a "
            f"synthetic CIFAR-10 of {n_train} + {n_test} images ({fraction:.0%} of a budget epoch's steps and "
            "evaluation; the probes, saved maps and inference timing of a whole run)",
            "timing": "fresh process per run; rounds interleaved, first engine alternating; medians over rounds",
            "ratio": "base / new: above 1, the new engine is faster",
            "geometry": f"geometry_rows: the median of {geometry_steps} training steps (after two warm-ups) of "
            "a budget model with other model fields (GEOMETRIES), random batches, bf16 autocast, per process",
        },
    }


def _row(name: str, runs: dict[str, list[dict]]) -> dict:
    med = {
        e: {k: statistics.median(r[k] for r in rs) for k in rs[0] if k != "attnlib"} for e, rs in runs.items()
    }
    return {
        "model": name,
        "base": med["base"],
        "new": med["new"],
        "rounds": {e: [{k: v for k, v in r.items() if k != "attnlib"} for r in rs] for e, rs in runs.items()},
        "ratio_run": med["base"]["wall_s"] / med["new"]["wall_s"],
        "ratio_epoch": med["base"]["epoch_s"] / med["new"]["epoch_s"],
        "ratio_train": med["new"]["train_images_per_s"] / med["base"]["train_images_per_s"],
        "memory_ratio": med["new"]["peak_mib"] / med["base"]["peak_mib"],
    }


def _line(row: dict) -> str:
    b, n = row["base"], row["new"]
    return (
        f"{row['model']:24s} run {b['wall_s']:7.1f} -> {n['wall_s']:7.1f} s ({row['ratio_run']:.2f}x)  "
        f"epoch {b['epoch_s']:7.1f} -> {n['epoch_s']:7.1f} s ({row['ratio_epoch']:.2f}x)  "
        f"memory {b['peak_mib']:.0f} -> {n['peak_mib']:.0f} MiB"
    )


def _commit(repo: Path, ref: str) -> str:
    out = subprocess.run(["git", "-C", str(repo), "rev-parse", ref], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def _dirty(repo: Path) -> bool:
    out = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no", "attnlib"],
        capture_output=True, text=True,
    )  # fmt: skip
    return bool(out.stdout.strip())


# ------------------------------------------------------------------------------ where an epoch goes
PHASES = ("data", "forward", "backward", "optimiser", "bookkeeping")


def breakdown(
    name: str, steps: int = 30, threads: int = 1, top: int = 12, test_images: int = EPOCH_IMAGES[1]
) -> dict:
    """Where one budget epoch of ``name`` goes with this checkout's engine (module docstring): ``steps``
    training steps timed phase by phase, the evaluation of ``test_images`` test images and one per-epoch
    probe, each scaled to a whole epoch (500 steps of batch 100, one evaluation of 10,000 images, one
    probe), and the profiler's
    ``top`` operators by self CPU time over three steps. -> dict (seconds per epoch, shares, operators)."""
    import functools

    import torch
    import torch.nn.functional as F
    from torch import nn
    from torch.profiler import ProfilerActivity, profile

    from attnlib import experiments, measures
    from attnlib.data import Batches, load_dataset
    from attnlib.lab.run import first_test_images
    from attnlib.models import make
    from attnlib.train.device import autocast, use_bf16
    from attnlib.train.distributed import current_dist
    from attnlib.train.loop import evaluate, train_step
    from attnlib.train.schedule import make_optimizer

    check_choice("models", name, experiments.names(variants=True))
    check_positive_int("steps", steps, 5)
    check_threads("threads", threads)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        rc = experiments.resolve(name, "budget")
        cfg, bs = rc.train, rc.train.batch_size
        epoch_steps = EPOCH_IMAGES[0] // bs
        dev = torch.device("cpu")
        bf16 = use_bf16(cfg.bf16, dev)
        check_positive_int("test_images", test_images)
        data = load_dataset(f"synthetic:{(steps + 6) * bs}:{test_images}")  # + warm-up, profiled steps
        torch.manual_seed(0)
        model = make(rc.family, **rc.model)
        opt = make_optimizer(model, cfg)
        batches = Batches(data.train, bs, train=True, device=dev)
        spent = dict.fromkeys(PHASES, 0.0)
        it = iter(batches.epoch(0))
        model.train()
        for step in range(steps + 3):  # three warm-up steps, not counted
            clock = [time.perf_counter()]
            x, y = next(it)
            clock.append(time.perf_counter())
            with autocast(dev, bf16):
                logits = model(x)
            loss = F.cross_entropy(logits.float(), y, label_smoothing=cfg.label_smoothing)
            clock.append(time.perf_counter())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            clock.append(time.perf_counter())
            if cfg.grad_clip is not None:
                norm = nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            else:
                norm = nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])
            opt.step()
            clock.append(time.perf_counter())
            torch.stack([loss.double(), (logits.argmax(1) == y).sum().double(), norm.double()]).tolist()
            clock.append(time.perf_counter())
            if step >= 3:
                for phase, a, b in zip(PHASES, clock, clock[1:], strict=False):
                    spent[phase] += (b - a) * epoch_steps / steps
        start = time.perf_counter()
        evaluate(model, Batches(data.test, bs, train=False, device=dev), dev, bf16, current_dist())
        spent["evaluation"] = (time.perf_counter() - start) * EPOCH_IMAGES[1] / test_images
        spent["probe"] = 0.0
        if rc.probe_images:
            images = first_test_images(data, rc.probe_images, dev)
            start = time.perf_counter()
            functools.partial(measures.probe, images=images)(model)
            spent["probe"] = time.perf_counter() - start
        model.train()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(3):
                x, y = next(it)
                train_step(model, opt, x, y, cfg.label_smoothing, bf16, cfg.grad_clip)
        total = sum(spent.values())
        ops = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)[:top]
        self_total = sum(e.self_cpu_time_total for e in prof.key_averages())
        return {
            "model": name,
            "bf16": bf16,
            "steps_timed": steps,
            "epoch_seconds": total,
            "seconds": spent,
            "shares": {k: v / total for k, v in spent.items()},
            "operators": [
                {
                    "name": e.key,
                    "ms_per_step": e.self_cpu_time_total / 3e3,
                    "calls_per_step": e.count / 3,
                    "share": e.self_cpu_time_total / self_total,
                }  # fmt: skip
                for e in ops
            ],
        }
    finally:
        torch.set_num_threads(before)


# ---------------------------------------------------------------------------- per-core throughput
def throughput(name: str, steps: int = 20, rounds: int = 3, threads: int = 1, preset: str = "budget") -> dict:
    """Per-core images/s of ``name`` at ``preset`` with this checkout's engine, the figures behind the
    lab's estimates (``attnlib.analysis.plan.THROUGHPUT``): ``steps`` training steps of the preset's batch
    (momentum SGD, its clipping and label smoothing, bf16 where the run would use it) and as many
    evaluation batches, each timed by the process's CPU time (a core shared with other jobs slows the
    wall clock, far less the CPU time), best of ``rounds`` after two warm-up steps.
    -> {"model", "train_images_per_s", "eval_images_per_s", "bf16", "steps", "rounds"}."""
    import torch

    from attnlib import experiments
    from attnlib.models import make
    from attnlib.train.device import autocast, use_bf16
    from attnlib.train.loop import train_step
    from attnlib.train.schedule import make_optimizer

    check_choice("models", name, experiments.names(variants=True))
    check_positive_int("steps", steps)
    check_positive_int("rounds", rounds)
    check_threads("threads", threads)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        rc = experiments.resolve(name, preset)
        cfg, bs, dev = rc.train, rc.train.batch_size, torch.device("cpu")
        bf16 = use_bf16(cfg.bf16, dev)
        torch.manual_seed(0)
        model = make(rc.family, **rc.model)
        opt = make_optimizer(model, cfg)
        x, y = torch.randn(bs, 3, 32, 32), torch.randint(0, 10, (bs,))
        model.train()
        for _ in range(2):  # warm-up
            train_step(model, opt, x, y, cfg.label_smoothing, bf16, cfg.grad_clip)
        best_train = best_eval = 0.0
        for _ in range(rounds):
            model.train()
            start = time.process_time()
            for _ in range(steps):
                train_step(model, opt, x, y, cfg.label_smoothing, bf16, cfg.grad_clip)
            best_train = max(best_train, steps * bs / (time.process_time() - start))
            model.eval()
            start = time.process_time()
            with torch.no_grad(), autocast(dev, bf16):  # as attnlib.train.loop.evaluate
                for _ in range(steps):
                    model(x)
            best_eval = max(best_eval, steps * bs / (time.process_time() - start))
        return {"model": name, "train_images_per_s": best_train, "eval_images_per_s": best_eval, "bf16": bf16,
                "steps": steps, "rounds": rounds}  # fmt: skip
    finally:
        torch.set_num_threads(before)
