"""Inference wall time of the models of a table, measured together: ``python -m attnlib time``.

Every model of the registry at a preset (or the ``--experiments`` given) is built once (fresh weights: the
time of a forward pass does not depend on their values), then all are timed in ONE process with the same
number of threads, by the [Re] protocol: ``warmup`` (10) untimed and ``reps`` (300) timed forward passes of
one 1×3×32×32 image, fp32, eval mode, ``torch.no_grad``. The timed passes are interleaved: ``rounds``
rounds in which every model takes ``reps / rounds`` passes in turn (the first model rotating from round to
round), so that a change of load during the measurement hits every model alike. The file records each
model's median, quartiles, mean and standard deviation, the median of each round, the machine (CPU model,
instruction sets, torch, threads) and the load average before and after, and says whether that load shows
the cores shared with other work (``attnlib.lab.machine.core_sharing``). The HA/model ratio of every pair is
paired by round: the median over rounds of (HA's median in the round / its model's median in the same
round), with the quartiles of those per-round ratios as its spread; a model and its HA variant are timed
one after the other in every round, within a fraction of a second, so a change of load between rounds
cancels out.

Timed by hand, not through ``torch.utils.benchmark`` as the benchmarks are (`attnlib.lab.measure`): the
protocol is the [Re] report's (a fixed count of single passes, their median and quartiles), and the rounds
interleave the models, which ``Timer.blocked_autorange`` (one statement until its time is up) cannot do;
``attnlib.util.timed_ms`` times each pass.

Table 3 reads ``results/timing/<preset>.json`` (``attnlib.results.timing.wall_times``); a model the file lacks, or one measured
with another configuration than the registry's current one, reads "not measured".
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from attnlib import experiments
from attnlib.checks import check_positive_int
from attnlib.errors import ConfigError
from attnlib.lab.machine import (
    MachineBusy,
    check_threads,
    core_sharing,
    load_average,
    machine,
    refuse_if_shared,
)
from attnlib.lab.machine import running_others as _running_others  # a name of its own: tests patch it
from attnlib.lab.measure import torch_threads
from attnlib.results.timing import _jsonable, timing_path
from attnlib.train.device import resolve_device
from attnlib.util import sync, timed_ms

WARMUP, REPS, ROUNDS = 10, 300, 30  # [Re] protocol (warm-up and timed passes); rounds of interleaving
QUICK = dict(warmup=2, reps=10, rounds=2)  # --quick: a smoke test of the command, not a measurement
IMAGE = (1, 3, 32, 32)


def interleaved(
    models: dict[str, torch.nn.Module],
    device: torch.device | str = "cpu",
    *,
    warmup: int = WARMUP,
    reps: int = REPS,
    rounds: int = ROUNDS,
    log: Callable[[str], None] | None = None,
) -> tuple[dict[str, list[float]], dict[str, list[float]], list[int]]:
    """Time single-image forward passes of every model, interleaved (see the module docstring).

    Returns (times in ms per model, the median of each round per model, the runnable tasks of other
    processes sampled at the start of every round)."""
    device = torch.device(device)
    _check_rounds(rounds, reps)
    x = torch.randn(*IMAGE, device=device)
    names = list(models)
    times: dict[str, list[float]] = {n: [] for n in names}
    round_medians: dict[str, list[float]] = {n: [] for n in names}
    busy: list[int] = []
    per_round = [reps // rounds + (r < reps % rounds) for r in range(rounds)]
    with torch.no_grad():
        for name in names:
            models[name].to(device).eval()
            for _ in range(warmup):
                models[name](x)
            sync(device)
        for r, k in enumerate(per_round):
            if (sample := _running_others()) is not None:
                busy.append(sample)
            for name in names[r % len(names) :] + names[: r % len(names)]:
                model = models[name]
                got = [timed_ms(lambda: model(x), device) for _ in range(k)]  # noqa: B023 -- called at once
                times[name] += got
                round_medians[name].append(statistics.median(got))
            if log:
                log(f"round {r + 1}/{rounds}: " + ", ".join(f"{n} {round_medians[n][-1]:.2f}" for n in names))
    return times, round_medians, busy


def _check_rounds(rounds: int, reps: int) -> None:
    if rounds > reps:
        raise ConfigError("rounds", rounds, f"an integer between 1 and reps ({reps})")


def _quartiles(values: list[float]) -> tuple[float, float]:
    """The first and third quartiles (both the value itself when there is one)."""
    q1, _, q3 = statistics.quantiles(values, n=4) if len(values) > 1 else (values[0],) * 3
    return q1, q3


def summary(times: list[float]) -> dict:
    """Median, quartiles, mean, standard deviation and minimum of one model's pass times (ms)."""
    q1, q3 = _quartiles(times)
    return dict(
        median_ms=statistics.median(times),
        p25_ms=q1,
        p75_ms=q3,
        mean_ms=statistics.fmean(times),
        std_ms=statistics.pstdev(times),
        min_ms=min(times),
        reps=len(times),
    )


