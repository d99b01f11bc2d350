"""Saved timing reports read back (issue 32): ``results/timing/<preset>.json``, written by ``python -m attnlib time``
(`attnlib.lab.timing`), as Table 3 and the chapters read them: the report checked (`load`), the wall times
still of today's configuration (`wall_times`), one row per model (`table`) and the machine it was measured on
in one sentence (`machine_line`); and ``results/train_cost/<preset>.json``, written by ``python -m attnlib
train-cost`` (`attnlib.lab.train_cost`), as the ledger reads it (`train_cost_report`). Where each report lives
(`timing_path`, `train_cost_path`), a report's machine in words (`machine_words`) and whether its recorded load
says the cores were shared (`core_sharing`, the one rule: the lab applies it while it measures) have their one
home here, so that reading a report imports no benchmark harness and no trainer.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import statistics
from pathlib import Path

from attnlib import experiments
from attnlib.results.store import read_json
from attnlib.results.validate import schema_problem, train_cost_problem


def timing_path(results_dir: str | Path, preset: str, quick: bool = False) -> Path:
    """Where ``python -m attnlib time`` writes (a --quick run never replaces a measurement)."""
    return Path(results_dir) / "timing" / f"{preset}{'-quick' if quick else ''}.json"


def train_cost_path(results_dir: str | Path, preset: str) -> Path:
    """Where ``python -m attnlib train-cost`` writes."""
    return Path(results_dir) / "train_cost" / f"{preset}.json"


def _jsonable(model_config: dict) -> dict:
    return json.loads(json.dumps(model_config, default=list))


def _read(path: Path, problem, unused: str) -> dict | None:
    """The saved report at ``path``, or None when there is none, or it is unreadable or damaged (``problem``
    (report) names what is wrong: said in one line, with what is then ``unused``)."""
    if not path.exists() and not path.is_symlink():
        return None
    try:
        report = read_json(path)
        wrong = problem(report)
    except (OSError, ValueError) as err:
        wrong = f"unreadable ({type(err).__name__}: {err})"
    if wrong:
        logging.getLogger("attnlib").warning("%s is damaged (%s); %s", path, wrong, unused)
        return None
    return report


def load(results_dir: str | Path, preset: str) -> dict | None:
    """The saved timing report of ``preset``, or None when there is none, or it is unreadable or damaged
    (not what attnlib/results/schema.yaml's "timing" allows: said in one line, and the wall times are then shown
    as not measured)."""
    timing_problem = functools.partial(schema_problem, name="timing")
    return _read(timing_path(results_dir, preset), timing_problem, "its wall times are not used")


def train_cost_report(results_dir: str | Path, preset: str) -> dict | None:
    """The saved train-cost report of `preset`, or None when there is none, or it is unreadable or damaged
    (not what `attnlib.results.validate.train_cost_problem` asks: said in one line, and the ledger's train-cost
    row is then not measured)."""
    path = train_cost_path(results_dir, preset)
    return _read(path, train_cost_problem, "the ledger's training cost is not measured")


def wall_times(report: dict | None, preset: str) -> dict[str, dict]:
    """{experiment: its entry in ``report["models"]``} for the models measured with the configuration the
    registry gives them now at ``preset`` (an entry of another configuration is left out: not measured)."""
    if not report or report.get("preset") != preset or report.get("quick"):
        return {}
    out = {}
    for name, m in report.get("models", {}).items():
        if name not in experiments.EXPERIMENTS:
            continue
        rc = experiments.resolve(name, preset)
        if m.get("family") == rc.family and m.get("model") == _jsonable(rc.model):
            out[name] = m
    return out


def table(report: dict):
    """One row per timed model: median (quartiles) in ms, parameters, and the HA/model ratio of the pairs."""
    import pandas as pd

    rows = []
    for name, m in report["models"].items():
        r = report["ratios"].get(name)
        rows.append(
            {
                "experiment": name,
                "median ms": round(m["median_ms"], 3),
                "p25–p75 ms": f"{m['p25_ms']:.2f}–{m['p75_ms']:.2f}",
                "params": m["params"],
                "HA / model (quartiles over rounds)": ""
                if r is None
                else f"{r['ratio']:.2f} ({r['round_ratio_p25']:.2f}–{r['round_ratio_p75']:.2f})",
            }
        )
    return pd.DataFrame(rows)


#: Other work may use this much of a core beyond the cores a measurement leaves free before its cores count
#: as shared (load averages are averages: a short job of another user is not a second tenant).
SHARED_MARGIN = 0.5


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


def threads_words(threads) -> str:
    """``threads`` CPU threads in words, singular or plural: "1 thread", "2 threads" (as given when not an int)."""
    return f"{threads} thread" + ("" if threads == 1 else "s")


def device_words(device: str) -> str:
    """A saved run's device name as a reader reads it: "(1 threads)" (how runs saved before 2026-12-02 named a
    one-thread CPU; ``attnlib.lab.measure.device_name`` now writes "(1 thread)") as "(1 thread)"; any other name
    unchanged."""
    return re.sub(r"\((\d+) threads\)", lambda m: f"({threads_words(int(m[1]))})", str(device))


def machine_words(m: dict, threads) -> str:
    """A report's machine (`attnlib.lab.machine.machine`) in words: CPU, instruction sets, torch, CPU
    capability and ``threads``."""
    flags = ", ".join(m.get("cpu_flags") or []) or "none of avx2 / avx512 / amx reported"
    return (
        f"{m.get('cpu')} (instruction sets: {flags}; torch {m.get('torch')}, CPU capability "
        f"{m.get('cpu_capability')}), {threads_words(threads)}"
    )


def machine_line(report: dict) -> str:
    """One sentence: which machine, instruction sets, threads and load the timing comes from."""
    m, load, p = report["machine"], report["load"], report["protocol"]
    verdict = (
        "the cores were shared with other work, so read the times as upper bounds and the ratios as rough"
        if load["shared"]
        else "the cores were otherwise idle"
    )
    return (
        f"Wall times measured together in one process on {machine_words(m, p['threads'])}, {p['warmup']} "
        f"warm-up and {p['reps']} timed single-image passes per model in {p['rounds']} interleaved rounds, "
        f"{report.get('finished', '')}; 1-minute load average {load['load_before']} before and "
        f"{load['load_after']} after on {m.get('usable_cores')} cores: {verdict}."
    )
