"""Inference wall time of the models of a table, measured together: ``python -m attnlib time``.

Every model of the registry at a preset (or the ``--experiments`` given) is built once (fresh weights: the
time of a forward pass does not depend on their values), then all are timed in ONE process with the same
number of threads, by the [Re] protocol: ``warmup`` (10) untimed and ``reps`` (300) timed forward passes of
one 1×3×32×32 image, fp32, eval mode, ``torch.no_grad``. The timed passes are interleaved: ``rounds``
rounds in which every model takes ``reps / rounds`` passes in turn (the first model rotating from round to
round), so that a change of load during the measurement hits every model alike. The file records each
model's median and quartiles, the median of each round, the machine (CPU model,
instruction sets, torch, threads) and the load average before and after, and says whether that load shows
the cores shared with other work (``attnlib.results.timing.core_sharing``). The HA/model ratio of every pair is
paired by round: the median over rounds of (HA's median in the round / its model's median in the same
round), with the quartiles of those per-round ratios as its spread; a model and its HA variant are timed
one after the other in every round, within a fraction of a second, so a change of load between rounds
cancels out.

Timed pass by pass (`attnlib.lab.measure.pass_times_ms`, as every run times itself), not in blocks as the
benchmarks are: the protocol is the [Re] report's (a fixed count of single passes, their median and
quartiles); the rounds are `attnlib.lab.measure.interleave`'s and the ratios its ``paired_ratio``.

Table 3 reads ``results/timing/<preset>.json`` (``attnlib.results.timing.wall_times``); a model the file lacks, or one measured
with another configuration than the registry's current one, reads "not measured".
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path

import torch

from attnlib import experiments
from attnlib.checks import check_positive_int
from attnlib.errors import ConfigError
from attnlib.lab.machine import running_others as _running_others  # a name of its own: tests patch it
from attnlib.lab.measure import interleave, paired_ratio, pass_times_ms, quartiles, session
from attnlib.results.timing import _jsonable, threads_words, timing_path

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
) -> tuple[dict[str, list[list[float]]], list[int]]:
    """Time single-image forward passes of every model, interleaved (see the module docstring).

    Returns ({model: [the times in ms of its passes in each round]}, the runnable tasks of other processes
    sampled after every round)."""
    _check_rounds(rounds, reps)
    x = torch.randn(*IMAGE, device=torch.device(device))
    per_round = [reps // rounds + (r < reps % rounds) for r in range(rounds)]
    busy: list[int] = []

    def after_round(r: int, got: dict) -> None:
        if (sample := _running_others()) is not None:
            busy.append(sample)
        if log:
            log(
                f"round {r + 1}/{rounds}: "
                + ", ".join(f"{n} {statistics.median(t):.2f}" for n, t in got.items())
            )

    with torch.no_grad():
        for model in models.values():
            pass_times_ms(model.to(x.device).eval(), x, warmup)
        times = interleave(
            models, rounds, lambda model, r: pass_times_ms(model, x, per_round[r]), after_round
        )
    return times, busy


def _check_rounds(rounds: int, reps: int) -> None:
    if rounds > reps:
        raise ConfigError("rounds", rounds, f"an integer between 1 and reps ({reps})")


def summary(rounds: list[list[float]]) -> dict:
    """Median and quartiles of one model's pass times (ms) and the median of each round."""
    times = [t for got in rounds for t in got]
    q1, q3 = quartiles(times)
    return dict(
        median_ms=statistics.median(times),
        p25_ms=q1,
        p75_ms=q3,
        reps=len(times),
        round_medians_ms=[statistics.median(got) for got in rounds],
    )


def ratios(models: dict[str, dict]) -> dict[str, dict]:
    """HA/model time ratio of every timed pair, paired by round (`attnlib.lab.measure.paired_ratio` of the
    round medians: ``ratio`` with the quartiles ``round_ratio_p25`` / ``round_ratio_p75``)."""
    out = {}
    for name, m in models.items():
        base = experiments.get(name).baseline
        if base is not None and base in models:
            ratio = paired_ratio(m["round_medians_ms"], models[base]["round_medians_ms"])
            out[name] = dict(baseline=base, **ratio)
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
    protocol = dict(QUICK) if quick else dict(warmup=WARMUP, reps=REPS, rounds=ROUNDS)
    for name, value in (("warmup", warmup), ("reps", reps), ("rounds", rounds)):
        if value is not None:
            check_positive_int(name, value, 0 if name == "warmup" else 1)
            protocol[name] = value
    _check_rounds(protocol["rounds"], protocol["reps"])
    why = None if force or quick else "the wall times would be too long"
    with session(device, threads, refuse=why, cpu_only=False) as (dev, report, busy):
        built, models = _build(names, preset)
        log(
            f"timing {len(names)} models at preset {preset}: {protocol['warmup']} warm-up and "
            f"{protocol['reps']} timed single-image passes each, in {protocol['rounds']} interleaved rounds, "
            f"{threads_words(threads)}, load average {report['machine']['load_average_start']}"
        )
        times, sampled = interleaved(built, dev, **protocol, log=log)
        busy += sampled
    for name in names:
        models[name].update(summary(times[name]))
    return dict(
        report,
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
        models=models,
        ratios=ratios(models),
    )


def _build(names: list[str], preset: str) -> tuple[dict, dict]:
    """({name: model with fresh weights}, {name: its trainable parameters, family and model config})."""
    built, models = {}, {}
    for name in names:
        rc = experiments.resolve(name, preset)
        torch.manual_seed(0)
        built[name] = experiments.build_model(name, preset)
        params = sum(p.numel() for p in built[name].parameters() if p.requires_grad)
        models[name] = dict(params=params, family=rc.family, model=_jsonable(rc.model))
    return built, models


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