def ratios(models: dict[str, dict]) -> dict[str, dict]:
    """HA/model time ratio of every timed pair: ``ratio``, the median of the per-round ratios, with their
    quartiles ``round_ratio_p25`` / ``round_ratio_p75``; and ``ratio_of_medians`` of all passes."""
    out = {}
    for name, m in models.items():
        base = experiments.get(name).baseline
        if base is None or base not in models:
            continue
        per_round = [
            h / b for h, b in zip(m["round_medians_ms"], models[base]["round_medians_ms"], strict=True)
        ]
        q1, q3 = _quartiles(per_round)
        out[name] = dict(
            baseline=base,
            ratio=statistics.median(per_round),
            round_ratio_p25=q1,
            round_ratio_p75=q3,
            ratio_of_medians=m["median_ms"] / models[base]["median_ms"],
        )
    return out


def measure(
    preset: str = "budget",
    names: list[str] | None = None,
    *,
    threads: int = 1,
    device: str = "cpu",
    quick: bool = False,
    force: bool = False,
    warmup: int | None = None,
    reps: int | None = None,
    rounds: int | None = None,
    log: Callable[[str], None] = print,
) -> dict:
    """Build and time the models; the JSON-ready report. Raises MachineBusy (before building anything)
    when the load says the cores are shared, unless ``force`` or ``quick``; the report flags it anyway.
    ``warmup`` / ``reps`` / ``rounds`` replace the protocol's (10 / 300 / 30; ``quick``: 2 / 10 / 2)."""
    experiments.check_preset(preset)
    names = list(names or experiments.names())
    for name in names:
        experiments.get(name)  # ConfigError naming the experiment and the allowed ones
    if len(set(names)) != len(names):
        raise ConfigError("experiments", names, "each experiment at most once")
    check_threads("threads", threads)
    dev = resolve_device(device)
    protocol = dict(QUICK) if quick else dict(warmup=WARMUP, reps=REPS, rounds=ROUNDS)
    for name, value in (("warmup", warmup), ("reps", reps), ("rounds", rounds)):
        if value is not None:
            check_positive_int(name, value, 0 if name == "warmup" else 1)
            protocol[name] = value
    _check_rounds(protocol["rounds"], protocol["reps"])
    with torch_threads(threads):
        info = machine(dev)
        before = info["load_average_start"]
        if not (force or quick):
            refuse_if_shared(info, threads, "the wall times would be too long", cpu_only=False)
        built, params, configs = _build(names, preset)
        log(
            f"timing {len(names)} models at preset {preset}: {protocol['warmup']} warm-up and "
            f"{protocol['reps']} timed single-image passes each, in {protocol['rounds']} interleaved rounds, "
            f"{threads} thread(s), load average {before}"
        )
        start = time.perf_counter()
        times, round_medians, busy = interleaved(built, dev, **protocol, log=log)
        seconds = time.perf_counter() - start
        after = load_average()
        sharing = core_sharing(threads, before, after, usable=info["usable_cores"], running=busy)
    models = {
        name: dict(
            **summary(times[name]),
            round_medians_ms=round_medians[name],
            params=params[name],
            **configs[name],
        )
        for name in names
    }
    info["load_average_end"] = after
    return dict(
        preset=preset,
        quick=quick,
        protocol=dict(
            **protocol,
            image=list(IMAGE),
            dtype="float32",
            mode="eval, torch.no_grad",
            threads=threads,
            device=str(dev),
            weights="fresh (torch.manual_seed(0)); the time of a pass does not depend on the weights' values",
            order="interleaved: in every round each model takes reps/rounds passes in turn, the first model "
            "rotating from round to round",
            ratio="HA / model: median over rounds of the ratio of the two models' medians in that round",
        ),
        machine=info,
        load=sharing,
        seconds=seconds,
        finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        models=models,
        ratios=ratios(models),
    )


def _build(names: list[str], preset: str) -> tuple[dict, dict, dict]:
    """({name: model with fresh weights}, {name: trainable parameters}, {name: family and model config})."""
    built, params, configs = {}, {}, {}
    for name in names:
        rc = experiments.resolve(name, preset)
        torch.manual_seed(0)
        built[name] = experiments.build_model(name, preset)
        params[name] = sum(p.numel() for p in built[name].parameters() if p.requires_grad)
        configs[name] = dict(family=rc.family, model=_jsonable(rc.model))
    return built, params, configs


def run(
    preset: str = "budget",
    names: list[str] | None = None,
    *,
    results_dir: str | Path = "results",
    out: str | Path | None = None,
    **kwargs,
) -> tuple[dict, Path]:
    """``measure`` and write the report atomically (default ``timing_path``); (report, path)."""
    from attnlib.lab.run import git_state
    from attnlib.util import write_json

    report = measure(preset, names, **kwargs)
    report["git"] = git_state()
    path = Path(out) if out is not None else timing_path(results_dir, preset, report["quick"])
    write_json(path, report)
    return report, path


__all__ = ["MachineBusy", "interleaved", "measure", "run"]
